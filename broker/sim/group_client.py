"""The model consumer of the group simulation tier (``broker.sim.groups``): the classic member
protocol as the Java client runs it with eager rebalancing — the v4 member-id handshake, range
assignment by the leader, commit before rejoining, fetch after SyncGroup, heartbeats at a third
of the session — plus its faults (stop, leave and return, restart)."""

from __future__ import annotations

from broker.coordinator.group.group import decode_subscription_topics
from broker.wire.apis.heartbeat import HeartbeatRequest
from broker.wire.apis.join_group import JoinGroupRequest
from broker.wire.apis.leave_group import LeaveGroupRequest
from broker.wire.apis.offset_commit import OffsetCommitRequest
from broker.wire.apis.offset_fetch import OffsetFetchRequest
from broker.wire.apis.sync_group import SyncGroupRequest

__all__ = ["GroupClient", "subscription", "encode_assignment", "decode_assignment", "range_assignment",
           "GROUP", "TOPIC", "JOIN", "SYNC", "HEARTBEAT", "LEAVE", "COMMIT", "FETCH"]

GROUP = "sim-group"
TOPIC = "t"
JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH = 11, 14, 12, 13, 8, 9
RETRIABLE_COORDINATOR = {14, 15, 16}


def subscription(topic: str) -> bytes:
    raw = topic.encode()
    return (0).to_bytes(2, "big") + (1).to_bytes(4, "big") + len(raw).to_bytes(2, "big") + raw + b"\xff\xff\xff\xff"


def encode_assignment(partitions: list[int]) -> bytes:
    return ",".join(map(str, partitions)).encode()


def decode_assignment(data: bytes) -> list[int]:
    return [int(p) for p in bytes(data).decode().split(",") if p]


def range_assignment(member_ids: list[str], partitions: int) -> dict[str, list[int]]:
    """Kafka's RangeAssignor for one topic: members sorted, the first ``partitions % n`` get one
    more."""
    ordered = sorted(member_ids)
    per, extra = divmod(partitions, len(ordered))
    out, start = {}, 0
    for i, member_id in enumerate(ordered):
        count = per + (1 if i < extra else 0)
        out[member_id] = list(range(start, start + count))
        start += count
    return out


class GroupClient:
    """A model consumer: the member protocol as the Java client runs it (eager rebalancing)."""

    def __init__(self, sim: object, index: int, static: bool) -> None:
        self.sim = sim
        self.name = f"client{index}"
        self.instance_id = f"instance-{index}" if static else None
        self.member_id = ""
        self.generation = -1
        self.owned: list[int] = []
        self.positions: dict[int, int] = {}
        self.state = "idle"  # idle, joining, syncing, stable, committing, stopped
        self.paused_until = -1
        self.inbox: list = []
        self.session_ms = sim.rng.choice([6_000, 8_000, 10_000])
        # JoinGroup v3 has no member-id handshake and no instance id; v9 may skip the assignment
        self.join_version = sim.rng.choice([5, 7, 9] if static else [3, 4, 5, 7, 9])
        self.sync_version = 5 if self.join_version >= 7 else 3
        self.rebalance_ms = sim.rng.choice([10_000, 15_000, 20_000])
        self.epoch = 0  # bumps on every rejoin and restart: stale timers do nothing
        self.life = 0   # bumps on restart: answers to the previous process are not this one's

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self.sim.sched.now_ms < self.paused_until

    def send(self, api_key: int, version: int, request) -> None:
        self.sim.send(self, api_key, version, request)

    def receive(self, api_key: int, response, life: int, member_id: str = "") -> None:
        if life != self.life:
            return  # sent by the process before a restart: its socket is gone
        if api_key in (SYNC, HEARTBEAT, COMMIT) and member_id != self.member_id:
            return  # sent under a member id given up since (Java's client checks the same)
        if self.paused:
            self.inbox.append((api_key, response, life, member_id))
            return
        handler = {JOIN: self.on_join, SYNC: self.on_sync, HEARTBEAT: self.on_heartbeat,
                   LEAVE: lambda r: None, COMMIT: self.on_commit, FETCH: self.on_fetch}[api_key]
        handler(response)

    def resume(self) -> None:
        inbox, self.inbox = self.inbox, []
        for api_key, response, life, member_id in inbox:
            self.receive(api_key, response, life, member_id)

    def later(self, delay_ms: int, action) -> None:
        epoch = self.epoch

        def run():
            if epoch != self.epoch or self.state == "stopped":
                return
            if self.paused:  # a stopped process does its work when it runs again
                self.sim.sched.at(self.paused_until, run)
                return
            action()
        self.sim.sched.after(delay_ms, run)

    # -- the member protocol ------------------------------------------------------------------
    def join(self) -> None:
        self.state = "joining"
        self.owned = []
        self.send(JOIN, self.join_version, JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=self.session_ms, rebalance_timeout_ms=self.rebalance_ms,
            member_id=self.member_id, group_instance_id=self.instance_id, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription(TOPIC))]))

    def on_join(self, r) -> None:
        if self.state != "joining":
            return
        if r.error_code == 79:
            self.member_id = r.member_id
            return self.join()
        if r.error_code == 82:
            self.state = "stopped"  # fenced: another process took over this instance id
            return
        if r.error_code:
            if r.error_code == 25:
                self.member_id = ""
            return self.later(self.sim.rng.randint(20, 200), self.join)
        self.member_id, self.generation = r.member_id, r.generation_id
        assignments = []
        if r.leader == r.member_id and r.members and not (self.join_version >= 9 and r.skip_assignment):
            for m in r.members:
                assert decode_subscription_topics(bytes(m.metadata)) == [TOPIC]
            plan = range_assignment([m.member_id for m in r.members], self.sim.settings.partitions)
            cls = SyncGroupRequest.SyncGroupRequestAssignment
            assignments = [cls(member_id=m, assignment=encode_assignment(ps)) for m, ps in plan.items()]
        self.state = "syncing"
        protocol = (r.protocol_type, r.protocol_name) if self.sync_version >= 5 else (None, None)
        self.send(SYNC, self.sync_version, SyncGroupRequest(
            group_id=GROUP, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type=protocol[0], protocol_name=protocol[1],
            assignments=assignments))

    def on_sync(self, r) -> None:
        if self.state != "syncing":
            return
        if r.error_code:
            return self.rejoin_after_error(r.error_code)
        self.owned = decode_assignment(r.assignment)
        self.state = "stable"
        self.positions = {}
        cls = OffsetFetchRequest.OffsetFetchRequestTopic
        self.send(FETCH, 7, OffsetFetchRequest(group_id=GROUP, topics=[cls(name=TOPIC, partition_indexes=self.owned)]))
        self.schedule_heartbeat()

    def on_fetch(self, r) -> None:
        if self.state not in ("stable", "committing") or r.error_code:
            return
        for p in r.topics[0].partitions if r.topics else []:
            if p.partition_index in self.owned:
                self.positions[p.partition_index] = max(p.committed_offset, 0)
        self.later(self.sim.rng.randint(100, 1_000), self.consume)

    def consume(self) -> None:
        if self.state != "stable":
            return
        for p in self.owned:
            if p in self.positions:
                self.positions[p] += self.sim.rng.randint(0, 20)
        if self.positions and self.sim.rng.random() < 0.6:
            self.commit(then_rejoin=False)
        self.later(self.sim.rng.randint(200, 1_500), self.consume)

    def commit(self, then_rejoin: bool) -> None:
        if not self.positions:
            if then_rejoin:
                self.join()
            return
        if then_rejoin:
            self.state = "committing"
        pcls = OffsetCommitRequest.OffsetCommitRequestPartition
        self.send(COMMIT, 7, OffsetCommitRequest(
            group_id=GROUP, generation_id_or_member_epoch=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=TOPIC, partitions=[pcls(partition_index=p, committed_offset=o, committed_metadata="")
                                        for p, o in sorted(self.positions.items())])]))

    def on_commit(self, r) -> None:
        codes = {p.error_code for t in r.topics for p in t.partitions}
        if self.state == "committing":
            self.positions = {}
            return self.join()
        if self.state == "stable" and codes - {0}:
            code = max(codes - {0})
            if code in RETRIABLE_COORDINATOR:
                return
            self.rejoin_after_error(code)

    def schedule_heartbeat(self) -> None:
        self.later(self.session_ms // 3, self.heartbeat)

    def heartbeat(self) -> None:
        if self.state != "stable":
            return
        self.send(HEARTBEAT, 3, HeartbeatRequest(group_id=GROUP, generation_id=self.generation,
                                                 member_id=self.member_id, group_instance_id=self.instance_id))
        self.schedule_heartbeat()

    def on_heartbeat(self, r) -> None:
        if self.state != "stable" or r.error_code == 0 or r.error_code in RETRIABLE_COORDINATOR:
            return
        self.rejoin_after_error(r.error_code)

    def rejoin_after_error(self, code: int) -> None:
        if code == 82:
            self.state = "stopped"
            return
        if code == 27 and self.state == "stable":
            self.epoch += 1
            return self.commit(then_rejoin=True)  # commit what was read, then rejoin (eager)
        if code == 25:
            self.member_id = ""
        self.epoch += 1
        self.positions = {}
        if code in RETRIABLE_COORDINATOR:
            return self.later(self.sim.rng.randint(50, 300), self.join)
        self.join()

    # -- faults -------------------------------------------------------------------------------
    def leave_and_return(self, away_ms: int) -> None:
        if self.member_id:
            self.send(LEAVE, 3, LeaveGroupRequest(group_id=GROUP, members=[LeaveGroupRequest.MemberIdentity(
                member_id=self.member_id, group_instance_id=self.instance_id)]))
        self.restart(away_ms)

    def restart(self, away_ms: int) -> None:
        """A new process: no member id (a static member keeps its instance id)."""
        self.epoch += 1
        self.life += 1
        self.member_id, self.generation, self.owned, self.positions = "", -1, [], {}
        self.state = "idle"
        epoch = self.epoch
        self.sim.sched.after(away_ms, lambda: epoch == self.epoch and self.join())
