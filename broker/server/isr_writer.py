"""``IsrWriter``: writes the ISR changes leaders propose to ZooKeeper, then tells the controller.

A leader's proposal (``broker.replica.partition.IsrChange``) is written to the partition's state
znode conditionally on the version the leader last saw (``set_partition_state``; Kafka 2.x's
``ReplicationUtils.updateLeaderAndIsr``); the outcome goes back to the partition through
``ReplicaManager.complete_isr_change`` (None when the version moved: the controller wrote
meanwhile, or a broker fenced itself out of the ISR after an unclean restart): the state is then
read back and, if this broker still leads at that epoch, taken as the new base
(``ReplicaManager.refresh_leader_state``), so the next proposal starts from ZooKeeper's version
(otherwise a leader would keep failing on a version it will never see again, Kafka's KAFKA-2729).
Successful changes are announced with one
``/isr_change_notification`` node per batch of writes (Kafka batches them too), so the
controller pushes UpdateMetadata to every broker.

The queue needs no bound of its own: a partition has at most one proposal in flight, so it
never holds more entries than this broker leads partitions.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from kazoo.exceptions import KazooException

from broker.cluster.errors import BadVersionError, ClusterError
from broker.cluster.zk import KafkaZkClient
from broker.replica.partition import IsrChange

__all__ = ["IsrWriter"]

logger = logging.getLogger(__name__)


class IsrWriter:
    def __init__(self, zk: KafkaZkClient, complete: Callable[[IsrChange, int | None], None],
                 refresh: Callable[[tuple[str, int], object, int], None]) -> None:
        self._zk = zk
        self._complete = complete
        self._refresh = refresh
        self._queue: list[IsrChange] = []
        self._wakeup = asyncio.Event()

    def submit(self, change: IsrChange) -> None:
        self._queue.append(change)
        self._wakeup.set()

    async def run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch, self._queue = self._queue, []
            written = []
            for change in batch:
                version = await self._write(change)
                self._complete(change, version)
                if version is not None:
                    written.append((change.topic, change.partition))
            if written:
                try:
                    await asyncio.to_thread(self._zk.propagate_isr_changes, written)
                except (ClusterError, KazooException) as exc:
                    logger.warning("ISR change notification failed: %s", exc)

    async def _write(self, change: IsrChange) -> int | None:
        try:
            return await asyncio.to_thread(self._zk.set_partition_state, change.topic, change.partition,
                                           change.state, change.expected_version)
        except BadVersionError:
            logger.info("%s-%d: ISR update lost to a newer state (version %d moved); re-reading it",
                        change.topic, change.partition, change.expected_version)
            await self._reread(change)
        except (ClusterError, KazooException) as exc:
            logger.warning("%s-%d: ISR update failed: %s", change.topic, change.partition, exc)
        return None

    async def _reread(self, change: IsrChange) -> None:
        try:
            state, version = await asyncio.to_thread(self._zk.get_partition_state, change.topic,
                                                     change.partition)
        except (ClusterError, KazooException) as exc:
            logger.warning("%s-%d: re-reading the state failed: %s", change.topic, change.partition, exc)
            return
        self._refresh((change.topic, change.partition), state, version)
