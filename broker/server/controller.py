"""``ControllerService``: the controller of a broker, the asyncio + kazoo shell around the pure
``broker.controller.ControllerCore``.

Every broker runs one. It stands for election at start-up and whenever ``/controller`` goes
away (a watch), by creating ``/controller`` and bumping ``/controller_epoch`` in one ZooKeeper
multi; the winner is active until its session is lost, another broker's epoch shows up, or it
stops. ZooKeeper watches (kazoo's thread) only mark work; one consumer task on the event loop
takes the work in priority order (resign, elect, brokers, topics, ISR changes, requests,
rebalance), one event at a time like Kafka's controller thread, and runs the core's handler in
a worker thread (kazoo blocks). The requests the handler returns go to the
``ControllerChannelManager``.

Failures: ``ControllerMovedError`` (a write found a newer controller epoch) resigns. Any other
ZooKeeper error re-initializes the controller from ZooKeeper after ``backoff_ms`` (the context
only mirrors ZooKeeper, so a full re-read is always correct). A session loss resigns at once;
when the session is back, the ``/controller`` watch fires and an election follows if needed.

Handlers reach it through ``BrokerContext.controller``: ``create_topic``/``delete_topic`` (any
broker writes the topic's znodes; on the controller, the answer waits until the partition
states are written), ``controlled_shutdown`` (ControlledShutdown requests, and this broker's own
shutdown). ZooKeeper I/O runs in worker threads; operating failures come back as
``(error_code, message)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from random import Random
from typing import Callable, Mapping, Sequence

from kazoo.exceptions import KazooException

from broker.cluster.errors import ClusterError, ControllerMovedError
from broker.cluster.layout import generate_topic_id
from broker.cluster.zk import KafkaZkClient
from broker.controller import ControllerCore, ControllerSettings
from broker.controller.core import ElectionOutcome, ShutdownResult
from broker.server.partition_plan import PartitionPlanError, plan_new_partitions
from broker.server.controller_channel import ControllerChannelManager
from broker.server.metadata import ClusterSnapshot
from broker.wire import ErrorCode

__all__ = ["ControllerService", "OpResult"]

logger = logging.getLogger(__name__)

OpResult = tuple[int, str | None]  # (error code, message)
_OK: OpResult = (ErrorCode.NONE, None)
# Coalescing events, in the order they are taken.
_EVENTS = ("resign", "elect", "reinit", "brokers", "topics", "isr")


class ControllerService:
    def __init__(self, zk: KafkaZkClient, broker_id: int, settings: ControllerSettings,
                 now_ms: Callable[[], int], rng: Random, request_refresh: Callable[..., None],
                 listener_name: str = "PLAINTEXT", socket_timeout_ms: int = 30_000,
                 rebalance_interval_ms: int = 300_000, backoff_ms: int = 500) -> None:
        self._zk = zk
        self.broker_id = broker_id
        self.core = ControllerCore(broker_id, zk, settings)
        self._now_ms = now_ms
        self.rng = rng
        self._request_refresh = request_refresh
        self._rebalance_interval_ms = rebalance_interval_ms
        self._backoff_s = backoff_ms / 1000
        self.channels = ControllerChannelManager(broker_id, listener_name, socket_timeout_ms / 1000)
        self._pending: set[str] = set()
        self._calls: deque = deque()
        self._wakeup = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()  # topic creation / deletion ZooKeeper sequences
        self._closed = False
        self._retry_handle: asyncio.TimerHandle | None = None

    @property
    def active(self) -> bool:
        return self.core.active

    @property
    def epoch(self) -> int:
        return self.core.epoch

    def statistics(self) -> dict:
        return {"active": self.core.active, "epoch": self.core.epoch,
                "pending_events": sorted(self._pending), "pending_calls": len(self._calls),
                "channels": self.channels.statistics()}

    # ------------------------------------------------------------------ watches (kazoo)

    def start_watches(self, loop: asyncio.AbstractEventLoop) -> None:
        """Blocking: register the ZooKeeper watches (each fires once at once)."""
        self._loop = loop
        self._zk.watch_controller(lambda cid: self._from_kazoo(self._controller_changed, cid))
        self._zk.watch_broker_ids(lambda ids: self._from_kazoo(self._mark, "brokers"))
        self._zk.watch_topics(lambda names: self._from_kazoo(self._mark, "topics"))
        self._zk.watch_isr_change_notifications(
            lambda names: self._from_kazoo(self._mark, "isr") if names else None)
        self._zk.add_state_listener(lambda state: self._from_kazoo(self._session_state, state))

    def _from_kazoo(self, callback, *args) -> bool | None:
        if self._closed or self._loop is None:
            return False
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed
            return False
        return None

    def _controller_changed(self, controller_id: int) -> None:
        self._request_refresh(controller=True)
        if controller_id == -1:
            self._mark("elect")
        elif controller_id != self.broker_id and self.core.active:
            self._mark("resign")

    def _session_state(self, state: str) -> None:
        if state == "LOST":
            logger.warning("broker %d: ZooKeeper session expired", self.broker_id)
            self._mark("resign")
        elif state == "CONNECTED":
            self._mark("elect")

    def _mark(self, event: str) -> None:
        self._pending.add(event)
        self._wakeup.set()

    # ------------------------------------------------------------------------------ run

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.channels.run(), name="controller-channels")
            group.create_task(self._rebalance_timer(), name="controller-rebalance")
            self._mark("elect")
            while True:
                await self._wakeup.wait()
                self._wakeup.clear()
                while not self._closed and (self._pending or self._calls):
                    await self._process_one()

    async def _process_one(self) -> None:
        for event in _EVENTS:
            if event in self._pending:
                self._pending.discard(event)
                await self._handle(event)
                return
        if self._calls:
            kind, args, future = self._calls.popleft()
            await self._handle_call(kind, args, future)
            return
        if "rebalance" in self._pending:
            self._pending.discard("rebalance")
            if self.core.active:
                await self._core_event(self.core.on_auto_rebalance)

    async def _handle(self, event: str) -> None:
        core = self.core
        if event == "resign":
            self._resign()
        elif event == "elect":
            if not core.active:
                await self._elect()
        elif event == "reinit":
            if core.active:
                await self._core_event(core.on_elected, core.ctx.epoch, core.ctx.epoch_zk_version)
        elif core.active:
            handler = {"brokers": core.on_broker_change, "topics": core.on_topic_change,
                       "isr": core.on_isr_change}[event]
            await self._core_event(handler)

    async def _handle_call(self, kind: str, args: tuple, future: asyncio.Future) -> None:
        if kind == "shutdown":
            result = None
            if self.core.active:
                result = await self._core_event(self.core.on_controlled_shutdown, *args)
            if result is None:
                result = ShutdownResult(ErrorCode.NOT_CONTROLLER, [], [])
            value = (result.error_code, result.remaining)
        elif kind == "reassign":  # AlterPartitionReassignments
            result = await self._core_event(self.core.on_alter_reassignments, *args) if self.core.active else None
            value = result.results if result is not None else None
        elif kind == "elect":  # ElectLeaders
            result = await self._core_event(self.core.on_elect_leaders, *args) if self.core.active else None
            value = result.results if result is not None else None
        elif kind == "partitions":  # CreatePartitions wrote new partitions: elect their leaders
            if self.core.active:
                await self._core_event(self.core.on_partitions_added, *args)
            value = None
        else:  # "topics": a topic was just written; create its partition states now
            if self.core.active:
                await self._core_event(self.core.on_topic_change)
            value = None
        if not future.done():
            future.set_result(value)

    async def _elect(self) -> None:
        try:
            won = await asyncio.to_thread(self._zk.register_controller, self.broker_id, self._now_ms())
            if won is None:
                won = await asyncio.to_thread(self._zk.owned_controller_epoch)
        except (ClusterError, KazooException) as exc:
            logger.warning("controller election failed: %s", exc)
            self._retry_later("elect")
            return
        finally:
            self._request_refresh(controller=True)
        if won is None:
            return
        epoch, version = won
        logger.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        await self._core_event(self.core.on_elected, epoch, version)
        if self.core.active:
            await self._finish_deletions()

    def _resign(self) -> None:
        if self.core.active:
            self.core.on_resigned()
        self.channels.clear()

    async def _core_event(self, handler, *args):
        """Run one core handler in a worker thread and send what it returns; None on failure."""
        try:
            result, live = await asyncio.to_thread(self._call_core, handler, *args)
        except ControllerMovedError as exc:
            logger.warning("broker %d is no longer the controller: %s", self.broker_id, exc)
            self._resign()
            return None
        except (ClusterError, KazooException) as exc:
            logger.warning("controller event %s failed (%s); re-initializing from ZooKeeper",
                           getattr(handler, "__name__", handler), exc)
            self._retry_later("reinit")
            return None
        sends = result.sends if isinstance(result, (ShutdownResult, ElectionOutcome)) else result
        if self.core.active:
            self.channels.send(sends, live)
        return result

    def _call_core(self, handler, *args):
        result = handler(*args)
        ctx = self.core.ctx
        live = {b: reg for b, (reg, _) in ctx.live_brokers.items()} if ctx is not None else {}
        return result, live

    def _retry_later(self, event: str) -> None:
        if self._loop is None or self._closed:
            return
        if self._retry_handle is not None:
            self._retry_handle.cancel()
        self._retry_handle = self._loop.call_later(self._backoff_s, self._mark, event)

    async def _rebalance_timer(self) -> None:
        while True:
            await asyncio.sleep(self._rebalance_interval_ms / 1000)
            self._mark("rebalance")

    # ------------------------------------------------------------------ requests (handlers)

    async def on_metadata(self, snapshot: ClusterSnapshot) -> None:
        """After a metadata refresh: nobody holds ``/controller`` -> stand for it."""
        if not self.core.active and snapshot.controller_id == -1:
            self._mark("elect")

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list]:
        """(error code, partitions the broker still leads)."""
        return await self._call("shutdown", (broker_id, broker_epoch))

    async def _call(self, kind: str, args: tuple):
        future = asyncio.get_running_loop().create_future()
        self._calls.append((kind, args, future))
        self._wakeup.set()
        return await future

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                           config: Mapping[str, str]) -> OpResult:
        """Write the topic's znodes, with a new topic id (Metadata v10+ answers it, as Kafka
        does); on the controller, also its partition states (leader = first live replica, ISR =
        live replicas) before answering."""
        async with self._lock:
            topic_id = generate_topic_id(self.rng)
            try:
                await asyncio.to_thread(self._zk.create_topic, name, assignment, dict(config), topic_id)
            except ClusterError as exc:
                return exc.kafka_error_code, str(exc)
            except KazooException as exc:
                return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc!r}"
        self._request_refresh(topics={name})
        if self.core.active:
            await self._call("topics", ())
            self._request_refresh(topics={name})
        return _OK

    async def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                                validate_only: bool) -> OpResult:
        """CreatePartitions on the controller: plan (``broker.server.partition_plan``), write the
        longer assignment, then give the new partitions leaders before answering."""
        if not self.core.active:
            return ErrorCode.NOT_CONTROLLER, "this broker is not the controller"
        async with self._lock:
            try:
                current = await asyncio.to_thread(self._zk.get_topic_assignment, name)
                brokers = sorted(self.core.ctx.live_ids()) if self.core.ctx is not None else []
                plan = plan_new_partitions(name, current.partitions, count, assignments, brokers, self.rng)
                if validate_only:
                    return _OK
                await asyncio.to_thread(self._zk.add_partitions, name, plan)
            except PartitionPlanError as exc:
                return exc.error_code, exc.message
            except ClusterError as exc:
                return exc.kafka_error_code, str(exc)
            except KazooException as exc:
                return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc!r}"
        await self._call("partitions", (name,))
        self._request_refresh(topics={name})
        return _OK

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None):
        """ElectLeaders on the controller: (topic, partition) -> (error code, message), or None
        when this broker is not (or no longer) the controller."""
        if not self.core.active:
            return None
        results = await self._call("elect", (election_type, partitions))
        touched = {t for t, _ in (results or {})}
        if touched:
            self._request_refresh(topics=touched)
        return results

    async def alter_reassignments(self, wanted: dict) -> dict | None:
        """AlterPartitionReassignments on the controller: tp -> (error code, message); None when
        this broker is not the controller."""
        if not self.core.active:
            return None
        results = await self._call("reassign", (wanted,))
        if results:
            self._request_refresh(topics={t for t, _ in results})
        return results

    def reassignments(self) -> dict | None:
        """tp -> (target, original) in progress; None when not the controller."""
        return dict(self.core.reassignments) if self.core.active else None

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

    async def _finish_deletions(self) -> None:
        """Deletions a previous controller left half-done are finished at election."""
        try:
            marked = await asyncio.to_thread(self._zk.get_topics_marked_for_deletion)
        except (ClusterError, KazooException) as exc:
            logger.warning("reading topics marked for deletion failed: %s", exc)
            return
        for name in marked:
            logger.info("finishing the deletion of topic %s", name)
            async with self._lock:
                await self._delete_znodes(name)

    # ---------------------------------------------------------------------------- stop

    async def stop(self, drain_timeout_s: float) -> None:
        """Let queued requests out (a controller that just moved leaderships away must tell
        the new leaders), then stop reacting to ZooKeeper."""
        self.channels.drop(self.broker_id)  # our listener is closed already
        if self.core.active:
            await self.channels.drain(drain_timeout_s)
        self._closed = True
        if self._retry_handle is not None:
            self._retry_handle.cancel()
