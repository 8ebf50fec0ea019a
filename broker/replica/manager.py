"""``ReplicaManager``: the partitions this broker holds, their roles, and their follower fetchers.

It owns the ``Partition`` objects and the purgatory they wake. Partition states arrive two ways,
both applied through ``Partition.update_state``, which keeps only a newer state (higher leader
epoch, or the same epoch at a higher znode version), so the order of arrival never matters:

- ``become_leader_or_follower`` (LeaderAndIsr, Kafka's ``becomeLeaderOrFollower``), fenced by
  the controller epoch: a request from an older controller than one already heard from gets
  STALE_CONTROLLER_EPOCH; a partition state that is not newer gets STALE_CONTROLLER_EPOCH too
  (Kafka answers the same);
- ``apply(topics)``, the broker's ZooKeeper view (at start-up and when topics appear). It also
  removes partitions of topics that disappeared after it had seen them, or that no longer list
  this broker (Kafka's StopReplica with delete; ``stop_replicas`` does the same on request).
  From this view a broker follows but never *leads* (``may_lead=False``): leadership comes only
  from the controller, fenced by this incarnation's broker epoch. A broker restarting before the
  controller handled its death would otherwise read "leader = me" from ZooKeeper and lead at its
  previous incarnation's epoch again, with whatever its log kept (after a power loss, less than
  what was committed: same-epoch divergence, which truncation by epoch cannot see).

Leadership listeners (``add_leadership_listener``) hear every change of this broker's leadership
of a partition, as ``(topic, partition, is_leader, leader_epoch)``: a partition that becomes led
here, one that stops being led here (a new leader, or removed from this broker), and a new epoch
of a leadership kept. The group coordinator loads and unloads its ``__consumer_offsets``
partitions from them (Kafka's ``onLeadershipChange`` callback of ``becomeLeaderOrFollower``).
They are called synchronously, after the partition's state changed; they must not raise.

Becoming a follower registers the partition with the follower fetchers (``FollowerFetchers``,
injected: the asyncio ``broker.server.replica_fetcher`` in a broker, the simulator's own in
``broker.sim``), which truncate by leader epoch and then fetch; becoming leader removes it.

ISR changes proposed by leaders (``Partition.record_follower_fetch``, ``maybe_shrink_isr``) go to
the injected ``isr_writer``, which writes them to ZooKeeper and reports back through
``complete_isr_change``. Without a writer (unit tests, a single broker) a proposal is applied at
once.

High watermarks are checkpointed to ``replication-offset-checkpoint`` in each log directory
(Kafka's file and format, ``broker.log.checkpoint``) with the other checkpoints and at close;
opening a partition starts from the checkpointed value (at most the log end offset).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Mapping, NamedTuple, Protocol, Sequence

from broker.cluster.layout import PartitionState
from broker.log import CheckpointError, LogError, read_checkpoint, write_checkpoint
from broker.records import BatchLimits
from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.partition import REPLICA_LAG_TIME_MAX_MS, IsrChange, Partition
from broker.log.txn_index import TransactionIndex
from broker.replica.producer_recovery import load_producer_state
from broker.replica.producer_state import ProducerStateManager
from broker.replica.purgatory import Purgatory
from broker.wire import ErrorCode

__all__ = ["ReplicaManager", "ReplicaSettings", "TopicView", "PartitionView", "FetchTarget",
           "FollowerFetchers", "REPLICATION_OFFSET_CHECKPOINT"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


@dataclass(frozen=True)
class ReplicaSettings:
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    producer_state_entries_max: int = 100_000  # producer.state.entries.max (per partition)
    min_insync_replicas: int = 1  # min.insync.replicas (broker default)
    limits: BatchLimits = BatchLimits()
    replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS  # replica.lag.time.max.ms


class PartitionView(NamedTuple):
    replicas: tuple[int, ...]
    state: PartitionState | None  # None until the controller wrote the state znode
    zk_version: int


class TopicView(NamedTuple):
    """What the replica manager needs of one topic in the cluster metadata."""

    partitions: Mapping[int, PartitionView]
    config: Mapping[str, str]


class FetchTarget(NamedTuple):
    leader_id: int
    leader_epoch: int


LeadershipListener = Callable[[str, int, bool, int], None]


class FollowerFetchers(Protocol):
    def add_partitions(self, targets: Mapping[TopicPartition, FetchTarget]) -> None: ...
    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None: ...


class _NoFetchers:
    def add_partitions(self, targets: Mapping[TopicPartition, FetchTarget]) -> None:
        pass

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        pass


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager,
        purgatory: Purgatory,
        now_ms: Callable[[], int],
        settings: ReplicaSettings,
        fetchers: FollowerFetchers | None = None,
        isr_writer: Callable[[IsrChange], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.purgatory = purgatory
        self._now_ms = now_ms
        self.settings = settings
        self.fetchers: FollowerFetchers = fetchers if fetchers is not None else _NoFetchers()
        self.isr_writer = isr_writer
        self.controller_epoch = -1
        self._partitions: dict[TopicPartition, Partition] = {}
        self._configs: dict[TopicPartition, dict[str, str]] = {}
        self._known_topics: set[str] = set()
        self._checkpointed_hw = self._read_high_watermarks()
        self._leadership_listeners: list[LeadershipListener] = []

    def add_leadership_listener(self, listener: "LeadershipListener") -> None:
        """``listener(topic, partition, is_leader, leader_epoch)`` on every change of this
        broker's leadership of a partition (see the module doc)."""
        self._leadership_listeners.append(listener)

    def _leadership_changed(self, key: TopicPartition, was_leader: bool, is_leader: bool,
                            leader_epoch: int) -> None:
        if not (was_leader or is_leader):
            return
        for listener in self._leadership_listeners:
            listener(key[0], key[1], is_leader, leader_epoch)

    # ----------------------------------------------------------------------------- lookup

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    # ------------------------------------------------------------------- controller requests

    def become_leader_or_follower(
        self, controller_epoch: int,
        states: Iterable[tuple[TopicPartition, Sequence[int], PartitionState, int]],
        configs: Mapping[str, Mapping[str, str]],
    ) -> tuple[int, dict[TopicPartition, int]]:
        """LeaderAndIsr: (request error, error per partition). ``configs`` holds the topic
        overrides this broker knows (a log opened before its topic's config is known starts
        with the broker defaults and picks the overrides up from the next ``apply``)."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, int] = {}
        for tp, replicas, state, zk_version in states:
            replicas = tuple(replicas)
            if self.broker_id not in replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            partition = self._partitions.get(tp)
            if partition is None:
                partition = self._open(tp[0], tp[1], configs.get(tp[0], {}))
            if partition is None:
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            applied = self._apply_state(partition, replicas, state, zk_version)
            errors[tp] = ErrorCode.NONE if applied else ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.NONE, errors

    def stop_replicas(self, controller_epoch: int,
                      partitions: Iterable[tuple[TopicPartition, bool]]) -> tuple[int, dict[TopicPartition, int]]:
        """StopReplica: stop fetching, and with ``delete`` remove the partition and its log."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, int] = {}
        for tp, delete in partitions:
            self.fetchers.remove_partitions([tp])
            if delete and tp in self._partitions:
                self._remove(tp)
            errors[tp] = ErrorCode.NONE
        return ErrorCode.NONE, errors

    # -------------------------------------------------------------------------- metadata

    def apply(self, topics: Mapping[str, TopicView], may_lead: bool = True) -> None:
        """Make the local partitions match ``topics`` (the whole cluster's, not a delta). With
        ``may_lead=False`` (a broker's ZooKeeper view) a state naming this broker leader opens
        the partition but is not applied: the controller's LeaderAndIsr will say so."""
        assigned: set[TopicPartition] = set()
        for topic, view in topics.items():
            for index, partition_view in view.partitions.items():
                if self.broker_id not in partition_view.replicas:
                    continue
                assigned.add((topic, index))
                if partition_view.state is not None:  # no state yet: wait for the controller
                    self._apply_partition(topic, index, partition_view, view.config, may_lead)
        doomed = [key for key in self._partitions
                  if key not in assigned and (key[0] in self._known_topics or key[0] in topics)]
        for key in doomed:
            self._remove(key)
        self._known_topics = set(topics)

    def update_min_insync_replicas(self, default: int) -> None:
        """A new broker-wide ``min.insync.replicas`` (dynamic config): partitions whose topic
        does not set its own take it at once."""
        self.settings = replace(self.settings, min_insync_replicas=default)
        for key, partition in self._partitions.items():
            partition.min_insync_replicas = _min_insync(self._configs.get(key, {}), default)

    def _apply_partition(self, topic: str, index: int, view: PartitionView,
                         config: Mapping[str, str], may_lead: bool) -> None:
        partition = self._partitions.get((topic, index))
        if partition is None:
            partition = self._open(topic, index, config)
            if partition is None:
                return
        elif self._configs.get((topic, index)) != dict(config):
            self._configs[(topic, index)] = dict(config)
            self._log_for(topic, index, config)  # applies changed overrides to the open log
        partition.min_insync_replicas = _min_insync(config, self.settings.min_insync_replicas)
        if may_lead or view.state.leader != self.broker_id:
            self._apply_state(partition, view.replicas, view.state, view.zk_version)

    def _apply_state(self, partition: Partition, replicas: Sequence[int], state: PartitionState,
                     zk_version: int) -> bool:
        old = (partition.leader_id, partition.leader_epoch)
        was_leader = partition.is_leader
        if not partition.update_state(tuple(replicas), state, zk_version):
            return False
        if (state.leader, state.leader_epoch) == old:
            return True  # an ISR change only
        key = partition.key
        if partition.is_leader or state.leader < 0:
            self.fetchers.remove_partitions([key])
        else:
            self.fetchers.add_partitions({key: FetchTarget(state.leader, state.leader_epoch)})
        logger.info("%s-%d: leader %d, epoch %d, isr %s", *key, partition.leader_id,
                    partition.leader_epoch, list(partition.isr))
        self.purgatory.notify(key)  # waiting requests re-check their leader
        self._leadership_changed(key, was_leader, partition.is_leader, partition.leader_epoch)
        return True

    def _open(self, topic: str, index: int, config: Mapping[str, str]) -> Partition | None:
        try:
            log = self._log_for(topic, index, config)
            state = ProducerStateManager(self.settings.producer_id_expiration_ms,
                                         self.settings.producer_state_entries_max)
            txn_index = TransactionIndex(log.directory)
            replayed = load_producer_state(log, state, self._now_ms(), txn_index)
            epochs = _leader_epochs(log)
        except LogError as exc:
            logger.error("cannot open %s-%d: %s", topic, index, exc)
            return None
        logger.info("%s-%d: opened at offsets [%d, %d), %d producers (%d batches replayed)",
                    topic, index, log.log_start_offset, log.log_end_offset, len(state), replayed)
        partition = Partition(topic, index, log, self.broker_id, state, epochs, self._now_ms,
                              self.purgatory.notify, self.settings.replica_lag_time_max_ms,
                              self._checkpointed_hw.get((topic, index)), txn_index=txn_index)
        partition.min_insync_replicas = _min_insync(config, self.settings.min_insync_replicas)
        self._partitions[(topic, index)] = partition
        self._configs[(topic, index)] = dict(config)
        return partition

    def _log_for(self, topic: str, index: int, config: Mapping[str, str]):
        try:
            return self.log_manager.get_or_create(topic, index, dict(config))
        except ValueError as exc:  # overrides written by another tool that we cannot use
            logger.error("topic %s: ignoring its config overrides: %s", topic, exc)
            return self.log_manager.get_or_create(topic, index, {})

    def _remove(self, key: TopicPartition) -> None:
        """The topic was deleted, or this broker left the partition's replicas: stop serving
        it and delete its log (Kafka ``StopReplica`` with ``deletePartition``)."""
        partition = self._partitions.pop(key)
        self._configs.pop(key, None)
        was_leader = partition.is_leader
        partition.stop_leading()
        self.fetchers.remove_partitions([key])
        logger.info("%s-%d: no longer a replica here; deleting its log", *key)
        try:
            self.log_manager.delete(*key)
        except LogError as exc:
            logger.error("deleting %s-%d failed: %s", *key, exc)
        self.purgatory.notify(partition.key)
        self._leadership_changed(key, was_leader, False, partition.leader_epoch)

    def delete_stray_logs(self, existing_topics: Sequence[str] | set[str]) -> list[TopicPartition]:
        """At start-up: delete local logs of topics the cluster no longer has (deleted while
        this broker was down; Kafka's controller does this with StopReplica)."""
        doomed = [tp for tp in self.log_manager.all_logs() if tp[0] not in existing_topics]
        for topic, index in doomed:
            if (topic, index) not in self._partitions:
                logger.info("deleting log of %s-%d: the topic no longer exists", topic, index)
                self.log_manager.delete(topic, index)
        return doomed

    # ------------------------------------------------------------------------- ISR changes

    def submit_isr_change(self, change: IsrChange | None) -> None:
        if change is None:
            return
        if self.isr_writer is None:  # no ZooKeeper: the proposal is the decision
            self.complete_isr_change(change, change.expected_version + 1)
        else:
            self.isr_writer(change)

    def complete_isr_change(self, change: IsrChange, new_version: int | None) -> None:
        partition = self._partitions.get((change.topic, change.partition))
        if partition is not None:
            partition.complete_isr_change(change, new_version)

    def refresh_leader_state(self, tp: TopicPartition, state: PartitionState, version: int) -> bool:
        """After a lost ISR write: ZooKeeper's state, if this broker still leads at the same
        epoch there (an ISR-only change by someone else), becomes the partition's base; any other
        change is the controller's to announce. True when applied."""
        partition = self._partitions.get(tp)
        if (partition is None or not partition.is_leader or state.leader != self.broker_id
                or state.leader_epoch != partition.leader_epoch):
            return False
        return self._apply_state(partition, partition.replicas, state, version)

    def maybe_shrink_isr(self) -> int:
        """The periodic ISR check (Kafka every replica.lag.time.max.ms / 2); proposals made."""
        now = self._now_ms()
        proposed = 0
        for partition in list(self._partitions.values()):
            change = partition.maybe_shrink_isr(now)
            if change is not None:
                proposed += 1
                self.submit_isr_change(change)
        return proposed

    # ---------------------------------------------------------------------- periodic jobs

    def checkpoint(self) -> None:
        """Producer-state snapshots of changed partitions, then the offset checkpoints."""
        self._snapshot_producer_states()
        self.checkpoint_high_watermarks()
        self.log_manager.checkpoint()

    def checkpoint_high_watermarks(self) -> None:
        by_dir: dict[Path, dict[TopicPartition, int]] = {}
        for key, partition in self._partitions.items():
            log_dir = self.log_manager.log_dir_of(*key)
            if log_dir is not None:
                by_dir.setdefault(log_dir, {})[key] = partition.high_watermark
        offline = self.log_manager.offline_log_dirs
        for log_dir in self.log_manager.log_dirs:
            if log_dir in offline:
                continue
            try:
                write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, by_dir.get(log_dir, {}))
            except OSError as exc:
                logger.error("writing %s failed: %s", log_dir / REPLICATION_OFFSET_CHECKPOINT, exc)

    def _read_high_watermarks(self) -> dict[TopicPartition, int]:
        found: dict[TopicPartition, int] = {}
        for log_dir in getattr(self.log_manager, "log_dirs", []):
            try:
                found.update(read_checkpoint(Path(log_dir) / REPLICATION_OFFSET_CHECKPOINT))
            except (CheckpointError, OSError) as exc:
                logger.warning("ignoring %s: %s", Path(log_dir) / REPLICATION_OFFSET_CHECKPOINT, exc)
        return found

    def flush_due(self) -> int:
        return self.log_manager.flush_due()

    def run_retention(self) -> int:
        deleted = self.log_manager.run_retention()
        if deleted:
            for partition in self._partitions.values():
                partition.on_log_start_offset_moved()
        return deleted

    def expire_producers(self) -> int:
        now = self._now_ms()
        return sum(p.producer_state.expire(now) for p in self._partitions.values())

    def close(self) -> None:
        """Snapshot every producer state at its log end and checkpoint the high watermarks,
        then close the logs cleanly (the log manager writes the clean-shutdown marker last)."""
        self.purgatory.close()
        self.fetchers.remove_partitions(list(self._partitions))
        self._snapshot_producer_states()
        self.checkpoint_high_watermarks()
        self._partitions.clear()
        self.log_manager.close()

    def _snapshot_producer_states(self) -> None:
        for partition in self._partitions.values():
            try:
                partition.snapshot_producer_state()
            except OSError as exc:
                logger.error("%s-%d: producer snapshot failed: %s", *partition.key, exc)


def _leader_epochs(log) -> LeaderEpochCache:
    """The log's epoch cache: from its ``leader-epoch-checkpoint`` file, or, for a log without a
    directory (``broker.sim``'s in-memory log), the cache that log keeps itself."""
    if log.directory is not None:
        return LeaderEpochCache.load(log.directory, log.log_end_offset)
    cache = getattr(log, "leader_epochs", None)
    return cache if cache is not None else LeaderEpochCache(None)


def _min_insync(config: Mapping[str, str], default: int) -> int:
    raw = config.get("min.insync.replicas")
    try:
        return max(1, int(raw)) if raw is not None else default
    except ValueError:
        return default
