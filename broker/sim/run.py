"""One deterministic simulation run: a cluster, a producer, faults from a seed, and invariants
checked after every event (reliability.md section 5, the ``RaftEventSimulationTest`` pattern).

Phases: start the brokers and create a topic (RF 3, min.insync.replicas 2); produce while
faults come and go (``Faults``); heal everything and let the cluster settle; then read every
replica and check the final state. Everything random comes from one ``Random(seed)``, time from
the scheduler, so ``run_simulation(seed)`` is a pure function: ``python -m broker.sim --seed N``
replays a failing seed exactly.

Invariants, after every event (``Invariants``):

1. at most one leader per (partition, leader epoch), over every broker that ever claimed one;
2. a replica's high watermark never goes down while the replica lives (one incarnation);
3. committed data never changes: the prefix below any leader's high watermark must equal the
   prefix every earlier leader exposed (leader completeness, log matching);
4. every replica that can be elected, an ISR member (in ZooKeeper) whose current incarnation
   the active controller knows, holds the whole committed prefix;
5. every acknowledged record is in the committed prefix at its acknowledged offset.

And at the end, after healing: every partition has a leader and a full ISR, every replica holds
the same log up to the high watermark, every acknowledged value is there exactly once at its
offset, and the producer's batches all completed (liveness).

Faults never make Kafka's own guarantee void: a machine crash that loses its unflushed tail hits
one broker of a quiet cluster (full ISRs, the controller caught up), so it can never be the last
ISR member of a partition (KIP-966's "last replica standing"), and nothing else happens until it
is back in sync. A restarting broker fences
itself out of its ISRs (``broker.replica.fencing``), whoever the controller is.
"""

from __future__ import annotations

import logging
import traceback
from collections import deque
from dataclasses import dataclass, field
from random import Random

from broker.cluster.layout import TopicAssignment
from broker.sim.client import SimProducer
from broker.sim.network import Network
from broker.sim.node import NodeSettings, SimBroker
from broker.sim.scheduler import Scheduler
from broker.sim.zookeeper import ZK, FakeZooKeeper

__all__ = ["SimSettings", "SimResult", "Simulation", "run_simulation"]

TOPIC = "sim"


@dataclass(frozen=True)
class SimSettings:
    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    min_insync_replicas: int = 2
    produce_ms: int = 12_000
    fault_gap_ms: tuple[int, int] = (200, 1_500)
    settle_ms: int = 20_000
    lossy_crashes: bool = True


@dataclass
class SimResult:
    seed: int
    ok: bool
    violations: list[str]
    events: int
    sim_ms: int
    acked: int
    faults: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    zombie_gaps: int = 0  # OUT_OF_ORDER_SEQUENCE_NUMBER answers from deposed leaders (see client.py)

    def summary(self) -> str:
        status = "ok" if self.ok else "FAILED"
        text = (f"seed {self.seed}: {status}, {self.events} events, {self.sim_ms} ms simulated, "
                f"{self.acked} records acknowledged, {len(self.faults)} faults"
                + (f", {self.zombie_gaps} gap answers from deposed leaders" if self.zombie_gaps else ""))
        if not self.ok:
            text += "\n  violations:\n    " + "\n    ".join(self.violations[:10])
            text += "\n  faults:\n    " + "\n    ".join(self.faults[-25:])
            text += f"\n  replay: python -m broker.sim --seed {self.seed} --verbose"
        return text


class _Violation(Exception):
    pass


class Simulation:
    def __init__(self, seed: int, settings: SimSettings | None = None,
                 node_settings: NodeSettings | None = None) -> None:
        self.seed = seed
        self.settings = settings or SimSettings()
        self.rng = Random(seed)
        self.scheduler = Scheduler()
        self.network = Network(self.scheduler, self.rng)
        self.zookeeper = FakeZooKeeper(self.scheduler, self.network)
        self.nodes = {b: SimBroker(self, b, node_settings) for b in range(1, self.settings.brokers + 1)}
        self.invariants = Invariants(self)
        self.faults = Faults(self)
        self.producer = SimProducer(self, TOPIC, self.settings.partitions, self.invariants.on_ack,
                                    self.invariants.violation)
        self.trace: deque[str] = deque(maxlen=200)
        self.controllers: dict[int, int] = {}  # epoch -> broker

    def log(self, text: str) -> None:
        self.trace.append(f"{self.scheduler.now_ms:>7} {text}")

    def observe_controller(self, broker: int, epoch: int) -> None:
        holder = self.controllers.setdefault(epoch, broker)
        if holder != broker:
            self.invariants.violation(f"controller epoch {epoch} held by {holder} and {broker}")
        self.log(f"broker {broker} is controller at epoch {epoch}")

    # ----------------------------------------------------------------------------- phases

    def run(self) -> SimResult:
        settings = self.settings
        try:
            self._tick()
            for node in self.nodes.values():
                node.start()
            self._run_until(self.scheduler.now_ms + 500)
            self._create_topic()
            self._run_until(self.scheduler.now_ms + 1_000)
            self.producer.start()
            self.faults.start(self.scheduler.now_ms + settings.produce_ms)
            self._run_until(self.scheduler.now_ms + settings.produce_ms)
            self.producer.stop_producing()
            self.faults.heal_all()
            self._settle(settings.settle_ms)
            self.invariants.final_check()
        except _Violation:
            pass
        except Exception:  # a bug that raised: as much a failure of the seed as a violation
            self.invariants.violations.append(f"t={self.scheduler.now_ms}: exception:\n"
                                              + traceback.format_exc())
        violations = self.invariants.violations
        return SimResult(self.seed, not violations, violations, self.scheduler.events_run,
                         self.scheduler.now_ms, self.producer.acked, list(self.faults.history),
                         list(self.trace), self.producer.zombie_gap_answers)

    def _tick(self) -> None:
        self.zookeeper.expire_sessions()
        self.scheduler.after(100, self._tick)

    def _run_until(self, time_ms: int) -> None:
        self.scheduler.run_until(time_ms, self.invariants.after_event)

    def _create_topic(self) -> None:
        settings = self.settings
        brokers = sorted(self.nodes)
        assignment = {p: tuple(brokers[(p + i) % len(brokers)] for i in range(settings.replication_factor))
                      for p in range(settings.partitions)}
        zk = self.zookeeper
        zk.topics[TOPIC] = TopicAssignment(assignment)
        zk.configs[TOPIC] = {"min.insync.replicas": str(settings.min_insync_replicas)}
        zk._changed("topics")
        self.log(f"created topic {TOPIC} {assignment}")

    def _settle(self, budget_ms: int) -> None:
        """Run until everything is healthy again, or report a liveness failure."""
        deadline = self.scheduler.now_ms + budget_ms
        while self.scheduler.now_ms < deadline:
            self._run_until(self.scheduler.now_ms + 250)
            if self.producer.idle() and self.invariants.healthy():
                self._run_until(self.scheduler.now_ms + 500)  # followers fetch the last HW
                return
        self.invariants.violation(f"not healthy {budget_ms} ms after healing: "
                                  f"{self.invariants.health_report()}")


class Invariants:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.violations: list[str] = []
        self._leaders: dict[tuple, int] = {}
        self._hw: dict[tuple, int] = {}
        self.committed: dict[tuple[str, int], list] = {}  # tp -> fingerprints of committed batches
        self.committed_offset: dict[tuple[str, int], int] = {}
        self._prefix: dict[int, tuple[int, int]] = {}  # id(log) -> (truncations, batches verified)
        self.acks: list[tuple[tuple[str, int], int, str]] = []  # (tp, offset or -1, value)
        self._unchecked_acks: list = []

    def violation(self, text: str) -> None:
        self.violations.append(f"t={self.sim.scheduler.now_ms}: {text}")
        self.sim.log(f"VIOLATION {text}")
        raise _Violation(text)

    def on_ack(self, tp, values: list[str], base_offset: int, broker: int) -> None:
        for i, value in enumerate(values):
            self.acks.append((tp, base_offset + i if base_offset >= 0 else -1, value))
        self._unchecked_acks.append((tp, base_offset, values, broker))

    def on_leader_ack(self, node: SimBroker, partition) -> None:
        """A leader acknowledges acks=all records: what is below its high watermark is
        committed from now on (also when the leader is a zombie about to learn it lost)."""
        if partition.high_watermark > self.committed_offset.get(partition.key, 0):
            self._extend_committed(partition.key, node, partition)

    # --------------------------------------------------------------------- every event

    def after_event(self) -> None:
        for node in self.sim.nodes.values():
            if node.replicas is None:
                continue
            for partition in node.replicas.partitions():
                self._check_replica(node, partition)
        for tp in self.committed_offset:
            self._check_electable(tp)
        if self._unchecked_acks:
            self._check_acks()

    def _check_replica(self, node: SimBroker, partition) -> None:
        tp = partition.key
        if partition.is_leader:
            holder = self._leaders.setdefault((tp, partition.leader_epoch), node.id)
            if holder != node.id:
                self.violation(f"{tp} epoch {partition.leader_epoch}: leaders {holder} and {node.id}")
        key = (node.id, node.incarnation, tp)
        previous = self._hw.get(key, -1)
        if partition.high_watermark < previous:
            self.violation(f"{tp} on broker {node.id}: high watermark went from {previous} to "
                           f"{partition.high_watermark}")
        self._hw[key] = partition.high_watermark
        if partition.is_leader and partition.high_watermark > self.committed_offset.get(tp, 0):
            self._extend_committed(tp, node, partition)

    def _matches(self, log, reference: list) -> bool:
        """Does ``log`` begin with the ``reference`` batches? Incremental: a log only grows
        between truncations, so what was verified stays verified until the next one."""
        if log is None or len(log.batches) < len(reference):
            return False
        key = id(log)
        truncations, verified = self._prefix.get(key, (log.truncations, 0))
        if truncations != log.truncations:
            verified = 0
        for i in range(verified, len(reference)):
            if log.batches[i].fingerprint != reference[i]:
                self._prefix[key] = (log.truncations, i)
                return False
        self._prefix[key] = (log.truncations, max(verified, len(reference)))
        return True

    def _extend_committed(self, tp, node: SimBroker, partition) -> None:
        reference = self.committed.setdefault(tp, [])
        log = partition.log
        if not self._matches(log, reference):
            self.violation(f"{tp}: leader {node.id} (epoch {partition.leader_epoch}) disagrees with "
                           f"the committed prefix below {self.committed_offset.get(tp, 0)}")
        hw = partition.high_watermark
        for batch in log.batches[len(reference):]:
            if batch.base_offset >= hw:
                break
            reference.append(batch.fingerprint)
        self.committed_offset[tp] = hw

    def _electable(self, tp) -> list[SimBroker]:
        found = self.sim.zookeeper.states.get(tp)
        controller = next((n for n in self.sim.nodes.values()
                           if n.controller is not None and n.controller.core.active), None)
        if found is None or controller is None:
            return []
        live = controller.controller.core.ctx.live_brokers
        out = []
        for broker in found[0].isr:
            node = self.sim.nodes[broker]
            if node.replicas is not None and broker in live and live[broker][1] == node.broker_epoch:
                out.append(node)
        return out

    def _check_electable(self, tp) -> None:
        reference = self.committed[tp]
        for node in self._electable(tp):
            log = node.disk.get(*tp)
            if not self._matches(log, reference):
                self.violation(f"{tp}: broker {node.id} is electable (in the ISR) but lacks the committed "
                               f"prefix below {self.committed_offset[tp]} (its log end "
                               f"{log.log_end_offset if log else None})")

    def _check_acks(self) -> None:
        pending, self._unchecked_acks = self._unchecked_acks, []
        for tp, base, values, broker in pending:
            if base < 0:
                continue
            last = base + len(values)
            if last > self.committed_offset.get(tp, 0):
                node = self.sim.nodes[broker]
                partition = node.replicas.get(*tp) if node.replicas is not None else None
                if partition is not None and partition.is_leader and partition.high_watermark >= last:
                    self._extend_committed(tp, node, partition)
                if last > self.committed_offset.get(tp, 0):
                    self.violation(f"{tp}: offsets {base}..{last - 1} acknowledged by broker {broker} "
                                   f"above the committed offset {self.committed_offset.get(tp, 0)}")

    # ------------------------------------------------------------------------- the end

    def healthy(self) -> bool:
        return not self.health_report()

    def health_report(self) -> list[str]:
        problems = []
        for tp in sorted(self.sim.zookeeper.states):
            state, _ = self.sim.zookeeper.states[tp]
            if state.leader < 0 or len(state.isr) < self.sim.settings.replication_factor:
                problems.append(f"{tp}: leader {state.leader} isr {list(state.isr)}")
                continue
            leader = self.sim.nodes[state.leader]
            partition = leader.replicas.get(*tp) if leader.replicas is not None else None
            if partition is None or not partition.is_leader:
                problems.append(f"{tp}: broker {state.leader} does not lead it yet")
                continue
            if partition.high_watermark < partition.log.log_end_offset:
                problems.append(f"{tp}: high watermark {partition.high_watermark} < log end "
                                f"{partition.log.log_end_offset}")
        if not self.sim.producer.idle():
            problems.append("the producer still has batches in flight")
        return problems

    def final_check(self) -> None:
        for tp, (state, _) in sorted(self.sim.zookeeper.states.items()):
            leader = self.sim.nodes[state.leader].replicas.get(*tp)
            hw = leader.high_watermark
            reference = [b.fingerprint for b in leader.log.batches if b.base_offset < hw]
            for node in self.sim.nodes.values():
                log = node.disk.get(*tp)
                mine = [b.fingerprint for b in log.batches if b.base_offset < hw] if log else None
                if mine != reference:
                    self.violation(f"{tp}: broker {node.id}'s log differs from leader {state.leader}'s "
                                   f"below the high watermark {hw}")
        values_at = self._final_values()
        seen: dict[str, list] = {}
        for (tp, offset), value in values_at.items():
            seen.setdefault(value, []).append((tp, offset))
        for tp, offset, value in self.acks:
            where = seen.get(value, [])
            if not where:
                self.violation(f"acknowledged {value} ({tp} offset {offset}) is lost")
            if len(where) > 1:
                self.violation(f"{value} is in the log {len(where)} times: {where}")
            if offset >= 0 and where[0] != (tp, offset):
                self.violation(f"{value} was acknowledged at {tp} offset {offset} but is at {where[0]}")

    def _final_values(self) -> dict:
        from broker.records import decode_batch

        values = {}
        for tp, (state, _) in sorted(self.sim.zookeeper.states.items()):
            leader = self.sim.nodes[state.leader].replicas.get(*tp)
            for batch in leader.log.batches:
                if batch.base_offset >= leader.high_watermark:
                    break
                for record in decode_batch(batch.data).records:
                    values[(tp, record.offset)] = record.value.decode()
        return values


class Faults:
    """Process, disk and network faults at random times (reliability.md scenarios 1-9)."""

    KINDS = ("crash", "crash", "stop", "pause", "isolate", "isolate_zk", "cut_link", "lossy")

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.history: list[str] = []
        self._until_ms = 0
        self._down: set[int] = set()
        self._paused: set[int] = set()
        self._cuts: list[tuple] = []
        self._lossy_pending: int | None = None

    def start(self, until_ms: int) -> None:
        self._until_ms = until_ms
        self._schedule()

    def _schedule(self) -> None:
        low, high = self.sim.settings.fault_gap_ms
        self.sim.scheduler.after(self.sim.rng.randint(low, high), self._inject)

    def _record(self, text: str) -> None:
        self.history.append(f"t={self.sim.scheduler.now_ms}: {text}")
        self.sim.log(f"FAULT {text}")

    def _healthy_nodes(self) -> list[int]:
        return [b for b in sorted(self.sim.nodes) if b not in self._down and b not in self._paused
                and self.sim.nodes[b].status == "up"]

    def _inject(self) -> None:
        sim = self.sim
        if sim.scheduler.now_ms >= self._until_ms:
            return
        self._schedule()
        if self._lossy_pending is not None:
            self._advance_lossy()
            return
        disturbed = len(self._down) + len(self._paused) + len(self._cuts)
        if disturbed >= 2:
            return
        kind = sim.rng.choice(self.KINDS)
        nodes = self._healthy_nodes()
        if not nodes:
            return
        node = sim.rng.choice(nodes)
        getattr(self, f"_{kind}")(node)

    def _crash(self, broker: int) -> None:
        self._record(f"SIGKILL broker {broker}")
        self.sim.nodes[broker].crash(lose_unflushed=False)
        self._down.add(broker)
        self.sim.scheduler.after(self.sim.rng.randint(100, 4_000), self._restart, broker)

    def _stop(self, broker: int) -> None:
        self._record(f"SIGTERM broker {broker}")
        self.sim.nodes[broker].stop()
        self._down.add(broker)
        self.sim.scheduler.after(self.sim.rng.randint(500, 4_000), self._restart, broker)

    def _restart(self, broker: int) -> None:
        node = self.sim.nodes[broker]
        if node.status != "down":  # still shutting down cleanly
            self.sim.scheduler.after(100, self._restart, broker)
            return
        self._record(f"restart broker {broker}")
        node.start()
        self._down.discard(broker)

    def _pause(self, broker: int) -> None:
        duration = self.sim.rng.randint(100, 5_000)  # beyond the session timeout sometimes
        self._record(f"SIGSTOP broker {broker} for {duration} ms")
        self.sim.nodes[broker].pause()
        self._paused.add(broker)
        self.sim.scheduler.after(duration, self._resume, broker)

    def _resume(self, broker: int) -> None:
        self._record(f"SIGCONT broker {broker}")
        self.sim.nodes[broker].resume()
        self._paused.discard(broker)

    def _isolate(self, broker: int) -> None:
        peers = [b for b in self.sim.nodes if b != broker] + [ZK]
        self._cut(broker, peers, "from everyone")

    def _isolate_zk(self, broker: int) -> None:
        self._cut(broker, [ZK], "from ZooKeeper")

    def _cut_link(self, broker: int) -> None:
        other = self.sim.rng.choice([b for b in sorted(self.sim.nodes) if b != broker])
        both = self.sim.rng.random() < 0.5
        for peer in [other]:
            self.sim.network.cut(broker, peer, both_ways=both)
        self._cuts.append(("link", broker, other))
        duration = self.sim.rng.randint(200, 4_000)
        self._record(f"cut {broker}->{other}{' both ways' if both else ''} for {duration} ms")
        self.sim.scheduler.after(duration, self._heal_cut, ("link", broker, other), [(broker, other)])

    def _cut(self, broker: int, peers: list, what: str) -> None:
        duration = self.sim.rng.randint(200, 5_000)
        for peer in peers:
            self.sim.network.cut(broker, peer)
        entry = ("cut", broker, what)
        self._cuts.append(entry)
        self._record(f"isolate broker {broker} {what} for {duration} ms")
        self.sim.scheduler.after(duration, self._heal_cut, entry, [(broker, p) for p in peers])

    def _heal_cut(self, entry, links) -> None:
        for a, b in links:
            self.sim.network.heal(a, b)
        if entry in self._cuts:
            self._cuts.remove(entry)
        self._record(f"heal {entry}")

    # -------------------------------------------------------------- lossy machine crash

    def _lossy(self, broker: int) -> None:
        """Power loss: the broker comes back without its unflushed tail and fences itself out of
        its ISRs before registering (``broker.replica.fencing``). Injected only into a quiet
        cluster and alone, so the broker cannot end up the last ISR member of a partition:
        there Kafka's guarantee ends (KIP-966)."""
        sim = self.sim
        if not sim.settings.lossy_crashes or self._down or self._paused or self._cuts or not self._quiet():
            return
        lost = sim.nodes[broker].crash(lose_unflushed=True)
        self._record(f"power loss on broker {broker} ({lost} unflushed batches lost)")
        self._down.add(broker)
        self._lossy_pending = broker
        self.sim.scheduler.after(self.sim.rng.randint(100, 4_000), self._restart_lossy, broker)

    def _quiet(self) -> bool:
        """Every ISR full and the controller caught up with every broker's registration: the
        earlier faults are over, effects included (a bounce the controller has yet to handle
        would still take a replica out of an ISR, leaving the one that lost power alone)."""
        sim = self.sim
        rf = sim.settings.replication_factor
        if any(len(state.isr) < rf for state, _ in sim.zookeeper.states.values()):
            return False
        controller = next((n.controller.core for n in sim.nodes.values()
                           if n.controller is not None and n.controller.core.active), None)
        registered = {b: czxid for b, (_, czxid, _) in sim.zookeeper.brokers.items()}
        return controller is not None and {
            b: epoch for b, (_, epoch) in controller.ctx.live_brokers.items()} == registered

    def _restart_lossy(self, broker: int) -> None:
        if self._lossy_pending == broker and self.sim.nodes[broker].status == "down":
            self._record(f"restart broker {broker} after power loss")
            self.sim.nodes[broker].start()
            self._down.discard(broker)

    def _advance_lossy(self) -> None:
        """Nothing else happens until the broker that lost power is back in sync everywhere."""
        broker = self._lossy_pending
        if self.sim.nodes[broker].status != "down" and all(
                broker in s.isr for s, _ in self.sim.zookeeper.states.values()):
            self._lossy_pending = None

    # ----------------------------------------------------------------------------- heal

    def heal_all(self) -> None:
        sim = self.sim
        self._until_ms = 0
        sim.network.heal()
        self._cuts.clear()
        for broker in sorted(self._paused):
            sim.nodes[broker].resume()
        self._paused.clear()
        for broker in sorted(self._down):
            if sim.nodes[broker].status == "down":
                sim.nodes[broker].start()
        self._down.clear()
        self._lossy_pending = None
        self._record("healed everything")


def run_simulation(seed: int, settings: SimSettings | None = None, verbose: bool = False) -> SimResult:
    level = logging.INFO if verbose else logging.CRITICAL
    previous = logging.getLogger("broker").level
    logging.getLogger("broker").setLevel(level)
    try:
        return Simulation(seed, settings).run()
    finally:
        logging.getLogger("broker").setLevel(previous)
