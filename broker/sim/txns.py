"""The transaction coordinator's simulation tier: ``TxnCoordinatorCore`` driven from a seed.

One ``__transaction_state`` partition (a list of records), a few transactional ids each run by
model producers (``txn_producer``), model data partitions that take data batches (after asking
the coordinator, KIP-890 part 1) and markers (refusing a marker of an older coordinator epoch or
producer epoch, as a partition leader does), and faults: producers that crash and restart (a new
InitProducerId), zombies (an instance paused while a new one takes over, which then goes on with
its old epoch), stalls longer than the transaction timeout, EndTxn requests held by the network,
appends that fail (some with NOT_LEADER_OR_FOLLOWER, then the partition moves), producer id
allocations that fail, at ``transaction_version`` 2 (EndTxn v5, the epoch bumped at every
EndTxn) an EndTxn duplicated by the network whose copy arrives seconds later, past the next
transaction of the same id (version 0-1 cannot survive that: the copy ends the next
transaction), and coordinator moves (the old core unloads,
its unacknowledged appends may or may not have reached the log, its markers in flight may still
land, a new core loads the log after a delay).

Invariants, checked as events happen and at the end:

* every data batch of one transaction gets the same marker: never COMMIT on one partition and
  ABORT on another;
* a transaction gets COMMIT markers only after its own EndTxn(commit) was sent (an EndTxn of an
  earlier transaction must not commit it);
* a transaction acknowledged committed (EndTxn NONE for commit) ends with COMMIT on every batch,
  one acknowledged aborted with ABORT;
* after the quiet period every batch has its marker (nothing hangs) and no transactional id is in
  PrepareCommit/PrepareAbort or has a transition pending;
* a request of a fenced producer (an older epoch or another producer id) changes nothing: the
  core answers at once, with an error, and writes nothing (a version-2 EndTxn one epoch behind
  a decided transaction is a retry of it: it may answer NONE, still writing nothing);
* every request gets exactly one answer.

``python -m broker.sim.txns --seed N [--seeds K] [--verbose]`` replays seeds.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field

from broker.coordinator.txn.records import encode_key
from broker.coordinator.txn.shard import transit_value
from broker.coordinator.txn.state import Transit, TxnState
from broker.coordinator.txn.core import (Append, AllocateProducerId, Reply, TxnCoordinatorCore,
                                         TxnSettings, WriteMarkers)
from broker.sim.coordinator_driver import SimCoordinator, SimulationLog, seed_main
from broker.sim.scheduler import Scheduler
from broker.sim.txn_producer import ADD, END, OFFSETS, TxnProducer

__all__ = ["TxnSimSettings", "TxnSimResult", "run_txn_simulation"]

APPEND_FAILURES = (19, 20, 7)  # produce errors the coordinator maps to COORDINATOR_NOT_AVAILABLE


@dataclass(frozen=True)
class TxnSimSettings:
    transactional_ids: int = 3
    topic_partitions: int = 4
    duration_ms: int = 30_000
    quiesce_ms: int = 40_000
    fault_every_ms: tuple = (500, 4_000)
    write_fail_probability: float = 0.05
    alloc_fail_probability: float = 0.05
    latency_ms: tuple = (1, 8)
    append_latency_ms: tuple = (1, 30)
    marker_latency_ms: tuple = (1, 60)
    load_delay_ms: tuple = (50, 800)
    timeout_ms: tuple = (3_000, 20_000)
    transaction_version: int = 1  # 2: EndTxn v5 (epoch bump per EndTxn) and duplicated EndTxn faults
    # >= 0: every id starts in the log at this epoch (Empty), so epochs run out within the run and
    # producer ids rotate (InitProducerId, and at transaction version 2 EndTxn)
    start_epoch: int = -1


@dataclass
class TxnSimResult:
    seed: int
    ok: bool
    violations: list
    committed: int
    aborted: int
    fenced_requests: int
    moves: int
    timeout_aborts: int = 0
    duplicates_fenced: int = 0  # EndTxn copies refused (transaction version 2)
    rotations: int = 0  # EndTxn answers that handed the producer a new producer id
    faults: list = field(default_factory=list)
    trace: list = field(default_factory=list)

    def summary(self) -> str:
        text = (f"seed {self.seed}: {'ok' if self.ok else 'FAILED'}, {self.committed} commits and "
                f"{self.aborted} aborts acknowledged, {self.fenced_requests} zombie requests refused, "
                f"{self.moves} coordinator moves, {self.timeout_aborts} timeout aborts, {len(self.faults)} faults")
        if not self.ok:
            text += "\n  violations:\n    " + "\n    ".join(self.violations[:10])
            text += "\n  faults:\n    " + "\n    ".join(self.faults[-20:])
            text += f"\n  replay: python -m broker.sim.txns --seed {self.seed} --verbose"
        return text


class _Partition:
    """A data partition's view of transactions: per producer id its epoch, the coordinator epoch
    of its last marker, and the batches of its open transaction."""

    def __init__(self, sim, topic_partition) -> None:
        self.sim = sim
        self.tp = topic_partition
        self.epoch: dict[int, int] = {}
        self.coordinator_epoch: dict[int, int] = {}
        self.open: dict[int, tuple] = {}  # producer id -> (tag, batch count)

    def produce(self, producer: TxnProducer) -> int:
        pid = producer.pid
        if producer.epoch < self.epoch.get(pid, -1):
            return 90
        code = self.sim.coordinator.core.verify(producer.tid, pid, producer.epoch, *self.tp)
        if code != 0:
            return code
        self.epoch[pid] = producer.epoch
        tag, count = self.open.get(pid, (producer.tag, 0))
        if tag != producer.tag:
            self.sim.violation(f"{self.tp}: data of {producer.tag} while {tag} has no marker")
        self.open[pid] = (producer.tag, count + 1)
        self.sim.batches[producer.tag] = self.sim.batches.get(producer.tag, 0) + 1
        return 0

    def marker(self, m: WriteMarkers, current: bool) -> None:
        pid = m.producer_id
        if m.coordinator_epoch < self.coordinator_epoch.get(pid, -1) or m.producer_epoch < self.epoch.get(pid, -1):
            if current:
                self.sim.violation(f"{self.tp}: the current coordinator's marker {m} was refused")
            return  # TRANSACTION_COORDINATOR_FENCED / INVALID_PRODUCER_EPOCH
        self.coordinator_epoch[pid] = m.coordinator_epoch
        self.epoch[pid] = m.producer_epoch
        opened = self.open.pop(pid, None)
        if opened is not None:
            self.sim.outcome(opened[0], opened[1], m.committed, self.tp)


class _Coordinator(SimCoordinator):
    """One broker's transaction core (``SimCoordinator``): producer id allocations and markers
    are its own effects; a tick's PrepareAbort writes are timeout aborts."""

    REPLY = Reply
    APPEND = Append

    def __init__(self, sim: "TxnSimulation", incarnation: int) -> None:
        super().__init__(sim, incarnation, TxnCoordinatorCore(sim.txn_settings))

    def other_effect(self, effect) -> None:
        if isinstance(effect, AllocateProducerId):
            self.sim.sched.after(self.sim.rng.randint(1, 20), self.sim.allocate, self, effect.request_id)
        else:
            assert isinstance(effect, WriteMarkers), f"unknown effect {effect!r}"
            self.sim.send_markers(self, effect)

    def ticked(self, effects: list) -> None:
        self.sim.timeout_aborts += sum(1 for e in effects if isinstance(e, Append) and e.records[0][1] is not None)


class TxnSimulation(SimulationLog):
    def __init__(self, seed: int, settings: TxnSimSettings | None = None, verbose: bool = False) -> None:
        self.seed = seed
        self.settings = s = settings or TxnSimSettings()
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.sched = Scheduler()
        expiring = self.rng.random() < 0.3
        self.txn_settings = TxnSettings(
            num_partitions=1, max_timeout_ms=60_000, abort_timed_out_check_interval_ms=1_000,
            id_expiration_ms=15_000 if expiring else 7 * 24 * 3_600_000,
            remove_expired_check_interval_ms=5_000 if expiring else 3_600_000)
        self.topic_partitions = [("t", p) for p in range(s.topic_partitions)]
        self.partitions = {tp: _Partition(self, tp) for tp in self.topic_partitions}
        self.log: list = []
        self.violations: list[str] = []
        self.faults: list[str] = []
        self.trace: list[str] = []
        self.incarnation = 0
        self.next_pid = 1_000
        self.tokens = 0
        self.outstanding: dict[int, tuple] = {}
        self.answered: set[int] = set()
        self.batches: dict[tuple, int] = {}      # tag -> data batches written
        self.decided: dict[tuple, dict] = {}     # tag -> {committed: batches with that marker}
        self.acked: dict[tuple, bool] = {}       # tag -> the acknowledged decision
        self.fenced_requests = 0
        self.timeout_aborts = 0  # PrepareAbort writes of timed-out transactions
        self.moves = 0
        self.rotations = 0
        if s.start_epoch >= 0:
            self._seed_epochs(s.start_epoch)
        self.coordinator = self._new_coordinator()
        self.sched.after(10, self.load, self.coordinator)
        self.instances: dict[str, TxnProducer] = {}
        self.instance_count = 0
        self.stall_next: set[str] = set()
        self.delay_next_end: set[str] = set()
        self.duplicate_next_end: set[str] = set()
        self.duplicates: set[int] = set()  # tokens of EndTxn copies (their answers reach nobody)
        self.duplicates_fenced = 0
        self.commit_sent: set = set()  # tags whose producer sent EndTxn(commit)

    def _seed_epochs(self, epoch: int) -> None:
        """Each id already in the log (Empty, its own producer id) at ``epoch``."""
        for i in range(self.settings.transactional_ids):
            value = transit_value(Transit(100 + i, -1, epoch, -1, 10_000, TxnState.Empty, frozenset(), -1, 0))
            self.log.append((encode_key(f"tx-{i}"), value))

    # -- plumbing -------------------------------------------------------------------------------
    def send(self, producer: TxnProducer, api_key: int, request, delay_ms: int = 0) -> None:
        self.tokens += 1
        token = self.tokens
        self.outstanding[token] = (producer, api_key, request)
        if api_key == END and request.committed:
            self.commit_sent.add(producer.tag)
        self.note(f"{producer.name} -> {api_key} token {token} (+{delay_ms} ms)")
        self.sched.after(self.rng.randint(*self.settings.latency_ms) + delay_ms, self.arrive, token)
        if api_key == END and producer.tid in self.duplicate_next_end:
            self.duplicate_next_end.discard(producer.tid)
            self.tokens += 1
            self.outstanding[self.tokens] = (producer, api_key, request)
            self.duplicates.add(self.tokens)
            self.note(f"{producer.name} -> {api_key} token {self.tokens}: a copy of token {token}")
            self.sched.after(self.rng.randint(2_000, 15_000), self.arrive, self.tokens)

    def arrive(self, token: int) -> None:
        producer, api_key, request = self.outstanding[token]
        coordinator = self.coordinator
        zombie = self._zombie_snapshot(api_key, request)
        effects = coordinator.core.handle(token, api_key, self._version(api_key), request, self.sched.now_ms)
        if zombie is not None:
            self.fenced_requests += 1
            meta, before, retry = zombie
            replies = [e for e in effects if isinstance(e, Reply) and e.token == token]
            if len(effects) != 1 or len(replies) != 1 or (_error(api_key, replies[0].response) == 0 and not retry):
                self.violation(f"zombie {producer.name} request {api_key} gave {effects}")
            if token in self.duplicates and _error(api_key, replies[0].response) != 0:
                self.duplicates_fenced += 1
            if (meta.current(), meta.pending) != before:
                self.violation(f"zombie {producer.name} request {api_key} changed {before} to {meta}")
        coordinator.apply(effects)

    def _version(self, api_key: int) -> int:
        end = 5 if self.settings.transaction_version >= 2 else 3
        return {ADD: 3, END: end, OFFSETS: 3}.get(api_key, 4)

    def _zombie_snapshot(self, api_key: int, request):
        """(metadata, its state) when ``request`` comes from a fenced producer, else None."""
        if api_key == ADD:
            tid, pid, epoch = (request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                               request.v3_and_below_producer_epoch)
        elif api_key in (END, OFFSETS):
            tid, pid, epoch = request.transactional_id, request.producer_id, request.producer_epoch
        else:
            return None
        shard, _ = self.coordinator.core.route(tid)
        meta = shard.txns.get(tid) if shard is not None else None
        if meta is None or (meta.producer_id == pid and epoch >= meta.producer_epoch):
            return None
        retry = (api_key == END and meta.client_transaction_version >= 2 and epoch + 1 == meta.producer_epoch
                 and meta.state not in (TxnState.Ongoing, TxnState.Empty))
        return meta, (meta.current(), meta.pending), retry

    def deliver_reply(self, coordinator: _Coordinator, reply: Reply) -> None:
        entry = self.claim_reply(reply)
        if entry is None or reply.token in self.duplicates:
            return  # a copy's answer goes to a connection the producer has given up
        producer, api_key, request = entry
        self.note(f"{producer.name} <- {api_key} token {reply.token} error {_error(api_key, reply.response)}")
        self.sched.after(self.rng.randint(*self.settings.latency_ms), producer.receive, api_key, request,
                         reply.response)

    # -- what producers and partitions report ---------------------------------------------------
    def produce(self, producer: TxnProducer, topic_partition) -> int:
        return self.partitions[topic_partition].produce(producer)

    def outcome(self, tag, batches: int, committed: bool, tp) -> None:
        if committed and tag not in self.commit_sent:
            self.violation(f"transaction {tag} got COMMIT on {tp} before its EndTxn(commit) was sent")
        decided = self.decided.setdefault(tag, {})
        decided[committed] = decided.get(committed, 0) + batches
        if len(decided) > 1:
            self.violation(f"transaction {tag} got both COMMIT and ABORT markers (last on {tp})")
        acked = self.acked.get(tag)
        if acked is not None and acked != committed:
            self.violation(f"transaction {tag} acknowledged {'commit' if acked else 'abort'} got the other marker on {tp}")

    def end_acknowledged(self, producer: TxnProducer, tag, committed: bool) -> None:
        if tag in self.acked and self.acked[tag] != committed:
            self.violation(f"transaction {tag} acknowledged both commit and abort")
        self.acked[tag] = committed
        decided = self.decided.get(tag, {})
        if (not committed) in decided:
            self.violation(f"transaction {tag} acknowledged {'commit' if committed else 'abort'}, markers say otherwise")

    def producer_ready(self, producer: TxnProducer) -> None:
        self.note(f"{producer.name} ready: producer id {producer.pid} epoch {producer.epoch}")

    def producer_fenced(self, producer: TxnProducer) -> None:
        self.note(f"{producer.name} fenced")
        if self.instances.get(producer.tid) is producer:
            self.start_instance(producer.tid, self.rng.randint(100, 2_000))

    def stall_ms(self, producer: TxnProducer) -> int:
        if producer.tid in self.stall_next:
            self.stall_next.discard(producer.tid)
            return producer.timeout_ms + self.rng.randint(1_000, 5_000)
        return self.rng.randint(0, 30)

    def end_delay_ms(self, producer: TxnProducer) -> int:
        if producer.tid in self.delay_next_end:
            self.delay_next_end.discard(producer.tid)
            return self.rng.randint(2_000, 15_000)
        return 0

    # -- the coordinator's side effects ---------------------------------------------------------
    def land_append(self, coordinator: _Coordinator, append: Append) -> None:
        if coordinator.pending.pop(append.write_id, None) is None or coordinator is not self.coordinator:
            return  # decided at the unload
        error, lost_leadership = 0, False
        if self.rng.random() < self.settings.write_fail_probability:
            # NOT_LEADER_OR_FOLLOWER: the partition moved (the core answers NOT_COORDINATOR and
            # leaves the transaction to the next coordinator), then the move itself
            lost_leadership = self.rng.random() < 0.2 and self.sched.now_ms < self.settings.duration_ms
            error = 6 if lost_leadership else self.rng.choice(APPEND_FAILURES)
        else:
            self.log.extend(append.records)
        coordinator.apply(coordinator.core.write_done(append.write_id, error, self.sched.now_ms))
        if lost_leadership:
            self.faults.append(f"t={self.sched.now_ms}: append refused (NOT_LEADER_OR_FOLLOWER), coordinator move")
            self.move()

    def land_unacknowledged(self, append: Append) -> None:
        self.log.extend(append.records)

    def allocate(self, coordinator: _Coordinator, request_id: int) -> None:
        if coordinator.unloaded:
            return
        pid = -1
        if self.rng.random() >= self.settings.alloc_fail_probability:
            pid, self.next_pid = self.next_pid, self.next_pid + 1
        coordinator.apply(coordinator.core.producer_id_allocated(request_id, pid, self.sched.now_ms))

    def send_markers(self, coordinator: _Coordinator, markers: WriteMarkers) -> None:
        left = {"n": len(markers.partitions)}

        def land(tp):
            if tp not in self.partitions:  # the offsets partition of AddOffsetsToTxn
                self.partitions[tp] = _Partition(self, tp)
            self.partitions[tp].marker(markers, coordinator is self.coordinator and not coordinator.unloaded)
            left["n"] -= 1
            if left["n"] == 0 and coordinator is self.coordinator and not coordinator.unloaded:
                coordinator.apply(coordinator.core.markers_written(markers.marker_id, self.sched.now_ms))
        for tp in markers.partitions:
            self.sched.after(self.rng.randint(*self.settings.marker_latency_ms), land, tp)

    # -- coordinator moves ----------------------------------------------------------------------
    def _new_coordinator(self) -> _Coordinator:
        coordinator = _Coordinator(self, self.incarnation)
        coordinator.core.begin_load(0, self.incarnation + 1)
        return coordinator

    def load(self, coordinator: _Coordinator) -> None:
        if coordinator is not self.coordinator:
            return
        coordinator.loaded = True
        coordinator.apply(coordinator.core.load_partition(0, list(self.log), self.sched.now_ms))

    def move(self) -> None:
        old = self.coordinator
        self.moves += 1
        old.retire(land_in_flight=True)  # in flight: some land unacknowledged
        self.incarnation += 1
        self.coordinator = self._new_coordinator()
        self.sched.after(self.rng.randint(*self.settings.load_delay_ms), self.load, self.coordinator)

    # -- producers and faults -------------------------------------------------------------------
    def start_instance(self, tid: str, delay_ms: int) -> None:
        if self.sched.now_ms + delay_ms >= self.settings.duration_ms:
            return
        self.instance_count += 1
        producer = TxnProducer(self, tid, self.instance_count, self.rng.randint(*self.settings.timeout_ms))
        self.instances[tid] = producer
        self.sched.after(delay_ms, producer.start)

    def fault(self) -> None:
        if self.sched.now_ms >= self.settings.duration_ms:
            return
        roll = self.rng.random()
        tid = self.rng.choice(sorted(self.instances))
        producer = self.instances[tid]
        now = self.sched.now_ms
        if roll < 0.2:
            self.faults.append(f"t={now}: coordinator move")
            self.move()
        elif roll < 0.35:
            self.faults.append(f"t={now}: {producer.name} crashes")
            producer.alive = False
            self.start_instance(tid, self.rng.randint(100, 5_000))
        elif roll < 0.5:
            pause = self.rng.randint(1_000, 20_000)
            self.faults.append(f"t={now}: {producer.name} paused {pause} ms, a new instance takes over")
            producer.paused_until = now + pause
            self.start_instance(tid, self.rng.randint(100, 2_000))
        elif roll < 0.6:
            self.faults.append(f"t={now}: {tid}'s next transaction stalls past its timeout")
            self.stall_next.add(tid)
        elif roll < 0.7:
            self.faults.append(f"t={now}: {tid}'s next EndTxn is delayed")
            self.delay_next_end.add(tid)
        elif roll < 0.8 and self.settings.transaction_version >= 2:
            self.faults.append(f"t={now}: {tid}'s next EndTxn is duplicated, the copy arriving seconds later")
            self.duplicate_next_end.add(tid)
        self.sched.after(self.rng.randint(*self.settings.fault_every_ms), self.fault)

    def run(self) -> TxnSimResult:
        for i in range(self.settings.transactional_ids):
            self.start_instance(f"tx-{i}", 20 + 13 * i)
        self.sched.after(self.rng.randint(*self.settings.fault_every_ms), self.fault)
        self.sched.run_until(self.settings.duration_ms + self.settings.quiesce_ms)
        self.finish()
        committed = sum(1 for c in self.acked.values() if c)
        return TxnSimResult(self.seed, not self.violations, self.violations, committed,
                            len(self.acked) - committed, self.fenced_requests, self.moves,
                            self.timeout_aborts, self.duplicates_fenced, self.rotations, self.faults, self.trace)

    def finish(self) -> None:
        for tag, count in self.batches.items():
            decided = self.decided.get(tag, {})
            if sum(decided.values()) != count:
                self.violation(f"transaction {tag}: {count} batches, markers on {decided} after the quiet period")
            if tag in self.acked and set(decided) - {self.acked[tag]}:
                self.violation(f"transaction {tag} acknowledged {self.acked[tag]} but markers {decided}")
        for tag, committed in self.acked.items():
            if committed and tag in self.batches and set(self.decided.get(tag, {})) != {True}:
                self.violation(f"committed transaction {tag} lacks COMMIT markers: {self.decided.get(tag)}")
        if not self.coordinator.loaded:
            self.violation("the last coordinator never loaded")
        for shard in self.coordinator.core.shards():
            for meta in shard.txns.values():
                if meta.state.is_prepare or meta.pending is not None:
                    self.violation(f"{meta.transactional_id} left in {meta.state.name} (pending {meta.pending})")
        if self.outstanding:
            self.violation(f"{len(self.outstanding)} requests never answered: {sorted(self.outstanding)[:5]}")


def _error(api_key: int, response) -> int:
    if api_key == ADD:
        codes = [p.partition_error_code for t in response.results_by_topic_v3_and_below
                 for p in t.results_by_partition]
        return max(codes, key=lambda c: c != 0) if codes else 0
    return response.error_code


def run_txn_simulation(seed: int, settings: TxnSimSettings | None = None, verbose: bool = False) -> TxnSimResult:
    return TxnSimulation(seed, settings, verbose).run()


def main(argv: list[str] | None = None) -> int:
    return seed_main("python -m broker.sim.txns", __doc__, run_txn_simulation, argv)


if __name__ == "__main__":
    sys.exit(main())
