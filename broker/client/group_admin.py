"""``GroupAdmin``: list, describe and delete consumer groups; read, set and delete their offsets.

What ``kafka-consumer-groups`` and Kafka's Java ``Admin`` do, over the classic group APIs:

- ListGroups goes to *every* broker (each knows only the groups it coordinates); v4+ filters by
  state on the broker (KIP-518).
- DescribeGroups, DeleteGroups, OffsetFetch, OffsetCommit and OffsetDelete go to the group's
  coordinator (FindCoordinator). NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and
  COORDINATOR_LOAD_IN_PROGRESS mean "the coordinator moved or is loading": look it up again and
  retry until ``request_timeout_ms`` (reference coordinators.md section 2, Loading and unloading).
- Offsets are set with a "simple" commit: generation -1 and an empty member id, the commit of an
  ``assign()`` user. The coordinator accepts it only while the group has no active members
  (Empty, or a group it has never seen); otherwise it answers UNKNOWN_MEMBER_ID (Kafka 4's
  ``ClassicGroup.validateOffsetCommit``), which is why the tools refuse to reset an active group.

DescribeGroups carries each member's subscription and assignment as opaque bytes; for groups of
protocol type ``consumer`` they are decoded with ``broker.wire.consumer_protocol`` so a caller sees
topics and partitions. Every broker error comes back as a ``KafkaError`` whose message names the
group (and partition), e.g. ``NON_EMPTY_GROUP (68): group 'loads': The group is not empty.``
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.coordinator import KEY_TYPE_GROUP, find_coordinator
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import BrokerInfo, Cluster
from broker.wire import API_SPECS, ApiKey, ErrorCode, WireError, consumer_protocol

__all__ = [
    "GroupAdmin", "GroupListing", "GroupDescription", "MemberDescription", "CommittedOffset",
    "CONSUMER_PROTOCOL_TYPE", "GROUP_STATES",
]

TopicPartition = tuple[str, int]
CONSUMER_PROTOCOL_TYPE = "consumer"
# The classic group states as DescribeGroups and ListGroups v4+ spell them.
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Empty", "Dead")
_SIMPLE_GENERATION = -1  # with an empty member id: a commit from outside group management
_COORDINATOR_MOVED = frozenset({
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "consumer", "" for a group that only ever had simple commits
    state: str | None  # None when the broker answered ListGroups below v4

    @property
    def is_consumer_group(self) -> bool:
        """Kafka's ``listConsumerGroups`` rule: protocol type ``consumer`` or empty."""
        return self.protocol_type in (CONSUMER_PROTOCOL_TYPE, "")


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    topics: tuple[str, ...]  # subscribed topics (consumer protocol), () if not decodable
    assignment: tuple[TopicPartition, ...]  # assigned partitions, sorted; () before SyncGroup
    metadata: bytes  # the raw bytes, for protocols other than "consumer"
    assignment_bytes: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # one of GROUP_STATES; "Dead" for a group the coordinator does not know
    protocol_type: str
    protocol: str  # the chosen assignor ("range"), "" when the group is not Stable
    members: tuple[MemberDescription, ...]
    coordinator: BrokerInfo

    @property
    def is_active(self) -> bool:
        """Has members: offsets cannot be reset, the group cannot be deleted."""
        return self.state not in ("Empty", "Dead")


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1: unknown
    metadata: str | None


class GroupAdmin:
    """Blocking group operations against one cluster. Not thread-safe; close() when done.
    Pass ``cluster`` to share an ``AdminClient``'s connections (then closing is its owner's)."""

    def __init__(self, bootstrap_servers: str | None = None, *, config: ClientConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK, cluster: Cluster | None = None) -> None:
        if cluster is None and bootstrap_servers is None:
            raise ValueError("GroupAdmin needs bootstrap_servers or a cluster")
        self._owns_cluster = cluster is None
        self.cluster = cluster or Cluster(bootstrap_servers, config, clock)
        self.config = self.cluster.config
        self.clock = self.cluster.clock
        self._coordinators: dict[str, BrokerInfo] = {}

    def close(self) -> None:
        if self._owns_cluster:
            self.cluster.close()

    def __enter__(self) -> "GroupAdmin":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ groups

    def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """Every group of every broker, sorted by id; only those in ``states`` if given (which
        needs ListGroups v4, Kafka 2.6+)."""
        wanted = [_state_name(s) for s in states] if states else []
        out: dict[str, GroupListing] = {}
        for node_id in sorted(self.cluster.brokers):
            for listing in self._list_groups_of(node_id, wanted):
                out[listing.group_id] = listing
        return [out[g] for g in sorted(out)]

    def describe_groups(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        """State, protocol and members of each group, asked of its coordinator."""
        out: dict[str, GroupDescription] = {}
        for group in _unique(groups):
            response, coordinator = self._to_coordinator(group, ApiKey.DESCRIBE_GROUPS, lambda v: {
                "groups": [group], "include_authorized_operations": False,
            }, lambda r: _describe_error(r))
            if not response.groups:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"group {group!r}: DescribeGroups answered nothing")
            out[group] = _description(response.groups[0], coordinator)
        return out

    def describe_group(self, group: str) -> GroupDescription:
        return self.describe_groups([group])[group]

    def delete_groups(self, groups: Sequence[str]) -> dict[str, KafkaError | None]:
        """Delete each group (and its offsets); per group ``None`` or the error, e.g.
        NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND for an unknown group."""
        out: dict[str, KafkaError | None] = {}
        for group in _unique(groups):
            def code_of(response) -> int:
                return next((r.error_code for r in response.results if r.group_id == group), ErrorCode.NONE)
            try:
                self._to_coordinator(group, ApiKey.DELETE_GROUPS, lambda v: {"groups_names": [group]}, code_of)
                out[group] = None
            except KafkaError as exc:
                if exc.code in _COORDINATOR_MOVED or isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
                    raise
                out[group] = exc
        return out

    def delete_group(self, group: str) -> None:
        error = self.delete_groups([group])[group]
        if error is not None:
            raise error

    # ------------------------------------------------------------------ offsets

    def list_group_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None
                           ) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (of ``partitions`` only, if given), sorted; a partition
        without a committed offset is left out (the broker answers -1 for it)."""
        wanted = None if partitions is None else sorted(set(partitions))
        response, _ = self._to_coordinator(
            group, ApiKey.OFFSET_FETCH, lambda v: _offset_fetch_body(group, wanted, v),
            lambda r: _offset_fetch_error(r, group))
        out: dict[TopicPartition, CommittedOffset] = {}
        for topic in _offset_fetch_topics(response, group):
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(p.error_code, f"group {group!r}, {tp[0]}-{tp[1]}: "
                                     f"{KafkaError(p.error_code).message}")
                if p.committed_offset >= 0:
                    out[tp] = CommittedOffset(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                              p.metadata)
        return dict(sorted(out.items()))

    def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int],
                            metadata: str | None = "") -> None:
        """Set the group's offsets with a simple commit (generation -1, no member id). Refused by
        the coordinator (UNKNOWN_MEMBER_ID) while the group has active members."""
        for (topic, partition), offset in offsets.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"group {group!r}, {topic}-{partition}: an offset is an int >= 0, got {offset!r}")
        if not offsets:
            return
        by_topic: dict[str, list[dict]] = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic[topic].append({"partition_index": partition, "committed_offset": offset,
                                    "committed_leader_epoch": -1, "committed_metadata": metadata})
        topics = [{"name": t, "partitions": parts} for t, parts in by_topic.items()]
        response, _ = self._to_coordinator(
            group, ApiKey.OFFSET_COMMIT, lambda v: _simple_commit_body(group, topics), _commit_retry_code)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(p.error_code, f"group {group!r}, {t.name}-{p.partition_index}: "
                                     f"{_commit_error_text(p.error_code)}")

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]
                       ) -> dict[TopicPartition, KafkaError | None]:
        """Delete the group's committed offsets of ``partitions`` (OffsetDelete, KIP-496); per
        partition ``None`` or its error (GROUP_SUBSCRIBED_TO_TOPIC while a member subscribes to
        the topic). A group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) raises."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(set(partitions)):
            by_topic[topic].append(partition)
        if not by_topic:
            return {}
        body = {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by_topic.items()]}
        response, _ = self._to_coordinator(group, ApiKey.OFFSET_DELETE, lambda v: body, lambda r: r.error_code)
        out: dict[TopicPartition, KafkaError | None] = {}
        for t in response.topics:
            for p in t.partitions:
                code = p.error_code
                out[(t.name, p.partition_index)] = None if code == ErrorCode.NONE else KafkaError(
                    code, f"group {group!r}, {t.name}-{p.partition_index}: {KafkaError(code).message}")
        return dict(sorted(out.items()))

    # ------------------------------------------------------------------ coordinator

    def coordinator(self, group: str) -> BrokerInfo:
        """FindCoordinator for ``group``, cached until a coordinator error; retried while the
        offsets topic is being created (COORDINATOR_NOT_AVAILABLE)."""
        cached = self._coordinators.get(group)
        if cached is None:
            node_id, host, port = find_coordinator(self.cluster, group, KEY_TYPE_GROUP)
            cached = self._coordinators[group] = BrokerInfo(node_id, host, port)
        return cached

    def _to_coordinator(self, group: str, api_key: int, body: Callable[[int], dict],
                        error_of: Callable[[object], int]) -> tuple[object, BrokerInfo]:
        """Send to the group's coordinator; retry (with a fresh FindCoordinator) while the
        coordinator moved or is loading, until ``request_timeout_ms``. Any other non-zero
        ``error_of(response)`` raises ``KafkaError`` naming the group."""
        if not isinstance(group, str) or not group:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, f"group id {group!r}: must be a non-empty string")
        deadline = self.clock.monotonic_ms() + self.config.request_timeout_ms
        while True:
            try:
                coordinator = self.coordinator(group)
                conn = self.cluster.connection(coordinator.node_id)
                version = conn.version_for(api_key)
                response = conn.request(api_key, body(version), version)
                code = error_of(response)
                if code == ErrorCode.NONE:
                    return response, coordinator
                if code not in _COORDINATOR_MOVED:
                    raise KafkaError(code, f"group {group!r}: {_group_error_text(code)}")
                error: KafkaError = KafkaError(code, f"group {group!r}: {KafkaError(code).message}")
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                error = exc
                self.cluster.invalidate()
            self._coordinators.pop(group, None)
            if self.clock.monotonic_ms() >= deadline:
                raise error
            self.clock.sleep_ms(self.config.retry_backoff_ms)

    def _list_groups_of(self, node_id: int, states: list[str]) -> list[GroupListing]:
        deadline = self.clock.monotonic_ms() + self.config.request_timeout_ms
        while True:
            conn = self.cluster.connection(node_id)
            version = conn.version_for(ApiKey.LIST_GROUPS, min_version=4 if states else 0)
            body = {"states_filter": states, "types_filter": []}
            response = conn.request(ApiKey.LIST_GROUPS, body, version)
            if response.error_code == ErrorCode.NONE:
                return [GroupListing(g.group_id, g.protocol_type, g.group_state if version >= 4 else None)
                        for g in response.groups]
            if response.error_code not in _COORDINATOR_MOVED or self.clock.monotonic_ms() >= deadline:
                raise KafkaError(response.error_code, f"ListGroups on broker {node_id}: "
                                 f"{KafkaError(response.error_code).message}")
            self.clock.sleep_ms(self.config.retry_backoff_ms)


# ---------------------------------------------------------------------- pure helpers

def _unique(groups: Sequence[str]) -> list[str]:
    if isinstance(groups, str):
        raise TypeError("pass a list of group ids, not one string")
    return list(dict.fromkeys(groups))


def _state_name(state: str) -> str:
    """Kafka's spelling of a state given in any case ("stable" -> "Stable")."""
    for name in GROUP_STATES:
        if name.lower() == str(state).lower():
            return name
    raise ValueError(f"unknown group state {state!r}: one of {', '.join(GROUP_STATES)}")


def _group_error_text(code: int) -> str:
    if code == ErrorCode.NON_EMPTY_GROUP:
        return "The group is not empty (it has active members)."
    return KafkaError(code).message


def _commit_retry_code(response) -> int:
    """OffsetCommit has only partition errors; a coordinator that moved or is loading answers
    the same code for every partition: retry the whole commit. Other codes are per partition."""
    codes = {p.error_code for t in response.topics for p in t.partitions}
    moved = codes & _COORDINATOR_MOVED
    return min(moved) if moved else ErrorCode.NONE


def _commit_error_text(code: int) -> str:
    if code == ErrorCode.UNKNOWN_MEMBER_ID:
        return ("the coordinator refused a commit from outside the group (UNKNOWN_MEMBER_ID): "
                "the group has active members; stop its consumers first")
    return KafkaError(code).message


def _simple_commit_body(group: str, topics: list[dict]) -> dict:
    # The generation field is "GenerationIdOrMemberEpoch" in Kafka 3.6+'s JSON, "GenerationId"
    # before: fill both spellings and keep the one the spec has.
    body = {"group_id": group, "generation_id_or_member_epoch": _SIMPLE_GENERATION,
            "generation_id": _SIMPLE_GENERATION, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": topics}
    known = {f.name for f in API_SPECS[ApiKey.OFFSET_COMMIT].request.fields}
    return {k: v for k, v in body.items() if k in known}


def _offset_fetch_body(group: str, partitions: list[TopicPartition] | None, version: int) -> dict:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for t, p in partitions:
            by_topic[t].append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    if version >= 8:  # KIP-709: a batch of groups
        return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
                "require_stable": False}
    if topics is None and version < 2:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "OffsetFetch below v2 cannot ask for all topics")
    return {"group_id": group, "topics": topics, "require_stable": False}


def _describe_error(response) -> int:
    """GROUP_ID_NOT_FOUND is an answer (a Dead group), not an error: DescribeGroups v6 says it
    where older versions answer state Dead."""
    code = response.groups[0].error_code if response.groups else ErrorCode.NONE
    return ErrorCode.NONE if code == ErrorCode.GROUP_ID_NOT_FOUND else code


def _offset_fetch_error(response, group: str) -> int:
    if getattr(response, "groups", None):
        answer = next((g for g in response.groups if g.group_id == group), response.groups[0])
        return answer.error_code
    return getattr(response, "error_code", ErrorCode.NONE) or ErrorCode.NONE


def _offset_fetch_topics(response, group: str) -> list:
    if getattr(response, "groups", None):
        answer = next((g for g in response.groups if g.group_id == group), response.groups[0])
        return list(answer.topics)
    return list(response.topics)


def _description(answer, coordinator: BrokerInfo) -> GroupDescription:
    state = "Dead" if answer.error_code == ErrorCode.GROUP_ID_NOT_FOUND else answer.group_state
    consumer = answer.protocol_type == CONSUMER_PROTOCOL_TYPE
    members = tuple(_member(m, consumer) for m in answer.members)
    return GroupDescription(answer.group_id, state, answer.protocol_type, answer.protocol_data,
                            members, coordinator)


def _member(m, consumer: bool) -> MemberDescription:
    topics: tuple[str, ...] = ()
    assignment: tuple[TopicPartition, ...] = ()
    if consumer:
        topics, assignment = _decode_consumer_member(m.member_metadata, m.member_assignment)
    return MemberDescription(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                             topics, assignment, bytes(m.member_metadata), bytes(m.member_assignment))


def _decode_consumer_member(metadata: bytes, assignment: bytes) -> tuple[tuple[str, ...], tuple[TopicPartition, ...]]:
    """Subscribed topics and assigned partitions from the embedded consumer protocol bytes
    (empty bytes: not yet synced). Bytes that do not decode give ``()``: a describe must still
    show the group (Kafka's admin client would fail the whole describe)."""
    topics: tuple[str, ...] = ()
    partitions: tuple[TopicPartition, ...] = ()
    try:
        if metadata:
            topics = tuple(sorted(consumer_protocol.decode_subscription(bytes(metadata)).topics))
        if assignment:
            decoded = consumer_protocol.decode_assignment(bytes(assignment))
            partitions = tuple(sorted(_assigned(decoded)))
    except (WireError, ValueError):
        pass
    return topics, partitions


def _assigned(decoded) -> Iterable[TopicPartition]:
    for entry in decoded.assigned_partitions:
        for p in entry.partitions:
            yield (entry.topic, p)
