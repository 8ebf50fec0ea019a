"""``ControllerChannelManager``: one ordered queue and one sender task per broker, for the
controller's requests (Kafka's ``ControllerChannelManager`` / ``RequestSendThread``).

Requests to one broker leave in the order the controller produced them (a LeaderAndIsr before
the UpdateMetadata that points clients at the new leader), one at a time, each waiting for its
answer; a connection failure keeps the request at the head of the queue and retries after
``backoff_ms`` for as long as the broker is live. When a controller event reports the live
brokers, queues of brokers no longer live are dropped (a restarted broker gets everything anew
from the controller's startup handling); on resignation every queue is dropped. Each queue holds
at most ``queue_max`` requests: beyond that the oldest are dropped with an error log, which only
costs time, since a broker is sent its full state again when it restarts or a controller fails
over.

Answers are logged, not acted on: Kafka's controller also only logs LeaderAndIsr and StopReplica
errors (a broker that refuses a state has a newer one).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Mapping

from broker.cluster.layout import BrokerRegistration
from broker.controller.requests import Send
from broker.server.controller_requests import to_wire
from broker.server.inter_broker import InterBrokerConnection, InterBrokerError
from broker.wire import ErrorCode

__all__ = ["ControllerChannelManager"]

logger = logging.getLogger(__name__)


class ControllerChannelManager:
    def __init__(self, broker_id: int, listener_name: str, timeout_s: float, backoff_ms: int = 100,
                 queue_max: int = 10_000) -> None:
        self._broker_id = broker_id
        self._listener = listener_name
        self._timeout_s = timeout_s
        self._backoff_s = backoff_ms / 1000
        self._queue_max = queue_max
        self._queues: dict[int, deque] = {}
        self._endpoints: dict[int, BrokerRegistration] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._running: set[int] = set()
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def send(self, sends: list[Send], live: Mapping[int, BrokerRegistration]) -> None:
        self._endpoints = dict(live)
        for broker in [b for b in self._queues if b not in live]:
            del self._queues[broker]
            self._wake(broker)
        for send in sends:
            if send.broker_id not in live:
                continue
            queue = self._queues.setdefault(send.broker_id, deque())
            if len(queue) >= self._queue_max:
                dropped = queue.popleft()
                logger.error("controller queue to broker %d is full; dropping %s", send.broker_id,
                             type(dropped).__name__)
            queue.append(send.request)
            self._wake(send.broker_id)
        self._update_idle()
        self._changed.set()

    def clear(self) -> None:
        for broker in list(self._queues):
            del self._queues[broker]
            self._wake(broker)
        self._update_idle()

    def drop(self, broker: int) -> None:
        """Forget what is queued for ``broker`` (this broker itself once it stopped listening)."""
        if self._queues.pop(broker, None) is not None:
            self._wake(broker)
        self._update_idle()

    def pending(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def statistics(self) -> dict:
        return {"queued": {b: len(q) for b, q in sorted(self._queues.items())},
                "queue_max": self._queue_max, "senders": len(self._running)}

    async def drain(self, timeout_s: float) -> bool:
        """Wait until every queue is empty (a stopping controller lets its last requests out)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False

    def _update_idle(self) -> None:
        if any(self._queues.values()):
            self._idle.clear()
        else:
            self._idle.set()

    def _wake(self, broker: int) -> None:
        event = self._wakeups.get(broker)
        if event is not None:
            event.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            while True:
                for broker, queue in list(self._queues.items()):
                    if queue and broker not in self._running:
                        self._running.add(broker)
                        group.create_task(self._sender(broker), name=f"controller-to-{broker}")
                await self._changed.wait()
                self._changed.clear()

    async def _sender(self, broker: int) -> None:
        connection: InterBrokerConnection | None = None
        wakeup = self._wakeups.setdefault(broker, asyncio.Event())
        try:
            while self._queues.get(broker):
                queue = self._queues[broker]
                request = queue[0]
                registration = self._endpoints.get(broker)
                endpoint = next((e for e in registration.endpoints if e.listener_name == self._listener),
                                None) if registration is not None else None
                if endpoint is None:
                    logger.warning("no %s endpoint for broker %d; dropping its queue", self._listener, broker)
                    self._queues.pop(broker, None)
                    break
                if connection is not None and connection.address != f"{endpoint.host}:{endpoint.port}":
                    await connection.close()
                    connection = None
                if connection is None:
                    connection = InterBrokerConnection(endpoint.host, endpoint.port,
                                                       f"controller-{self._broker_id}", self._timeout_s)
                api_key, version, body = to_wire(request, self._listener)
                try:
                    response = await connection.request(api_key, version, body)
                except InterBrokerError as exc:
                    logger.info("controller request %s to broker %d failed: %s; retrying",
                                type(request).__name__, broker, exc)
                    wakeup.clear()
                    try:
                        async with asyncio.timeout(self._backoff_s):
                            await wakeup.wait()
                    except TimeoutError:
                        pass
                    continue
                if self._queues.get(broker) is queue and queue and queue[0] is request:
                    queue.popleft()
                _log_errors(broker, request, response)
                self._update_idle()
        finally:
            self._running.discard(broker)
            if connection is not None:
                await connection.close()
            self._update_idle()
            if self._queues.get(broker):
                self._changed.set()


def _log_errors(broker: int, request, response) -> None:
    error = getattr(response, "error_code", ErrorCode.NONE)
    if error != ErrorCode.NONE:
        logger.warning("broker %d answered %s with error %d", broker, type(request).__name__, error)
        return
    failed = [(e.topic_name, e.partition_index, e.error_code)
              for e in getattr(response, "partition_errors", []) or []
              if e.error_code not in (ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH)]
    if failed:
        logger.warning("broker %d answered %s with partition errors %s", broker,
                       type(request).__name__, failed[:10])
