"""The group coordinator's simulation tier: ``GroupCoordinatorCore`` driven from a seed.

One ``__consumer_offsets`` partition (a list of records), one group of model consumers that
perform the classic member protocol (the v4+ member-id handshake, rejoin on
REBALANCE_IN_PROGRESS, range assignment by the leader, commit before rejoining, fetch the
committed offsets after each SyncGroup), and faults: clients that stop (SIGSTOP: no heartbeats
for a while), leave and come back, static members that restart, appends that fail, and
coordinator moves (the old core unloads, its unacknowledged appends may or may not have reached
the log, a new core loads the log after a delay).

Invariants, checked as events happen and at the end:

* every SyncGroup'd generation's group record covers every partition exactly once, among exactly
  the members the leader was given in its JoinGroup answer; each member's successful SyncGroup
  answer is its part of that record;
* generation ids a core hands out only increase, and a loaded core resumes at or above the last
  written generation;
* a committed offset (its append acknowledged) never regresses, and survives every reload;
* every request gets exactly one answer;
* no core emits an Append after it unloaded the partition.

``python -m broker.sim.groups --seed N [--seeds K] [--verbose]`` replays seeds.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass, field

from broker.coordinator.group.core import Append, GroupCoordinatorCore, GroupSettings, Reply
from broker.coordinator.group.group import decode_subscription_topics
from broker.coordinator.group.records import (
    GroupMetadataKey, OffsetCommitKey, decode_group_metadata_value, decode_key, decode_offset_commit_value,
)
from broker.sim.scheduler import Scheduler
from broker.wire.apis.heartbeat import HeartbeatRequest
from broker.wire.apis.join_group import JoinGroupRequest
from broker.wire.apis.leave_group import LeaveGroupRequest
from broker.wire.apis.offset_commit import OffsetCommitRequest
from broker.wire.apis.offset_fetch import OffsetFetchRequest
from broker.wire.apis.sync_group import SyncGroupRequest

__all__ = ["GroupSimSettings", "GroupSimResult", "run_group_simulation"]

GROUP = "sim-group"
TOPIC = "t"
JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH = 11, 14, 12, 13, 8, 9
RETRIABLE_COORDINATOR = {14, 15, 16}
APPEND_FAILURES = (19, 6, 7, 56)


@dataclass(frozen=True)
class GroupSimSettings:
    clients: int = 4
    partitions: int = 6
    duration_ms: int = 90_000
    quiesce_ms: int = 40_000
    fault_every_ms: tuple = (1_000, 6_000)
    write_fail_probability: float = 0.05
    latency_ms: tuple = (1, 8)
    append_latency_ms: tuple = (1, 30)
    load_delay_ms: tuple = (50, 800)


@dataclass
class GroupSimResult:
    seed: int
    ok: bool
    violations: list
    generations: int
    commits_acked: int
    moves: int
    faults: list = field(default_factory=list)
    trace: list = field(default_factory=list)

    def summary(self) -> str:
        text = (f"seed {self.seed}: {'ok' if self.ok else 'FAILED'}, {self.generations} generations synced, "
                f"{self.commits_acked} commits acknowledged, {self.moves} coordinator moves, "
                f"{len(self.faults)} faults")
        if not self.ok:
            text += "\n  violations:\n    " + "\n    ".join(self.violations[:10])
            text += "\n  faults:\n    " + "\n    ".join(self.faults[-20:])
            text += f"\n  replay: python -m broker.sim.groups --seed {self.seed} --verbose"
        return text


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


class _Coordinator:
    """One broker's core, from its load to its unload."""

    def __init__(self, sim: "GroupSimulation", incarnation: int) -> None:
        self.sim = sim
        self.incarnation = incarnation
        self.core = GroupCoordinatorCore(sim.group_settings, random.Random(sim.seed * 1000 + incarnation))
        self.unloaded = False
        self.loaded = False
        self.timer = None
        self.max_generation = -1
        self.pending: dict[int, Append] = {}

    def apply(self, effects: list) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                self.sim.deliver_reply(self, effect)
            else:
                if self.unloaded:
                    self.sim.violation(f"core {self.incarnation} emitted an Append after its unload")
                    continue
                self.pending[effect.write_id] = effect
                self.sim.sched.after(self.sim.rng.randint(*self.sim.settings.append_latency_ms),
                                     self.sim.land_append, self, effect)
        self.reschedule()

    def reschedule(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.unloaded:
            return
        deadline = self.core.next_deadline()
        if deadline is not None:
            self.timer = self.sim.sched.at(max(deadline, self.sim.sched.now_ms), self.tick)

    def tick(self) -> None:
        self.timer = None
        self.apply(self.core.tick(self.sim.sched.now_ms))


class _Client:
    """A model consumer: the member protocol as the Java client runs it (eager rebalancing)."""

    def __init__(self, sim: "GroupSimulation", index: int, static: bool) -> None:
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
        if self.state == "stable":
            self.schedule_heartbeat()

    def later(self, delay_ms: int, action) -> None:
        epoch = self.epoch

        def run():
            if epoch == self.epoch and not self.paused and self.state != "stopped":
                action()
        self.sim.sched.after(delay_ms, run)

    # -- the member protocol ------------------------------------------------------------------
    def join(self) -> None:
        self.state = "joining"
        self.owned = []
        self.send(JOIN, 5, JoinGroupRequest(
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
        if r.leader == r.member_id and r.members:
            for m in r.members:
                assert decode_subscription_topics(bytes(m.metadata)) == [TOPIC]
            plan = range_assignment([m.member_id for m in r.members], self.sim.settings.partitions)
            cls = SyncGroupRequest.SyncGroupRequestAssignment
            assignments = [cls(member_id=m, assignment=encode_assignment(ps)) for m, ps in plan.items()]
        self.state = "syncing"
        self.send(SYNC, 3, SyncGroupRequest(group_id=GROUP, generation_id=self.generation,
                                            member_id=self.member_id, group_instance_id=self.instance_id,
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


class GroupSimulation:
    def __init__(self, seed: int, settings: GroupSimSettings | None = None, verbose: bool = False) -> None:
        self.seed = seed
        self.settings = settings or GroupSimSettings()
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.sched = Scheduler()
        self.group_settings = GroupSettings(
            num_partitions=1, initial_rebalance_delay_ms=self.rng.choice([0, 0, 500, 3_000]),
            offsets_retention_check_interval_ms=60_000)
        self.log: list = []
        self.violations: list[str] = []
        self.faults: list[str] = []
        self.trace: list[str] = []
        self.incarnation = 0
        self.coordinator = _Coordinator(self, 0)
        self.coordinator.core.begin_load(0)
        self.sched.after(10, self.load, self.coordinator)
        self.tokens = 0
        self.outstanding: dict[int, tuple] = {}  # token -> (client, api_key, core incarnation)
        self.answered: set[int] = set()
        self.acked: dict[int, int] = {}  # partition -> last acknowledged committed offset
        self.commits_acked = 0
        self.generations: dict[tuple, dict] = {}  # (incarnation, generation) -> facts
        self.last_written_generation = -1
        self.moves = 0
        static = self.rng.random() < 0.5
        self.clients = [_Client(self, i, static and i == 0) for i in range(self.settings.clients)]

    # -- plumbing -----------------------------------------------------------------------------
    def violation(self, text: str) -> None:
        self.violations.append(f"t={self.sched.now_ms}: {text}")

    def note(self, text: str) -> None:
        if self.verbose:
            self.trace.append(f"t={self.sched.now_ms}: {text}")

    def latency(self) -> int:
        return self.rng.randint(*self.settings.latency_ms)

    def send(self, client: _Client, api_key: int, version: int, request) -> None:
        self.tokens += 1
        token = self.tokens
        self.note(f"{client.name} -> {api_key} token {token}")
        self.sched.after(self.latency(), self.arrive, token, client, api_key, version, request, client.life)

    def arrive(self, token, client, api_key, version, request, life) -> None:
        coordinator = self.coordinator
        self.outstanding[token] = (client, api_key, request, life)
        coordinator.apply(coordinator.core.handle(token, api_key, version, request, client.name,
                                                  "/10.0.0.1", self.sched.now_ms))

    def deliver_reply(self, coordinator: _Coordinator, reply: Reply) -> None:
        if reply.token in self.answered:
            self.violation(f"token {reply.token} answered twice")
            return
        entry = self.outstanding.pop(reply.token, None)
        if entry is None:
            self.violation(f"reply for unknown token {reply.token}")
            return
        self.answered.add(reply.token)
        client, api_key, request, life = entry
        response = reply.response
        if api_key == JOIN and response.error_code == 0:
            generation = response.generation_id
            if generation < coordinator.max_generation:
                self.violation(f"core {coordinator.incarnation} handed out generation {generation} "
                               f"after {coordinator.max_generation}")
            coordinator.max_generation = max(coordinator.max_generation, generation)
            if response.leader == response.member_id and response.members:
                facts = self.generations.setdefault((coordinator.incarnation, generation), {})
                facts.setdefault("leader_members", {m.member_id for m in response.members})
        if api_key == SYNC and response.error_code == 0:
            record = self.generations.get((coordinator.incarnation, request.generation_id), {}).get("record")
            owned = decode_assignment(response.assignment)
            if record is not None and record.get(request.member_id) != owned:
                self.violation(f"{client.name} got {owned} in generation {request.generation_id}, "
                               f"the record says {record.get(request.member_id)}")
        self.note(f"{client.name} <- {api_key} token {reply.token} error {getattr(reply.response, 'error_code', '-')}")
        self.sched.after(self.latency(), client.receive, api_key, reply.response, life, getattr(request, "member_id", ""))

    # -- the offsets partition ----------------------------------------------------------------
    def land_append(self, coordinator: _Coordinator, append: Append) -> None:
        if append.write_id not in coordinator.pending:
            return  # decided at the unload
        del coordinator.pending[append.write_id]
        if coordinator is not self.coordinator or coordinator.unloaded:
            return
        error = 0
        if self.rng.random() < self.settings.write_fail_probability:
            error = self.rng.choice(APPEND_FAILURES)
        else:
            self.write_records(append.records, acknowledged=True)
        coordinator.apply(coordinator.core.write_done(append.write_id, error, self.sched.now_ms))
        self.check_cache(coordinator)

    def write_records(self, records: list, acknowledged: bool) -> None:
        self.log.extend(records)
        for key_bytes, value_bytes in records:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey) and value_bytes is not None and acknowledged:
                offset = decode_offset_commit_value(value_bytes).offset
                previous = self.acked.get(key.partition, -1)
                if offset < previous:
                    self.violation(f"acknowledged commit of partition {key.partition} went back "
                                   f"from {previous} to {offset}")
                self.acked[key.partition] = offset
                self.commits_acked += 1
            elif isinstance(key, GroupMetadataKey) and value_bytes is not None:
                self.check_group_record(decode_group_metadata_value(value_bytes), acknowledged)

    def check_group_record(self, value, acknowledged: bool) -> None:
        if acknowledged:
            self.last_written_generation = max(self.last_written_generation, value.generation)
        if not value.members:
            return
        facts = self.generations.setdefault((self.coordinator.incarnation, value.generation), {})
        assignment = {m.member_id: decode_assignment(m.assignment) for m in value.members}
        partitions = sorted(p for ps in assignment.values() for p in ps)
        if partitions != list(range(self.settings.partitions)):
            self.violation(f"generation {value.generation}: assignment {assignment} does not cover "
                           f"every partition exactly once")
        leader_view = facts.get("leader_members")
        first_record = "record" not in facts  # later ones: a static member replaced, same generation
        if first_record and leader_view is not None and leader_view != set(assignment):
            self.violation(f"generation {value.generation}: record members {sorted(assignment)} are not "
                           f"the leader's {sorted(leader_view)}")
        facts["record"] = assignment

    def check_cache(self, coordinator: _Coordinator) -> None:
        if not coordinator.loaded or coordinator.unloaded:
            return
        cache = coordinator.core.committed_offsets(GROUP)
        for partition, offset in self.acked.items():
            cached = cache.get((TOPIC, partition))
            if cached is None or cached.offset < offset:
                self.violation(f"core {coordinator.incarnation}: partition {partition} cached "
                               f"{None if cached is None else cached.offset}, acknowledged {offset}")

    # -- coordinator moves --------------------------------------------------------------------
    def load(self, coordinator: _Coordinator) -> None:
        if coordinator is not self.coordinator:
            return
        coordinator.loaded = True
        coordinator.apply(coordinator.core.load_partition(0, list(self.log), self.sched.now_ms))
        group = next((g for g in coordinator.core.groups() if g.group_id == GROUP), None)
        if group is not None and group.generation_id < self.last_written_generation:
            self.violation(f"loaded generation {group.generation_id} below the written "
                           f"{self.last_written_generation}")
        coordinator.max_generation = group.generation_id if group is not None else -1
        self.check_cache(coordinator)

    def move(self) -> None:
        old = self.coordinator
        self.moves += 1
        old.unloaded = True
        if old.timer is not None:
            old.timer.cancel()
        # Appends in flight: some reached the log without their acknowledgement.
        for write_id, append in sorted(old.pending.items()):
            if self.rng.random() < 0.5:
                self.write_records(append.records, acknowledged=False)
        old.pending.clear()
        old.apply(old.core.unload_partition(0))
        self.incarnation += 1
        new = _Coordinator(self, self.incarnation)
        new.core.begin_load(0)
        self.coordinator = new
        self.sched.after(self.rng.randint(*self.settings.load_delay_ms), self.load, new)

    # -- faults -------------------------------------------------------------------------------
    def fault(self) -> None:
        if self.sched.now_ms >= self.settings.duration_ms:
            return
        roll = self.rng.random()
        client = self.rng.choice(self.clients)
        if roll < 0.2:
            self.faults.append(f"t={self.sched.now_ms}: coordinator move")
            self.move()
        elif roll < 0.4 and not client.paused and client.state != "stopped":
            pause_ms = self.rng.randint(1_000, 3 * client.session_ms)
            self.faults.append(f"t={self.sched.now_ms}: {client.name} stopped for {pause_ms} ms")
            client.paused_until = self.sched.now_ms + pause_ms
            self.sched.after(pause_ms, client.resume)
        elif roll < 0.55 and not client.paused and client.state != "stopped":
            self.faults.append(f"t={self.sched.now_ms}: {client.name} leaves and returns")
            client.leave_and_return(self.rng.randint(100, 5_000))
        elif roll < 0.65 and not client.paused and client.state != "stopped":
            self.faults.append(f"t={self.sched.now_ms}: {client.name} restarts")
            client.restart(self.rng.randint(100, 3_000))
        self.sched.after(self.rng.randint(*self.settings.fault_every_ms), self.fault)

    def run(self) -> GroupSimResult:
        for i, client in enumerate(self.clients):
            self.sched.after(20 + 37 * i, client.join)
        self.sched.after(self.rng.randint(*self.settings.fault_every_ms), self.fault)
        end_ms = self.settings.duration_ms + self.settings.quiesce_ms
        self.sched.run_until(end_ms)
        self.finish()
        synced = sum(1 for facts in self.generations.values() if "record" in facts)
        return GroupSimResult(self.seed, not self.violations, self.violations, synced,
                              self.commits_acked, self.moves, self.faults, self.trace)

    def finish(self) -> None:
        """Unload the last core (answering everything parked), then every request must have had
        exactly one answer."""
        last = self.coordinator
        last.unloaded = True
        if last.timer is not None:
            last.timer.cancel()
        last.apply(last.core.unload_partition(0))
        if self.outstanding:
            self.violation(f"{len(self.outstanding)} requests never answered, e.g. "
                           f"{sorted(self.outstanding.items())[:3]}")
        arrived = len(self.answered) + len(self.outstanding)
        if arrived > self.tokens:
            self.violation("more requests arrived than were sent")


def run_group_simulation(seed: int, settings: GroupSimSettings | None = None,
                         verbose: bool = False) -> GroupSimResult:
    return GroupSimulation(seed, settings, verbose).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.sim.groups", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        started = time.perf_counter()
        result = run_group_simulation(seed, verbose=args.verbose)
        print(f"{result.summary()} ({time.perf_counter() - started:.2f} s)")
        if args.verbose and not result.ok:
            print("\n".join(result.trace[-200:]))
        failed += not result.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
