"""A stand-in for the controller until the controller issue: election, topic creation, deletion.

What it does, in Kafka 2.x's ZooKeeper layout, so the real controller can replace it without
changing the broker around it:

- Election: the first broker to create ``/controller`` (with the ``/controller_epoch`` bump in
  the same multi) is the controller. Brokers retry whenever ``/brokers/ids`` changes: the
  controller's ephemeral ``/controller`` and ``/brokers/ids/N`` belong to one session and vanish
  together, so a broker-set change is when an election can be due.
- New partitions: for every partition without a state znode (topics created by CreateTopics,
  by Metadata auto-creation on any broker, or by Kafka's own tools) it writes
  ``leader = first live replica, leader_epoch = 0, isr = live replicas`` (Kafka's
  ``PartitionStateMachine`` NewPartition -> OnlinePartition).
- Deletion: mark ``/admin/delete_topics/T``, then delete the topic's znodes; every broker (this
  one included) deletes its local logs when the topic disappears from its ZooKeeper watch.
  Deletions a previous controller left half-done are finished at election.

It does not move leaders when brokers die or send LeaderAndIsr requests: that is the
controller issue's job. ZooKeeper I/O runs in worker threads; operating failures come back as
``(error_code, message)``.
"""

from __future__ import annotations

import asyncio
import logging
from random import Random
from typing import Callable, Mapping, Sequence

from kazoo.exceptions import KazooException

from broker.cluster.errors import (
    ClusterError,
    PartitionStateExistsError,
    UnknownTopicOrPartitionError,
)
from broker.cluster.layout import PartitionState
from broker.cluster.zk import KafkaZkClient
from broker.server.metadata import ClusterSnapshot
from broker.wire import ErrorCode

__all__ = ["StandInController", "OpResult"]

logger = logging.getLogger(__name__)

OpResult = tuple[int, str | None]  # (error code, message)
_OK: OpResult = (ErrorCode.NONE, None)


class StandInController:
    def __init__(self, zk: KafkaZkClient, broker_id: int, now_ms: Callable[[], int], rng: Random,
                 request_refresh: Callable[..., None]) -> None:
        self._zk = zk
        self.broker_id = broker_id
        self._now_ms = now_ms
        self.rng = rng
        self._request_refresh = request_refresh
        self.active = False
        self.epoch = -1
        self._lock = asyncio.Lock()  # one ZooKeeper change sequence at a time

    # ---------------------------------------------------------------------- cluster events

    async def on_metadata(self, snapshot: ClusterSnapshot) -> None:
        """Called after every metadata refresh."""
        if self.active and snapshot.controller_id not in (-1, self.broker_id):
            logger.warning("broker %d is controller now; resigning", snapshot.controller_id)
            self.active = False
        if not self.active and snapshot.controller_id == -1:
            await self._try_elect()
        if self.active:
            await self._create_missing_states(snapshot)

    async def _try_elect(self) -> None:
        try:
            epoch = await asyncio.to_thread(
                self._zk.register_controller_and_increment_epoch, self.broker_id, self._now_ms())
        except (ClusterError, KazooException) as exc:
            logger.warning("controller election failed: %s", exc)
            return
        finally:
            self._request_refresh(controller=True)
        if epoch is None:
            return
        self.active, self.epoch = True, epoch
        logger.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        await self._finish_deletions()

    async def _create_missing_states(self, snapshot: ClusterSnapshot) -> None:
        for topic in snapshot.topics.values():
            states = {}
            for index, view in topic.partitions.items():
                live = tuple(r for r in view.replicas if r in snapshot.brokers)
                if view.state is None and live:
                    states[index] = PartitionState(live[0], 0, live, self.epoch)
            if states:
                await self._write_states(topic.name, states)

    async def _write_states(self, topic: str, states: Mapping[int, PartitionState]) -> OpResult:
        try:
            await asyncio.to_thread(self._zk.create_partition_states, topic, states)
        except (PartitionStateExistsError, UnknownTopicOrPartitionError):
            pass  # written meanwhile, or the topic went away: the refresh below sees which
        except (ClusterError, KazooException) as exc:
            logger.warning("writing partition states of %s failed: %s", topic, exc)
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"writing partition states failed: {exc}"
        finally:
            self._request_refresh(topics={topic})
        return _OK

    async def _finish_deletions(self) -> None:
        try:
            marked = await asyncio.to_thread(self._zk.get_topics_marked_for_deletion)
        except (ClusterError, KazooException) as exc:
            logger.warning("reading topics marked for deletion failed: %s", exc)
            return
        for name in marked:
            logger.info("finishing the deletion of topic %s", name)
            await self._delete_znodes(name)

    # -------------------------------------------------------------------------- requests

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                           config: Mapping[str, str]) -> OpResult:
        """Write the topic; as the controller also its partition states (leader = first
        replica, ISR = all replicas: a new topic's replicas are all empty, hence in sync)."""
        async with self._lock:
            try:
                await asyncio.to_thread(self._zk.create_topic, name, assignment, dict(config))
            except ClusterError as exc:
                return exc.kafka_error_code, str(exc)
            except KazooException as exc:
                return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc!r}"
            if not self.active:
                self._request_refresh(topics={name})
                return _OK
            states = {p: PartitionState(r[0], 0, tuple(r), self.epoch) for p, r in assignment.items()}
            return await self._write_states(name, states)

    async def delete_topic(self, name: str) -> OpResult:
        async with self._lock:
            try:
                await asyncio.to_thread(self._zk.mark_topic_for_deletion, name)
            except ClusterError as exc:
                return exc.kafka_error_code, str(exc)
            except KazooException as exc:
                return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc!r}"
            return await self._delete_znodes(name)

    async def _delete_znodes(self, name: str) -> OpResult:
        try:
            await asyncio.to_thread(self._zk.delete_topic_znodes, name)
        except (ClusterError, KazooException) as exc:
            logger.warning("deleting the znodes of %s failed: %s", name, exc)
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"deleting {name} failed: {exc}"
        finally:
            self._request_refresh(topics={name})
        return _OK
