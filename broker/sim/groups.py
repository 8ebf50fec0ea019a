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
* no core emits an Append after it unloaded the partition;
* transactional offset commits (a model producer's TxnOffsetCommit, ``group_txn_client``) stay
  pending, invisible, until their transaction's marker: a COMMIT materializes them, an ABORT drops
  them, across reloads too; a loaded core's committed offsets of that group are always exactly
  those of the committed transactions, and none is pending once every transaction ended.

``python -m broker.sim.groups --seed N [--seeds K] [--verbose]`` replays seeds.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field

from broker.coordinator.group.core import Append, GroupCoordinatorCore, GroupSettings, Reply
from broker.coordinator.group.shard import TxnMarker, TxnRecord
from broker.coordinator.group.records import (
    GroupMetadataKey, OffsetCommitKey, decode_group_metadata_value, decode_key, decode_offset_commit_value,
)
from broker.sim.coordinator_driver import SimCoordinator, SimulationLog, seed_main
from broker.sim.group_client import GROUP, JOIN, SYNC, TOPIC, GroupClient, decode_assignment
from broker.sim.group_txn_client import TXN_GROUP, TxnCommitter
from broker.sim.scheduler import Scheduler

__all__ = ["GroupSimSettings", "GroupSimResult", "run_group_simulation"]

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
    transactions: dict = field(default_factory=dict)  # {True: committed, False: aborted}
    faults: list = field(default_factory=list)
    trace: list = field(default_factory=list)

    def summary(self) -> str:
        text = (f"seed {self.seed}: {'ok' if self.ok else 'FAILED'}, {self.generations} generations synced, "
                f"{self.commits_acked} commits acknowledged, {self.transactions.get(True, 0)} offset "
                f"transactions committed and {self.transactions.get(False, 0)} aborted, {self.moves} coordinator moves, "
                f"{len(self.faults)} faults")
        if not self.ok:
            text += "\n  violations:\n    " + "\n    ".join(self.violations[:10])
            text += "\n  faults:\n    " + "\n    ".join(self.faults[-20:])
            text += f"\n  replay: python -m broker.sim.groups --seed {self.seed} --verbose"
        return text


class _Coordinator(SimCoordinator):
    """One broker's group core (``SimCoordinator``), with the highest generation it handed out."""

    REPLY = Reply
    APPEND = Append

    def __init__(self, sim: "GroupSimulation", incarnation: int) -> None:
        super().__init__(sim, incarnation,
                         GroupCoordinatorCore(sim.group_settings, random.Random(sim.seed * 1000 + incarnation)))
        self.max_generation = -1


class GroupSimulation(SimulationLog):
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
        self.clients = [GroupClient(self, i, static and i == 0) for i in range(self.settings.clients)]
        self.committer = TxnCommitter(self)

    # -- plumbing -----------------------------------------------------------------------------
    def latency(self) -> int:
        return self.rng.randint(*self.settings.latency_ms)

    def send(self, client: GroupClient, api_key: int, version: int, request) -> None:
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
        entry = self.claim_reply(reply)
        if entry is None:
            return
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
                # a generation's membership, static members by instance id (a restarted static
                # member keeps its generation under a new member id)
                identity = sorted(m.group_instance_id or m.member_id for m in response.members)
                if facts.setdefault("identity", identity) != identity:
                    self.violation(f"core {coordinator.incarnation} handed out generation {generation} "
                                   f"twice: {facts['identity']} and {identity}")
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
        elif append.transactional:
            self.write_transactional(append)
        else:
            self.write_records(append.records, acknowledged=True)
        coordinator.apply(coordinator.core.write_done(append.write_id, error, self.sched.now_ms))
        if append.transactional:
            self.check_txn_offsets(coordinator)
        else:
            self.check_cache(coordinator)

    def land_unacknowledged(self, append: Append) -> None:
        if append.transactional:
            self.write_transactional(append)
        else:
            self.write_records(append.records, acknowledged=False)

    def write_transactional(self, append: Append) -> None:
        """A TxnOffsetCommit's batch, as the shell hands it to a load: ``(None, TxnRecord)``."""
        self.log.extend((None, TxnRecord(append.producer_id, key, value)) for key, value in append.records)

    def write_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> None:
        """A transaction's COMMIT/ABORT marker is replicated in the offsets partition: in the log,
        and handed to the current core (kept by one still loading, see transaction_completed)."""
        self.log.append((None, TxnMarker(producer_id, committed)))
        coordinator = self.coordinator
        coordinator.apply(coordinator.core.transaction_completed(0, producer_id, producer_epoch, committed,
                                                                 self.sched.now_ms))
        self.check_txn_offsets(coordinator)

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

    def check_txn_offsets(self, coordinator: _Coordinator) -> None:
        """After every transactional write, marker and load (plain commits are to another group)."""
        if not coordinator.loaded or coordinator.unloaded:
            return
        cached = {key: value.offset for key, value in coordinator.core.committed_offsets(TXN_GROUP).items()}
        if cached != self.committer.materialized:
            self.violation(f"core {coordinator.incarnation}: transactional offsets {cached}, the committed "
                           f"transactions' {self.committer.materialized}")

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
        self.check_txn_offsets(coordinator)

    def move(self) -> None:
        old = self.coordinator
        self.moves += 1
        old.retire(land_in_flight=True)  # appends in flight: some reached the log, unacknowledged
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
        self.committer.start()
        end_ms = self.settings.duration_ms + self.settings.quiesce_ms
        self.sched.run_until(end_ms)
        self.finish()
        synced = sum(1 for facts in self.generations.values() if "record" in facts)
        return GroupSimResult(self.seed, not self.violations, self.violations, synced,
                              self.commits_acked, self.moves, dict(self.committer.transactions), self.faults,
                              self.trace)

    def finish(self) -> None:
        """Liveness after the quiet time: every client still running is a Stable member of the
        current generation. Then unload the last core (answering everything parked): every
        request must have had exactly one answer."""
        last = self.coordinator
        group = next((g for g in last.core.groups() if g.group_id == GROUP), None) if last.loaded else None
        for client in self.clients:
            if client.state == "stopped":
                continue  # fenced by its own earlier incarnation's id (see GroupClient.on_join)
            if group is None or client.state != "stable" or client.member_id not in group.members \
                    or client.generation != group.generation_id or group.state.value != "Stable":
                self.violation(f"not settled after {self.settings.quiesce_ms} ms without faults: "
                               f"{client.name} {client.state} generation {client.generation}, group "
                               f"{None if group is None else (group.state.value, group.generation_id)}")
        if self.committer.open is not None:
            self.violation(f"a transaction never ended: {self.committer.open}")
        self.check_txn_offsets(last)
        if last.loaded and last.core.statistics()["pending_txn_offsets"]:
            self.violation(f"{last.core.statistics()['pending_txn_offsets']} transactional offsets still "
                           f"pending after every transaction ended")
        last.retire(land_in_flight=False)
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
    return seed_main("python -m broker.sim.groups", __doc__, run_group_simulation, argv)


if __name__ == "__main__":
    sys.exit(main())
