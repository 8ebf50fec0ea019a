"""A small harness around ``GroupCoordinatorCore`` for the unit tests: builds the wire requests,
numbers tokens, carries out Appends (succeeding unless told otherwise) and keeps the replies."""

from __future__ import annotations

import random
import struct

from broker.coordinator.group.core import Append, GroupCoordinatorCore, GroupSettings, Reply, partition_for
from broker.wire.apis.delete_groups import DeleteGroupsRequest
from broker.wire.apis.describe_groups import DescribeGroupsRequest
from broker.wire.apis.heartbeat import HeartbeatRequest
from broker.wire.apis.join_group import JoinGroupRequest
from broker.wire.apis.leave_group import LeaveGroupRequest
from broker.wire.apis.list_groups import ListGroupsRequest
from broker.wire.apis.offset_commit import OffsetCommitRequest
from broker.wire.apis.offset_delete import OffsetDeleteRequest
from broker.wire.apis.offset_fetch import OffsetFetchRequest
from broker.wire.apis.sync_group import SyncGroupRequest

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
COMMIT, FETCH, OFFSET_DELETE = 8, 9, 47
LIST, DESCRIBE, DELETE = 16, 15, 42

GROUP = "g"
SETTINGS = GroupSettings(num_partitions=4, initial_rebalance_delay_ms=0)


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, [string] topics, nullable bytes user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(self, settings: GroupSettings = SETTINGS, seed: int = 1, load_all: bool = True):
        self.core = GroupCoordinatorCore(settings, random.Random(seed))
        self.settings = settings
        self.now = 1_000
        self.replies: dict = {}
        self.pending: list[Append] = []
        self.log: dict[int, list] = {p: [] for p in range(settings.num_partitions)}
        self.auto_write = True
        self.fail_code = 0
        self._tokens = 0
        if load_all:
            for p in range(settings.num_partitions):
                self.run(self.core.load_partition(p, [], self.now))

    # -- plumbing -----------------------------------------------------------------------------
    def run(self, effects):
        for e in effects:
            if isinstance(e, Reply):
                assert e.token not in self.replies, f"token {e.token} answered twice"
                self.replies[e.token] = e.response
            else:
                self.pending.append(e)
        if self.auto_write:
            self.flush()

    def flush(self, error_code: int | None = None):
        while self.pending:
            append = self.pending.pop(0)
            code = self.fail_code if error_code is None else error_code
            if code == 0:
                self.log[append.partition].extend(append.records)
            self.run(self.core.write_done(append.write_id, code, self.now))

    def request(self, api_key, version, req, client_id="c", host="/127.0.0.1"):
        self._tokens += 1
        token = self._tokens
        self.run(self.core.handle(token, api_key, version, req, client_id, host, self.now))
        return token

    def answer(self, token):
        return self.replies.get(token)

    def advance(self, ms):
        self.now += ms
        self.run(self.core.tick(self.now))

    def tick(self):
        self.run(self.core.tick(self.now))

    def group(self, group_id=GROUP):
        for g in self.core.groups():
            if g.group_id == group_id:
                return g
        return None

    def reload(self, partition=None):
        partition = partition_for(GROUP, self.settings.num_partitions) if partition is None else partition
        self.run(self.core.unload_partition(partition))
        self.run(self.core.load_partition(partition, list(self.log[partition]), self.now))

    # -- requests -----------------------------------------------------------------------------
    def join(self, member_id="", version=5, group_id=GROUP, session=10_000, rebalance=30_000,
             instance_id=None, protocols=(("range", subscription("t")),), protocol_type="consumer",
             client_id="c"):
        req = JoinGroupRequest(group_id=group_id, session_timeout_ms=session,
                               rebalance_timeout_ms=rebalance, member_id=member_id,
                               group_instance_id=instance_id, protocol_type=protocol_type,
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                                          for n, m in protocols])
        return self.request(JOIN, version, req, client_id=client_id)

    def join_new(self, version=5, **kw):
        """Join with the v4+ handshake; returns the token of the second (real) JoinGroup."""
        if version >= 4 and kw.get("instance_id") is None:
            first = self.join(version=version, **kw)
            assert self.answer(first).error_code == 79, self.answer(first)
            kw["member_id"] = self.answer(first).member_id
        return self.join(version=version, **kw)

    def sync(self, member_id, generation, assignments=None, version=3, group_id=GROUP, instance_id=None):
        cls = SyncGroupRequest.SyncGroupRequestAssignment
        req = SyncGroupRequest(group_id=group_id, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id,
                               assignments=[cls(member_id=m, assignment=a) for m, a in (assignments or {}).items()])
        return self.request(SYNC, version, req)

    def heartbeat(self, member_id, generation, version=3, group_id=GROUP, instance_id=None):
        req = HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id)
        return self.request(HEARTBEAT, version, req)

    def leave(self, members, version=3, group_id=GROUP):
        if version >= 3:
            cls = LeaveGroupRequest.MemberIdentity
            req = LeaveGroupRequest(group_id=group_id, members=[
                cls(member_id=m, group_instance_id=i) for m, i in members])
        else:
            req = LeaveGroupRequest(group_id=group_id, member_id=members[0][0])
        return self.request(LEAVE, version, req)

    def commit(self, offsets, member_id="", generation=-1, version=7, group_id=GROUP,
               metadata="", instance_id=None):
        tcls = OffsetCommitRequest.OffsetCommitRequestTopic
        pcls = OffsetCommitRequest.OffsetCommitRequestPartition
        by_topic: dict = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(pcls(partition_index=p, committed_offset=o,
                                                   committed_leader_epoch=3, committed_metadata=metadata))
        req = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation,
                                  member_id=member_id, group_instance_id=instance_id,
                                  topics=[tcls(name=t, partitions=ps) for t, ps in by_topic.items()])
        return self.request(COMMIT, version, req)

    def fetch(self, topics=None, version=7, group_id=GROUP):
        cls = OffsetFetchRequest.OffsetFetchRequestTopic
        req = OffsetFetchRequest(group_id=group_id, topics=None if topics is None else [
            cls(name=t, partition_indexes=ps) for t, ps in topics.items()])
        return self.request(FETCH, version, req)


def commit_codes(response) -> dict:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetched(response) -> dict:
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}
