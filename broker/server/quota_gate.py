"""Client quotas on the request path: which requests count, when they run, what they answer.

A Produce counts its request's bytes, a consumer's Fetch its response's (a follower's fetch counts
against no client quota). Over the quota the response carries ``throttle_time_ms`` and the
connection is muted for that long (``network.throttle_connection``); a throttled fetch is answered
empty and its bytes taken back, as Kafka does, so the consumer gets the data after the throttle.
A fetch asks for at most what the quota allows in one window (Kafka's
``getMaxValueInQuotaWindow``), or it could be throttled forever.

``request_percentage`` (Kafka's request quota, KIP-124) counts the time a request's handler runs
on the broker, for every API but the inter-broker ones Kafka exempts (LeaderAndIsr, StopReplica,
UpdateMetadata, ControlledShutdown, WriteTxnMarkers, a follower's Fetch). Kafka measures the
time a request spends on its request-handler and network threads, in percent of one thread; pylog
serves every request on one event loop, so the measure is the time the handler's coroutine runs
on the loop (``_Timed``: each step between two awaits; waiting in a purgatory or for a lock does
not count), in percent of the loop: ``request_percentage=50`` lets a user or client id have half
of the broker's handler time per quota window. Over it the throttle is Kafka's
``(rate - quota) / quota * window``, bounded by one ``quota.window.size.seconds`` as Kafka bounds
request throttles; a produce or fetch over both quotas is throttled by the larger.

Kafka reads one request of a connection at a time, so a request read while the connection is
throttled waits for the throttle. pylog reads up to ``max.inflight.requests.per.connection``
ahead, so the quota-bound requests of a connection pass a FIFO lock and wait out the throttle
before they are counted (in the order they arrived: produce order is kept). Connections without
a quota never touch the lock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import perf_counter
from typing import Awaitable, Callable

from broker.server.network import connection_state, principal, throttle_connection, throttle_remaining_s
from broker.server.quota import FETCH, PRODUCE, REQUEST, ClientQuotas, sanitize_cached
from broker.wire import ApiKey, encode_response_chunks

__all__ = ["QuotaGate", "gate_for"]

_KEYS = {ApiKey.PRODUCE: PRODUCE, ApiKey.FETCH: FETCH}
_LOCK_KEY = "quota_lock"
# Kafka answers these with sendResponseExemptThrottle: the cluster's own traffic is never throttled
_EXEMPT = frozenset((ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                     ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS))
_PERCENT_PER_SECOND = 100.0  # one second of loop time is 100 percent-seconds (Kafka's NanosToPercentagePerSecond)


@dataclass(slots=True)
class QuotaGate:
    quotas: ClientQuotas
    key: str | None  # the byte-rate quota (PRODUCE or FETCH) that resolves, or None
    user: str
    client: str
    timed: bool  # a request_percentage quota resolves

    async def serve(self, now_ms: Callable[[], int], header, request, frame_bytes: int,
                    answer: Callable[[], Awaitable]) -> list | None:
        state = connection_state()
        lock = state.get(_LOCK_KEY)
        if lock is None:
            lock = state[_LOCK_KEY] = asyncio.Lock()
        async with lock:
            delay_s = throttle_remaining_s()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            if self.key == FETCH:
                self._cap_fetch(request)
            if not self.timed:
                response = await answer()
                return self._account(now_ms(), header, response, frame_bytes, 0.0)
            timed = _Timed(answer())
            response = await timed
            return self._account(now_ms(), header, response, frame_bytes, timed.seconds)

    def _cap_fetch(self, request) -> None:
        allowed = self.quotas.window_bytes(FETCH, self.user, self.client)
        if allowed is not None and allowed < request.max_bytes:
            request.max_bytes = allowed
            request.min_bytes = min(request.min_bytes, allowed)

    def _account(self, now: int, header, response, frame_bytes: int, handler_s: float) -> list | None:
        quotas, key, user, client = self.quotas, self.key, self.user, self.client
        throttle_ms = self._request_throttle_ms(now, handler_s) if self.timed else 0
        chunks = None
        if header.api_key == ApiKey.FETCH and response is not None:
            chunks = encode_response_chunks(header.api_key, header.api_version, header.correlation_id, response)
            size = sum(len(chunk) for chunk in chunks)
            fetch_ms = quotas.record(key, user, client, size, now) if key == FETCH else 0
            if max(fetch_ms, throttle_ms) > 0:  # Kafka: throttled by either quota, sent empty
                if key == FETCH:
                    quotas.unrecord(key, user, client, size, now)
                response.responses = []
                chunks = None
            throttle_ms = max(throttle_ms, fetch_ms)
        elif key == PRODUCE:
            throttle_ms = max(throttle_ms, quotas.record(key, user, client, frame_bytes, now))
        if throttle_ms > 0:
            throttle_connection(throttle_ms)
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle_ms
        if response is None:
            return None
        return chunks or encode_response_chunks(header.api_key, header.api_version, header.correlation_id, response)

    def _request_throttle_ms(self, now: int, handler_s: float) -> int:
        """Kafka's ``ClientRequestQuotaManager``: the handler time in percent-seconds against
        ``request_percentage``; the throttle bounded by one quota window."""
        throttle_ms = self.quotas.record(REQUEST, self.user, self.client, handler_s * _PERCENT_PER_SECOND, now)
        return min(throttle_ms, self.quotas.settings.window_size_ms)


class _Timed:
    """Await a coroutine and add up the time its steps run on the event loop (between two of
    its suspensions): the handler time of one request, without the time it waits."""

    __slots__ = ("_coro", "seconds")

    def __init__(self, coro) -> None:
        self._coro, self.seconds = coro, 0.0

    def __await__(self):
        coro, send, error = self._coro, None, None
        while True:
            started = perf_counter()
            try:
                yielded = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as done:
                self.seconds += perf_counter() - started
                return done.value
            self.seconds += perf_counter() - started
            try:
                send, error = (yield yielded), None
            except BaseException as exc:  # noqa: BLE001 - a cancel goes on into the handler
                send, error = None, exc


def gate_for(quotas: ClientQuotas | None, header, request) -> QuotaGate | None:
    """The gate of a request a quota applies to; None for every other request (dict lookups)."""
    if quotas is None or not quotas.active:
        return None
    api_key = header.api_key
    key = _KEYS.get(api_key)
    if api_key in _EXEMPT or (key == FETCH and request.replica_id >= 0):
        return None
    user = sanitize_cached(principal().partition(":")[2])
    client = sanitize_cached(header.client_id or "")
    if key is not None and quotas.resolve(key, user, client) is None:
        key = None
    timed = quotas.resolve(REQUEST, user, client) is not None
    if key is None and not timed:
        return None
    return QuotaGate(quotas, key, user, client, timed)
