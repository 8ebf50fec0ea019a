"""``ReplicaManager``: the partitions this broker holds, kept in step with the cluster metadata.

It owns the ``Partition`` objects and the purgatory they wake. ``apply(topics)`` takes the
cluster's view of every topic (assignment, partition states, config) and creates, updates or
deletes the local partitions this broker is a replica of (Kafka's ``becomeLeaderOrFollower`` and
``stopReplicas``, driven for now by the ZooKeeper watch instead of controller requests). Opening a
partition loads its producer state and leader epoch cache. The periodic jobs (producer-state
snapshots with the checkpoints, retention, producer expiry) and the clean close live here too,
so the broker's lifecycle code only schedules them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Sequence

from broker.cluster.layout import PartitionState
from broker.log import LogManager, LogError
from broker.records import BatchLimits
from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.partition import Partition
from broker.replica.producer_recovery import load_producer_state
from broker.replica.producer_state import ProducerStateManager
from broker.replica.purgatory import Purgatory

__all__ = ["ReplicaManager", "ReplicaSettings", "TopicView", "PartitionView"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ReplicaSettings:
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    producer_state_entries_max: int = 100_000  # producer.state.entries.max (per partition)
    min_insync_replicas: int = 1  # min.insync.replicas (broker default)
    limits: BatchLimits = BatchLimits()


class PartitionView(NamedTuple):
    replicas: tuple[int, ...]
    state: PartitionState | None  # None until the controller wrote the state znode
    zk_version: int


class TopicView(NamedTuple):
    """What the replica manager needs of one topic in the cluster metadata."""

    partitions: Mapping[int, PartitionView]
    config: Mapping[str, str]


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        purgatory: Purgatory,
        now_ms: Callable[[], int],
        settings: ReplicaSettings,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.purgatory = purgatory
        self._now_ms = now_ms
        self.settings = settings
        self._partitions: dict[TopicPartition, Partition] = {}

    # ----------------------------------------------------------------------------- lookup

    def get(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    # -------------------------------------------------------------------------- metadata

    def apply(self, topics: Mapping[str, TopicView]) -> None:
        """Make the local partitions match ``topics`` (the whole cluster's, not a delta)."""
        assigned: set[TopicPartition] = set()
        for topic, view in topics.items():
            for index, partition_view in view.partitions.items():
                if self.broker_id not in partition_view.replicas:
                    continue
                assigned.add((topic, index))
                if partition_view.state is not None:  # no state yet: wait for the controller
                    self._apply_partition(topic, index, partition_view, view.config)
        for key in [key for key in self._partitions if key not in assigned]:
            self._remove(key)

    def _apply_partition(self, topic: str, index: int, view: PartitionView,
                         config: Mapping[str, str]) -> None:
        partition = self._partitions.get((topic, index))
        if partition is None:
            partition = self._open(topic, index, config)
            if partition is None:
                return
        was_leader, old_epoch = partition.is_leader, partition.leader_epoch
        partition.min_insync_replicas = _min_insync(config, self.settings.min_insync_replicas)
        partition.update_state(view.replicas, view.state, view.zk_version)
        if (was_leader, old_epoch) != (partition.is_leader, partition.leader_epoch):
            logger.info("%s-%d: leader %d, epoch %d, isr %s", topic, index, partition.leader_id,
                        partition.leader_epoch, list(partition.isr))
            self.purgatory.notify(partition.key)  # waiting requests re-check their leader

    def _open(self, topic: str, index: int, config: Mapping[str, str]) -> Partition | None:
        try:
            log = self._log_for(topic, index, config)
            state = ProducerStateManager(self.settings.producer_id_expiration_ms,
                                         self.settings.producer_state_entries_max)
            replayed = load_producer_state(log, state, self._now_ms())
            epochs = LeaderEpochCache.load(log.directory, log.log_end_offset)
        except LogError as exc:
            logger.error("cannot open %s-%d: %s", topic, index, exc)
            return None
        logger.info("%s-%d: opened at offsets [%d, %d), %d producers (%d batches replayed)",
                    topic, index, log.log_start_offset, log.log_end_offset, len(state), replayed)
        partition = Partition(topic, index, log, self.broker_id, state, epochs, self._now_ms,
                              self.purgatory.notify)
        self._partitions[(topic, index)] = partition
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
        logger.info("%s-%d: no longer a replica here; deleting its log", *key)
        try:
            self.log_manager.delete(*key)
        except LogError as exc:
            logger.error("deleting %s-%d failed: %s", *key, exc)
        self.purgatory.notify(partition.key)

    def delete_stray_logs(self, existing_topics: Sequence[str] | set[str]) -> list[TopicPartition]:
        """At start-up: delete local logs of topics the cluster no longer has (deleted while
        this broker was down; Kafka's controller does this with StopReplica)."""
        doomed = [tp for tp in self.log_manager.all_logs() if tp[0] not in existing_topics]
        for topic, index in doomed:
            if (topic, index) not in self._partitions:
                logger.info("deleting log of %s-%d: the topic no longer exists", topic, index)
                self.log_manager.delete(topic, index)
        return doomed

    # ---------------------------------------------------------------------- periodic jobs

    def checkpoint(self) -> None:
        """Producer-state snapshots of changed partitions, then the offset checkpoints."""
        self._snapshot_producer_states()
        self.log_manager.checkpoint()

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
        """Snapshot every producer state at its log end, then close the logs cleanly (the
        log manager writes the clean-shutdown marker last)."""
        self.purgatory.close()
        self._snapshot_producer_states()
        self._partitions.clear()
        self.log_manager.close()

    def _snapshot_producer_states(self) -> None:
        for partition in self._partitions.values():
            try:
                partition.snapshot_producer_state()
            except OSError as exc:
                logger.error("%s-%d: producer snapshot failed: %s", *partition.key, exc)


def _min_insync(config: Mapping[str, str], default: int) -> int:
    raw = config.get("min.insync.replicas")
    try:
        return max(1, int(raw)) if raw is not None else default
    except ValueError:
        return default
