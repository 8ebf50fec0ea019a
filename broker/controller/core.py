"""``ControllerCore``: the ZooKeeper-mode controller's event handlers, synchronous and pure of I/O
but for the ``ControllerZk`` it is given (Kafka's ``KafkaController`` + the two state machines).

The caller (``broker.server.controller`` in a broker, ``broker.sim`` in the simulator) runs one
event at a time, as Kafka's single controller thread does:

=============================  ============================================================
event                           what the core does
=============================  ============================================================
``on_elected(epoch, version)``  read the whole cluster from ZooKeeper, push UpdateMetadata and
                                LeaderAndIsr to every live broker, elect leaders for new and
                                offline partitions (``onControllerFailover``)
``on_broker_change()``          re-read ``/brokers/ids``: dead and bounced brokers (same id, new
                                epoch) fail first (their led partitions are re-elected, they
                                leave every ISR), then new and bounced ones start (they get
                                LeaderAndIsr for their replicas; offline partitions retry)
``on_topic_change()``           new topics: first live replica leads, live replicas form the
                                ISR; gone topics: StopReplica(delete) to their replicas
``on_isr_change()``             leaders changed ISRs (or a broker fenced itself out after an
                                unclean restart): re-read those states, push UpdateMetadata,
                                tell each leader its state, elect where no leader is left
``on_controlled_shutdown(b)``   move b's leaderships to other ISR members, stop it following,
                                take it out of ISRs; answer what it still leads
``on_auto_rebalance()``         preferred-replica election where a broker leads less than
                                (100 - leader.imbalance.per.broker.percentage)% of its share
=============================  ============================================================

Every handler returns the ``Send`` values to deliver, in order. State changes go through the
transition tables of ``states.py``; leaders come from the pure functions of ``election.py``;
elections and ISR removals first re-read the partition's state (leaders change ISRs behind the
controller's back and only announce it with a notification; Kafka's ``doElectLeaderForPartitions``
reads ZooKeeper first too); every partition-state write is conditional on that znode version and on
``/controller_epoch`` still being this controller's (``set_partition_state_as_controller``),
so a deposed controller writes nothing: the write raises ``ControllerMovedError``, which
propagates and makes the caller resign. A lost race with a leader's own ISR write
(``BadVersionError``) re-reads the state and decides again, at most ``WRITE_ATTEMPTS_MAX`` times.
ZooKeeper connection errors propagate too; the caller re-runs ``on_elected`` (a full re-read is
always correct: the context only mirrors ZooKeeper).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Protocol, Sequence

from broker.cluster.errors import (
    BadVersionError,
    ControllerMovedError,
    MalformedZnodeError,
    PartitionStateExistsError,
    UnknownTopicOrPartitionError,
)
from broker.cluster.layout import BrokerRegistration, PartitionState, TopicAssignment
from broker.controller.context import ControllerContext
from broker.controller.reassignment import check_target, start_reassignment, try_complete
from broker.controller.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
)
from broker.controller.requests import PartitionLeadership, RequestBatch, Send, TopicPartition
from broker.controller.states import PartitionStateName, ReplicaStateName

__all__ = ["ControllerCore", "ControllerSettings", "ControllerZk", "ShutdownResult", "Send",
           "WRITE_ATTEMPTS_MAX"]

logger = logging.getLogger(__name__)

WRITE_ATTEMPTS_MAX = 3
NONE, BROKER_NOT_AVAILABLE, NOT_CONTROLLER, STALE_BROKER_EPOCH = 0, 8, 41, 77
UNKNOWN_TOPIC_OR_PARTITION, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE = 3, 80, 83
ELECTION_NOT_NEEDED = 84
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1  # ElectLeadersRequest.ElectionType

_P = PartitionStateName
_R = ReplicaStateName
Strategy = Callable[[TopicPartition, PartitionLeadership], Election | None]


class ControllerZk(Protocol):
    """The ZooKeeper operations the controller uses (``broker.cluster.zk.KafkaZkClient``)."""

    def get_brokers_and_epochs(self) -> dict[int, tuple[BrokerRegistration, int]]: ...
    def get_topics(self) -> list[str]: ...
    def get_topic_assignment(self, name: str) -> TopicAssignment: ...
    def get_topic_config(self, name: str) -> dict[str, str]: ...
    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int]: ...
    def create_partition_states_as_controller(self, topic: str, states: Mapping[int, PartitionState],
                                              controller_epoch_version: int) -> dict[int, int]: ...
    def set_partition_state_as_controller(self, topic: str, partition: int, state: PartitionState,
                                          expected_version: int, controller_epoch_version: int) -> int: ...
    def get_isr_change_notifications(self) -> list[tuple[str, list[tuple[str, int]]]]: ...
    def delete_isr_change_notifications(self, names: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class ControllerSettings:
    unclean_leader_election_enable: bool = False  # unclean.leader.election.enable (topic override wins)
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_per_broker_percentage: int = 10  # leader.imbalance.per.broker.percentage


class ShutdownResult(NamedTuple):
    error_code: int
    remaining: list[TopicPartition]  # partitions the broker still leads
    sends: list[Send]


class ElectionOutcome(NamedTuple):
    """ElectLeaders: (error code, message) per partition, and the requests to send."""

    results: dict[TopicPartition, tuple[int, str | None]]
    sends: list[Send]


class ControllerCore:
    def __init__(self, broker_id: int, zk: ControllerZk, settings: ControllerSettings) -> None:
        self.broker_id = broker_id
        self._zk = zk
        self.settings = settings
        self.ctx: ControllerContext | None = None
        # partition reassignments in progress: tp -> (target, original) (reassignment.py)
        self.reassignments: dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    @property
    def active(self) -> bool:
        return self.ctx is not None

    @property
    def epoch(self) -> int:
        return self.ctx.epoch if self.ctx is not None else -1

    # ------------------------------------------------------------------------------ election

    def on_elected(self, epoch: int, epoch_zk_version: int) -> list[Send]:
        """This broker won ``/controller`` at ``epoch``: rebuild the context from ZooKeeper and
        bring every broker and partition in line (also used to re-initialize after an error)."""
        self.ctx = ctx = ControllerContext(epoch, epoch_zk_version)
        ctx.live_brokers = dict(self._zk.get_brokers_and_epochs())
        for topic in sorted(self._zk.get_topics()):
            self._load_topic(topic)
        self._zk.delete_isr_change_notifications(
            [name for name, _ in self._zk.get_isr_change_notifications()])  # states were just read
        live = ctx.live_ids()
        for tp in ctx.all_partitions():  # initial states are read, not transitioned (Kafka does the same)
            leadership = ctx.leaderships.get(tp)
            if leadership is None:
                ctx.partition_states[tp] = _P.NEW
            else:
                ctx.partition_states[tp] = _P.ONLINE if leadership.state.leader in live else _P.OFFLINE
            for replica in ctx.replicas(tp):
                ctx.replica_states[(tp, replica)] = _R.ONLINE if replica in live else _R.OFFLINE
        batch = self._batch()
        batch.add_update_metadata(live, ctx.all_partitions())
        for tp in ctx.all_partitions():
            batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r in live], tp)
        self._trigger_online_partition_state_change(batch)
        logger.info("controller %d active at epoch %d: %d brokers, %d partitions", self.broker_id,
                    epoch, len(live), len(ctx.all_partitions()))
        return batch.build()

    def on_resigned(self) -> None:
        if self.ctx is not None:
            logger.info("controller %d resigns (epoch %d)", self.broker_id, self.ctx.epoch)
        self.ctx = None
        self.reassignments = {}

    def _load_topic(self, topic: str) -> list[TopicPartition]:
        ctx = self._require()
        try:
            assignment = self._zk.get_topic_assignment(topic)
        except UnknownTopicOrPartitionError:
            return []
        except MalformedZnodeError as exc:
            logger.error("ignoring topic %s: %s", topic, exc)
            return []
        ctx.assignments[topic] = {p: tuple(r) for p, r in sorted(assignment.partitions.items())}
        for p in set(assignment.adding_replicas) | set(assignment.removing_replicas):  # resume (KIP-455)
            replicas = tuple(assignment.partitions[p])
            adding, removing = assignment.adding_replicas.get(p, ()), assignment.removing_replicas.get(p, ())
            self.reassignments[(topic, p)] = (tuple(r for r in replicas if r not in removing),
                                              tuple(r for r in replicas if r not in adding))
        try:
            ctx.topic_configs[topic] = dict(self._zk.get_topic_config(topic))
        except MalformedZnodeError as exc:
            logger.error("topic %s: ignoring its config: %s", topic, exc)
            ctx.topic_configs[topic] = {}
        for p, replicas in sorted(assignment.partitions.items()):
            try:
                state, version = self._zk.get_partition_state(topic, p)
            except UnknownTopicOrPartitionError:
                continue
            ctx.leaderships[(topic, p)] = PartitionLeadership(tuple(replicas), state, version)
        return [(topic, p) for p in sorted(assignment.partitions)]

    # ------------------------------------------------------------------------------ brokers

    def on_broker_change(self) -> list[Send]:
        ctx = self._require()
        current = dict(self._zk.get_brokers_and_epochs())
        old = ctx.live_brokers
        new = sorted(set(current) - set(old))
        dead = sorted(set(old) - set(current))
        bounced = sorted(b for b in set(current) & set(old) if current[b][1] != old[b][1])
        for broker in set(current) & set(old):  # endpoints may change without an epoch change
            if broker not in bounced:
                old[broker] = current[broker]
        batch = self._batch()
        if dead or bounced:
            logger.info("brokers failed: %s, bounced: %s", dead, bounced)
            for broker in dead + bounced:
                del ctx.live_brokers[broker]
                ctx.shutting_down.discard(broker)
            self._on_broker_failure(dead + bounced, batch)
        if new or bounced:
            logger.info("brokers started: %s", sorted(new + bounced))
            for broker in new + bounced:
                ctx.live_brokers[broker] = current[broker]
            self._on_broker_startup(sorted(new + bounced), batch)
        return batch.build()

    def _on_broker_failure(self, dead: list[int], batch: RequestBatch) -> None:
        ctx = self._require()
        gone = set(dead)
        for tp, leadership in sorted(ctx.leaderships.items()):
            if leadership.state.leader in gone:
                ctx.move_partition(tp, _P.OFFLINE)
        self._trigger_online_partition_state_change(batch)
        touched: set[TopicPartition] = set()
        for broker in dead:
            for tp in ctx.partitions_on(broker):
                self._offline_replica(tp, broker, batch)
                touched.add(tp)
        batch.add_update_metadata(ctx.live_ids(), sorted(touched))

    def _on_broker_startup(self, started: list[int], batch: RequestBatch) -> None:
        ctx = self._require()
        live = ctx.live_ids()
        batch.add_update_metadata(started, ctx.all_partitions())
        batch.add_update_metadata(live - set(started), [])  # the others learn the broker list
        for broker in started:
            for tp in ctx.partitions_on(broker):
                ctx.move_replica(tp, broker, _R.ONLINE)
                self._reread(tp)  # a fresh replica must not get an ISR older than ZooKeeper's
                batch.add_leader_and_isr([broker], tp)
        self._trigger_online_partition_state_change(batch)

    def _offline_replica(self, tp: TopicPartition, broker: int, batch: RequestBatch) -> None:
        """``removeReplicasFromIsr``: the replica leaves the ISR (unless it is the last member,
        which stays so the partition can come back with it), and loses leadership."""
        ctx = self._require()
        if ctx.replica_state(tp, broker) != _R.OFFLINE:
            ctx.move_replica(tp, broker, _R.OFFLINE)
        self._reread(tp)
        for _ in range(WRITE_ATTEMPTS_MAX):
            leadership = ctx.leaderships.get(tp)
            if leadership is None or broker not in leadership.state.isr:
                return
            state = leadership.state
            isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != broker)
            leader = -1 if state.leader == broker else state.leader
            written = self._write_state(tp, leadership, PartitionState(
                leader, state.leader_epoch + 1, isr, ctx.epoch))
            if written is None:
                continue
            if leader == -1 and ctx.partition_state(tp) != _P.OFFLINE:
                ctx.move_partition(tp, _P.OFFLINE)
            batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r != broker], tp)
            return
        logger.warning("%s-%d: could not remove replica %d from the ISR", tp[0], tp[1], broker)

    # ------------------------------------------------------------------------------- topics

    def on_topic_change(self) -> list[Send]:
        ctx = self._require()
        topics = set(self._zk.get_topics())
        known = set(ctx.assignments)
        batch = self._batch()
        for topic in sorted(known - topics):
            self._forget_topic(topic, batch)
        for topic in sorted(topics - known):
            self._on_new_topic(topic, batch)
        return batch.build()

    def _on_new_topic(self, topic: str, batch: RequestBatch) -> None:
        ctx = self._require()
        live = ctx.live_ids()
        for tp in self._load_topic(topic):
            ctx.move_partition(tp, _P.NEW)
            for replica in ctx.replicas(tp):
                ctx.move_replica(tp, replica, _R.NEW)
                ctx.move_replica(tp, replica, _R.ONLINE if replica in live else _R.OFFLINE)
            leadership = ctx.leaderships.get(tp)
            if leadership is not None:  # written by a controller that died before telling anyone
                ctx.move_partition(tp, _P.ONLINE if leadership.state.leader in live else _P.OFFLINE)
                batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r in live], tp)
        self._trigger_online_partition_state_change(batch)

    def on_partitions_added(self, topic: str) -> list[Send]:
        """CreatePartitions lengthened the topic's assignment: its new partitions go NewPartition
        -> OnlinePartition (Kafka's ``onNewPartitionCreation``); the others are untouched."""
        ctx = self._require()
        known = set(ctx.assignments.get(topic, {}))
        live = ctx.live_ids()
        batch = self._batch()
        added = [tp for tp in self._load_topic(topic) if tp[1] not in known]
        for tp in added:
            ctx.move_partition(tp, _P.NEW)
            for replica in ctx.replicas(tp):
                ctx.move_replica(tp, replica, _R.NEW)
                ctx.move_replica(tp, replica, _R.ONLINE if replica in live else _R.OFFLINE)
        self._initialize_leaders(added, batch)
        return batch.build()

    def _forget_topic(self, topic: str, batch: RequestBatch) -> None:
        """The topic's znodes are gone (deleted through DeleteTopics or by a tool): replicas stop
        and delete their logs, states walk to NonExistent through the deletion states."""
        ctx = self._require()
        logger.info("topic %s was deleted", topic)
        for tp in sorted((topic, p) for p in ctx.assignments.get(topic, {})):
            for replica in ctx.replicas(tp):
                batch.add_stop_replica(replica, tp, delete=True)
                for target in (_R.OFFLINE, _R.DELETION_STARTED, _R.DELETION_SUCCESSFUL, _R.NON_EXISTENT):
                    if target != _R.OFFLINE or ctx.replica_state(tp, replica) != _R.OFFLINE:
                        ctx.move_replica(tp, replica, target)
            if ctx.partition_state(tp) != _P.OFFLINE:
                ctx.move_partition(tp, _P.OFFLINE)
            ctx.move_partition(tp, _P.NON_EXISTENT)
        ctx.remove_topic(topic)

    # ------------------------------------------------------------------------ ISR changes

    def on_isr_change(self) -> list[Send]:
        """Leaders wrote ISR changes and left ``/isr_change_notification`` children: read the
        states back and tell every broker (``IsrChangeNotificationHandler``)."""
        ctx = self._require()
        notifications = self._zk.get_isr_change_notifications()
        changed = sorted({tp for _, tps in notifications for tp in tps if tp in ctx.leaderships})
        for tp in changed:
            self._reread(tp)
        batch = self._batch()
        batch.add_update_metadata(ctx.live_ids(), changed)
        for tp in changed:
            # The leader learns a change made behind its back (a broker that fenced itself out
            # after an unclean restart); for its own changes this is a no-op it ignores.
            leader = ctx.leaderships[tp].state.leader
            if leader in ctx.live_brokers:
                batch.add_leader_and_isr([leader], tp)
        for tp in changed:
            try_complete(self, tp, batch)  # a reassignment whose new replicas are all in the ISR
        self._trigger_online_partition_state_change(batch)  # and elect where nobody leads
        self._zk.delete_isr_change_notifications([name for name, _ in notifications])
        return batch.build()

    # ------------------------------------------------------------------ controlled shutdown

    def on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ShutdownResult:
        ctx = self.ctx
        if ctx is None:
            return ShutdownResult(NOT_CONTROLLER, [], [])
        if broker_id not in ctx.live_brokers:
            return ShutdownResult(BROKER_NOT_AVAILABLE, [], [])
        if 0 <= broker_epoch < ctx.live_brokers[broker_id][1]:
            return ShutdownResult(STALE_BROKER_EPOCH, [], [])
        ctx.shutting_down.add(broker_id)
        batch = self._batch()
        replicated = [tp for tp in ctx.partitions_on(broker_id) if len(ctx.replicas(tp)) > 1]
        led = [tp for tp in replicated if self._leader(tp) == broker_id]
        followed = [tp for tp in replicated if self._leader(tp) != broker_id]
        self._elect(led, self._controlled_shutdown_strategy, batch)
        for tp in led + followed:
            if self._leader(tp) != broker_id:  # it leads no more: stop it following (no re-join)
                batch.add_stop_replica(broker_id, tp, delete=False)
        for tp in followed:
            self._offline_replica(tp, broker_id, batch)
        remaining = [tp for tp in replicated if self._leader(tp) == broker_id]
        logger.info("controlled shutdown of broker %d: %d partitions moved, %d still led",
                    broker_id, len(led) - len(remaining), len(remaining))
        return ShutdownResult(NONE, remaining, batch.build())

    # ----------------------------------------------------------------------- ElectLeaders

    def on_elect_leaders(self, election_type: int, tps: list[TopicPartition] | None) -> ElectionOutcome:
        """ElectLeaders (KIP-460): preferred (the first assigned replica, if alive and in the
        ISR) or unclean (any live replica, only where no live leader is left) per partition;
        ``None`` is every partition. A partition already led as asked is ELECTION_NOT_NEEDED."""
        ctx = self.ctx
        if ctx is None:
            return ElectionOutcome({}, [])
        wanted = ctx.all_partitions() if tps is None else tps
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        to_elect = []
        live = ctx.live_ids()
        for tp in wanted:
            leadership = ctx.leaderships.get(tp)
            if leadership is None:
                results[tp] = (UNKNOWN_TOPIC_OR_PARTITION, f"The partition {tp[0]}-{tp[1]} does not exist.")
            elif election_type == ELECTION_PREFERRED and leadership.state.leader == ctx.replicas(tp)[0]:
                results[tp] = (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            elif election_type == ELECTION_UNCLEAN and leadership.state.leader in live:
                results[tp] = (ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
            else:
                to_elect.append(tp)
        batch = self._batch()
        strategy = self._preferred_strategy if election_type == ELECTION_PREFERRED else self._unclean_strategy
        failed = set(self._elect(to_elect, strategy, batch))
        for tp in to_elect:
            if tp not in failed:
                results[tp] = (NONE, None)
            elif election_type == ELECTION_PREFERRED:
                results[tp] = (PREFERRED_LEADER_NOT_AVAILABLE, f"Failed to elect leader for partition "
                               f"{tp[0]}-{tp[1]} under strategy PreferredReplicaPartitionLeaderElectionStrategy")
            else:
                results[tp] = (ELIGIBLE_LEADERS_NOT_AVAILABLE, f"Failed to elect leader for partition "
                               f"{tp[0]}-{tp[1]} under strategy OfflinePartitionLeaderElectionStrategy(true)")
        return ElectionOutcome(results, batch.build())

    def _unclean_strategy(self, tp: TopicPartition, leadership: PartitionLeadership) -> Election | None:
        return offline_partition_leader(leadership.replicas, leadership.state.isr, self._require().live_ids(),
                                        unclean_enabled=True)

    # ------------------------------------------------------------ partition reassignment

    def on_alter_reassignments(self, wanted: dict[TopicPartition, tuple[int, ...] | None]) -> ElectionOutcome:
        """AlterPartitionReassignments: start (or cancel, target None) each partition's
        reassignment (``reassignment.py``); (error code, message) per partition."""
        if self.ctx is None:
            return ElectionOutcome({}, [])
        batch = self._batch()
        results = {}
        for tp, target in sorted(wanted.items()):
            results[tp] = check_target(self, tp, target)
            if results[tp][0] == NONE:
                start_reassignment(self, tp, target, batch)
        return ElectionOutcome(results, batch.build())

    # --------------------------------------------------------------------- auto rebalance

    def on_auto_rebalance(self) -> list[Send]:
        """``checkAndTriggerAutoLeaderRebalance``: per broker, if more than the allowed share of
        the partitions it prefers are led elsewhere, move them back where it is in sync."""
        ctx = self._require()
        if not self.settings.auto_leader_rebalance_enable:
            return []
        batch = self._batch()
        live = ctx.live_ids() - ctx.shutting_down
        for broker in sorted(live):
            preferred = [tp for tp in ctx.all_partitions()
                         if ctx.replicas(tp)[:1] == (broker,) and tp in ctx.leaderships]
            elsewhere = [tp for tp in preferred if self._leader(tp) != broker]
            if not preferred or len(elsewhere) * 100 <= (
                    self.settings.leader_imbalance_per_broker_percentage * len(preferred)):
                continue
            candidates = [tp for tp in elsewhere if broker in ctx.leaderships[tp].state.isr]
            if candidates:
                logger.info("preferred leader election for %d partitions of broker %d",
                            len(candidates), broker)
                self._elect(candidates, self._preferred_strategy, batch)
        return batch.build()

    # ----------------------------------------------------------------------- the machinery

    def _trigger_online_partition_state_change(self, batch: RequestBatch) -> None:
        """New partitions get their first leader; offline ones an elected one."""
        ctx = self._require()
        new = [tp for tp in ctx.all_partitions() if ctx.partition_state(tp) == _P.NEW]
        offline = [tp for tp in ctx.all_partitions() if ctx.partition_state(tp) == _P.OFFLINE]
        self._initialize_leaders(new, batch)
        self._elect(offline, self._offline_strategy, batch)

    def _initialize_leaders(self, tps: list[TopicPartition], batch: RequestBatch) -> None:
        """NewPartition -> OnlinePartition: leader = first live replica, ISR = live replicas."""
        ctx = self._require()
        usable = ctx.live_ids() - ctx.shutting_down
        by_topic: dict[str, dict[int, PartitionState]] = {}
        for topic, p in tps:
            live = tuple(r for r in ctx.replicas((topic, p)) if r in usable)
            if not live:
                logger.warning("%s-%d: no live replica to lead it yet", topic, p)
                continue
            by_topic.setdefault(topic, {})[p] = PartitionState(live[0], 0, live, ctx.epoch)
        for topic, states in sorted(by_topic.items()):
            try:
                versions = self._zk.create_partition_states_as_controller(topic, states, ctx.epoch_zk_version)
            except PartitionStateExistsError:
                versions = {}
                for p in states:  # written meanwhile (by a previous controller): take what is there
                    self._reread((topic, p))
            except UnknownTopicOrPartitionError:
                continue  # deleted meanwhile; the topic watch tells us
            for p, state in sorted(states.items()):
                tp = (topic, p)
                if p in versions:
                    ctx.leaderships[tp] = PartitionLeadership(ctx.replicas(tp), state, versions[p])
                leadership = ctx.leaderships.get(tp)
                if leadership is None:
                    continue
                ctx.move_partition(tp, _P.ONLINE if leadership.state.leader in ctx.live_brokers else _P.OFFLINE)
                batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r in ctx.live_brokers], tp,
                                         is_new=True)

    def _elect(self, tps: list[TopicPartition], strategy: Strategy, batch: RequestBatch) -> list[TopicPartition]:
        """Elect with ``strategy``, bump the leader epoch, write conditionally, and tell the live
        replicas. Returns the partitions for which no leader could be elected."""
        ctx = self._require()
        failed = []
        for tp in tps:
            self._reread(tp)  # leaders change ISRs behind our back: decide on ZooKeeper's state
            for _ in range(WRITE_ATTEMPTS_MAX):
                leadership = ctx.leaderships.get(tp)
                election = strategy(tp, leadership) if leadership is not None else None
                if election is None:
                    failed.append(tp)
                    break
                if election.unclean:
                    logger.warning("%s-%d: UNCLEAN election of %d (ISR was %s): committed data may be lost",
                                   tp[0], tp[1], election.leader, list(leadership.state.isr))
                written = self._write_state(tp, leadership, PartitionState(
                    election.leader, leadership.state.leader_epoch + 1, election.isr, ctx.epoch))
                if written is None:
                    continue  # the state changed under us (a leader's ISR write): decide again
                ctx.move_partition(tp, _P.ONLINE)
                batch.add_leader_and_isr([r for r in ctx.replicas(tp) if r in ctx.live_brokers], tp)
                break
            else:
                failed.append(tp)
        if failed:
            logger.info("no leader elected for %s", ", ".join(f"{t}-{p}" for t, p in failed))
        return failed

    def _offline_strategy(self, tp: TopicPartition, leadership: PartitionLeadership) -> Election | None:
        """Offline election; brokers shutting down are chosen only when nothing else can lead."""
        ctx = self._require()
        unclean = ctx.unclean_election_enabled(tp[0], self.settings.unclean_leader_election_enable)
        live = ctx.live_ids()
        return (offline_partition_leader(leadership.replicas, leadership.state.isr,
                                         live - ctx.shutting_down, unclean_enabled=False)
                or offline_partition_leader(leadership.replicas, leadership.state.isr, live, unclean))

    def _controlled_shutdown_strategy(self, tp: TopicPartition,
                                      leadership: PartitionLeadership) -> Election | None:
        ctx = self._require()
        return controlled_shutdown_leader(leadership.replicas, leadership.state.isr, ctx.live_ids(),
                                          ctx.shutting_down)

    def _preferred_strategy(self, tp: TopicPartition, leadership: PartitionLeadership) -> Election | None:
        ctx = self._require()
        return preferred_replica_leader(leadership.replicas, leadership.state.isr,
                                        ctx.live_ids() - ctx.shutting_down)

    def _write_state(self, tp: TopicPartition, old: PartitionLeadership,
                     state: PartitionState) -> PartitionLeadership | None:
        """Conditional write; on a version conflict re-read the state and return None."""
        ctx = self._require()
        try:
            version = self._zk.set_partition_state_as_controller(
                tp[0], tp[1], state, old.zk_version, ctx.epoch_zk_version)
        except BadVersionError:
            self._reread(tp)
            return None
        written = PartitionLeadership(old.replicas, state, version)
        ctx.leaderships[tp] = written
        return written

    def _reread(self, tp: TopicPartition) -> None:
        ctx = self._require()
        try:
            state, version = self._zk.get_partition_state(*tp)
        except UnknownTopicOrPartitionError:
            return
        if state.controller_epoch > ctx.epoch:
            raise ControllerMovedError(f"{tp[0]}-{tp[1]} was written by controller epoch "
                                       f"{state.controller_epoch} > ours {ctx.epoch}")
        ctx.leaderships[tp] = PartitionLeadership(ctx.replicas(tp), state, version)
        if state.leader not in ctx.live_brokers and ctx.partition_state(tp) == _P.ONLINE:
            ctx.move_partition(tp, _P.OFFLINE)  # e.g. a broker that restarted uncleanly stepped down

    def _leader(self, tp: TopicPartition) -> int:
        leadership = self._require().leaderships.get(tp)
        return leadership.state.leader if leadership is not None else -1

    def _batch(self) -> RequestBatch:
        ctx = self._require()
        return RequestBatch(self.broker_id, ctx.epoch, ctx.live_brokers, ctx.leaderships)

    def _require(self) -> ControllerContext:
        assert self.ctx is not None, "controller events are only processed while active"
        return self.ctx
