"""Raw group requests for the peer tier's group error tests: the same JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups and DeleteGroups to
Apache Kafka and to pylog, on a plain socket (``wire_probe.connect``), answers reduced to error
code names and the fields a client acts on.

A one-broker peer is every group's coordinator, so requests go to ``peer.ports[0]``. Request
bodies are dicts in Kafka's JSON field names (snake_case), so they read like the protocol.
"""

from __future__ import annotations

import struct
import time

from wire_probe import connect

from broker.wire import ApiKey, ErrorCode

__all__ = ["VERSIONS", "SESSION_TIMEOUT_MS", "REBALANCE_TIMEOUT_MS", "GroupWire", "Member", "join_body",
           "sync_body", "consumer_subscription", "consumer_assignment", "error_name"]

# The versions compared: the newest each side's codec and Kafka 4.1 share (checked against Kafka
# by test_peer_group_wire.py), the ones Kafka's Java client sends to a classic group.
VERSIONS = {
    ApiKey.JOIN_GROUP: 9, ApiKey.SYNC_GROUP: 5, ApiKey.HEARTBEAT: 4, ApiKey.LEAVE_GROUP: 5,
    ApiKey.OFFSET_COMMIT: 9, ApiKey.OFFSET_FETCH: 9, ApiKey.DESCRIBE_GROUPS: 6, ApiKey.LIST_GROUPS: 5,
    ApiKey.DELETE_GROUPS: 2, ApiKey.OFFSET_DELETE: 0,
}
SESSION_TIMEOUT_MS = 6_000  # Kafka's default group.min.session.timeout.ms (the tier allows 1 s)
REBALANCE_TIMEOUT_MS = 10_000
CLIENT_ID = "peer-tier"
_LOADING = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
READY_TIMEOUT_S = 15.0


def error_name(code: int) -> str:
    return ErrorCode(code).name


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def consumer_subscription(topics: list[str]) -> bytes:
    """``ConsumerProtocolSubscription`` v0: int16 version, topics [string], user data (null)."""
    return struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics) + struct.pack(">i", -1)


def consumer_assignment(assignment: dict[str, list[int]]) -> bytes:
    """``ConsumerProtocolAssignment`` v0: int16 version, [topic, [partition int32]], user data (null)."""
    body = struct.pack(">hi", 0, len(assignment))
    for topic, partitions in assignment.items():
        body += _string(topic) + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return body + struct.pack(">i", -1)


def join_body(group: str, member_id: str = "", *, session_timeout_ms: int = SESSION_TIMEOUT_MS,
              protocol_type: str = "consumer", protocols: list[tuple[str, bytes]] | None = None,
              group_instance_id: str | None = None) -> dict:
    """A JoinGroup body; ``protocols`` default to ``range`` with an empty subscription."""
    if protocols is None:
        protocols = [("range", consumer_subscription([]))]
    return {"group_id": group, "session_timeout_ms": session_timeout_ms,
            "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS, "member_id": member_id,
            "group_instance_id": group_instance_id, "protocol_type": protocol_type,
            "protocols": [{"name": name, "metadata": metadata} for name, metadata in protocols]}


def sync_body(group: str, member_id: str, generation_id: int, assignments: dict[str, bytes] | None = None,
              group_instance_id: str | None = None) -> dict:
    """A SyncGroup body; only the leader sends ``assignments`` (member id -> assignment bytes)."""
    return {"group_id": group, "generation_id": generation_id, "member_id": member_id,
            "group_instance_id": group_instance_id, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}


class Member:
    """A member that has joined and synced: its id and generation."""

    def __init__(self, member_id: str, generation_id: int) -> None:
        self.member_id = member_id
        self.generation_id = generation_id


class GroupWire:
    """One connection to a peer's coordinator. ``call`` sends a body at ``VERSIONS[api_key]``
    (or ``version``); the helpers build the usual bodies."""

    def __init__(self, peer) -> None:
        self.peer = peer
        self.raw = connect(peer)
        self.raw.client_id = CLIENT_ID

    def __enter__(self) -> "GroupWire":
        return self

    def __exit__(self, *exc) -> None:
        self.raw.close()

    def call(self, api_key: int, body: dict, version: int | None = None):
        return self.raw.call(api_key, VERSIONS[api_key] if version is None else version, body)

    def send(self, api_key: int, body: dict) -> int:
        """Send without waiting (a JoinGroup or SyncGroup the coordinator parks); the answer is
        ``receive(api_key, correlation id)``'s."""
        return self.raw.send(api_key, VERSIONS[api_key], body)

    def receive(self, api_key: int, correlation_id: int):
        return self.raw.receive(api_key, VERSIONS[api_key], correlation_id)

    def ready(self, group: str) -> None:
        """Until ``group``'s coordinator answers for it: both systems create ``__consumer_offsets``
        on the first FindCoordinator and answer COORDINATOR_LOAD_IN_PROGRESS (or NOT_COORDINATOR)
        while its partition loads; no scenario should start inside that window."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            self.call(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, version=3)
            [answer] = self.describe([group])
            if answer.error_code not in _LOADING:
                return
            assert time.monotonic() < deadline, f"{self.peer}: {group} still {error_name(answer.error_code)}"
            time.sleep(0.05)

    # ------------------------------------------------------------------------- the group APIs

    def join(self, group: str, member_id: str = "", *, version: int | None = None, **options):
        return self.call(ApiKey.JOIN_GROUP, join_body(group, member_id, **options), version)

    def sync(self, group: str, member_id: str, generation_id: int, assignments: dict[str, bytes] | None = None,
             group_instance_id: str | None = None):
        return self.call(ApiKey.SYNC_GROUP, sync_body(group, member_id, generation_id, assignments,
                                                      group_instance_id))

    def heartbeat(self, group: str, member_id: str, generation_id: int, group_instance_id: str | None = None) -> str:
        answer = self.call(ApiKey.HEARTBEAT, {"group_id": group, "generation_id": generation_id,
                                              "member_id": member_id, "group_instance_id": group_instance_id})
        return error_name(answer.error_code)

    def leave(self, group: str, member_ids: list[str]) -> tuple[str, list[tuple[str, str]]]:
        answer = self.call(ApiKey.LEAVE_GROUP, {"group_id": group, "members": [
            {"member_id": m, "group_instance_id": None} for m in member_ids]})
        return error_name(answer.error_code), [(m.member_id, error_name(m.error_code)) for m in answer.members]

    def commit(self, group: str, offsets: dict[tuple[str, int], int], member_id: str = "",
               generation_id: int = -1, version: int | None = None, group_instance_id: str | None = None,
               metadata: str | None = None) -> dict[tuple[str, int], str]:
        """OffsetCommit; each offset's metadata is ``m<offset>`` unless ``metadata`` is given."""
        topics: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                 "committed_metadata": f"m{offset}" if metadata is None else metadata})
        answer = self.call(ApiKey.OFFSET_COMMIT, {
            "group_id": group, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
            "group_instance_id": group_instance_id,
            "topics": [{"name": t, "partitions": p} for t, p in topics.items()]}, version)
        return {(t.name, p.partition_index): error_name(p.error_code) for t in answer.topics for p in t.partitions}

    def fetch_offsets(self, group: str, partitions: list[tuple[str, int]] | None,
                      version: int | None = None) -> tuple[str, dict[tuple[str, int], tuple]]:
        """(group error, {(topic, partition): (offset, metadata, error)}); ``partitions`` None
        asks for every partition the group has offsets for."""
        version = VERSIONS[ApiKey.OFFSET_FETCH] if version is None else version
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]
        if version >= 8:
            answer = self.call(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": topics}]}, version)
            [answer] = answer.groups
        else:
            answer = self.call(ApiKey.OFFSET_FETCH, {"group_id": group, "topics": topics}, version)
        return error_name(answer.error_code), {
            (t.name, p.partition_index): (p.committed_offset, p.metadata, error_name(p.error_code))
            for t in answer.topics for p in t.partitions}

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]]) -> tuple[str, dict[tuple[str, int], str]]:
        """OffsetDelete v0: (group error, {(topic, partition): error})."""
        by_topic: dict[str, list[dict]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append({"partition_index": partition})
        answer = self.call(ApiKey.OFFSET_DELETE, {"group_id": group, "topics": [
            {"name": t, "partitions": p} for t, p in by_topic.items()]}, version=0)
        return error_name(answer.error_code), {
            (t.name, p.partition_index): error_name(p.error_code) for t in answer.topics for p in t.partitions}

    def describe(self, groups: list[str]) -> list:
        return self.call(ApiKey.DESCRIBE_GROUPS, {"groups": groups, "include_authorized_operations": False}).groups

    def list_groups(self, states: list[str] | None = None) -> dict[str, tuple[str, str, str]]:
        """{group: (protocol type, state, type)} of ListGroups v5 (``states`` filters, v4+)."""
        answer = self.call(ApiKey.LIST_GROUPS, {"states_filter": states or [], "types_filter": []})
        assert answer.error_code == ErrorCode.NONE, error_name(answer.error_code)
        return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in answer.groups}

    def delete_groups(self, groups: list[str]) -> dict[str, str]:
        answer = self.call(ApiKey.DELETE_GROUPS, {"groups_names": groups})
        return {r.group_id: error_name(r.error_code) for r in answer.results}

    # ------------------------------------------------------------------ a member, step by step

    def join_new_member(self, group: str, topics: list[str], version: int | None = None,
                        session_timeout_ms: int = SESSION_TIMEOUT_MS) -> tuple[str, object]:
        """JoinGroup v4+'s two steps (KIP-394): the first answer is MEMBER_ID_REQUIRED with the
        member id to use; the second joins. Returns (member id, second answer)."""
        options = {"protocols": [("range", consumer_subscription(topics))], "session_timeout_ms": session_timeout_ms}
        first = self.join(group, version=version, **options)
        assert error_name(first.error_code) == "MEMBER_ID_REQUIRED", error_name(first.error_code)
        second = self.join(group, first.member_id, version=version, **options)
        return first.member_id, second

    def stable_member(self, group: str, topic: str, partitions: list[int],
                      session_timeout_ms: int = SESSION_TIMEOUT_MS) -> Member:
        """A one-member group, Stable: the member joins, leads, and syncs ``partitions`` of
        ``topic`` to itself."""
        member_id, joined = self.join_new_member(group, [topic], session_timeout_ms=session_timeout_ms)
        assert error_name(joined.error_code) == "NONE", error_name(joined.error_code)
        synced = self.sync(group, member_id, joined.generation_id,
                           {member_id: consumer_assignment({topic: partitions})})
        assert error_name(synced.error_code) == "NONE", error_name(synced.error_code)
        return Member(member_id, joined.generation_id)
