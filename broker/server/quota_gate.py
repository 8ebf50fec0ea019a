"""Client quotas on the request path: which requests count, when they run, what they answer.

A Produce counts its request's bytes, a consumer's Fetch its response's (a follower's fetch counts
against no client quota). Over the quota the response carries ``throttle_time_ms`` and the
connection is muted for that long (``network.throttle_connection``); a throttled fetch is answered
empty and its bytes taken back, as Kafka does, so the consumer gets the data after the throttle.
A fetch asks for at most what the quota allows in one window (Kafka's
``getMaxValueInQuotaWindow``), or it could be throttled forever.

Kafka reads one request of a connection at a time, so a request read while the connection is
throttled waits for the throttle. pylog reads up to ``max.inflight.requests.per.connection``
ahead, so the quota-bound requests of a connection pass a FIFO lock and wait out the throttle
before they are counted (in the order they arrived: produce order is kept). Connections without
a quota never touch the lock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Awaitable, Callable

from broker.server.network import connection_state, principal, throttle_connection, throttle_remaining_s
from broker.server.quota import FETCH, PRODUCE, ClientQuotas, sanitize_cached
from broker.wire import ApiKey, encode_response_chunks

__all__ = ["QuotaGate", "gate_for"]

_KEYS = {ApiKey.PRODUCE: PRODUCE, ApiKey.FETCH: FETCH}
_LOCK_KEY = "quota_lock"


@dataclass(slots=True)
class QuotaGate:
    quotas: ClientQuotas
    key: str
    user: str
    client: str

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
            response = await answer()
            return self._account(now_ms(), header, response, frame_bytes)

    def _cap_fetch(self, request) -> None:
        allowed = self.quotas.window_bytes(FETCH, self.user, self.client)
        if allowed is not None and allowed < request.max_bytes:
            request.max_bytes = allowed
            request.min_bytes = min(request.min_bytes, allowed)

    def _account(self, now: int, header, response, frame_bytes: int) -> list | None:
        quotas, key, user, client = self.quotas, self.key, self.user, self.client
        chunks = None
        if key == FETCH:
            chunks = encode_response_chunks(header.api_key, header.api_version, header.correlation_id, response)
            size = sum(len(chunk) for chunk in chunks)
            throttle_ms = quotas.record(key, user, client, size, now)
            if throttle_ms > 0:
                quotas.unrecord(key, user, client, size, now)
                response.responses = []
                chunks = None
        else:
            throttle_ms = quotas.record(key, user, client, frame_bytes, now)
        if throttle_ms > 0:
            throttle_connection(throttle_ms)
            if response is not None:
                response.throttle_time_ms = throttle_ms
        if response is None:
            return None
        return chunks or encode_response_chunks(header.api_key, header.api_version, header.correlation_id, response)


def gate_for(quotas: ClientQuotas | None, header, request) -> QuotaGate | None:
    """The gate of a request a quota applies to; None for every other request (a dict lookup)."""
    if quotas is None or not quotas.active:
        return None
    key = _KEYS.get(header.api_key)
    if key is None or (key == FETCH and request.replica_id >= 0):
        return None
    user = sanitize_cached(principal().partition(":")[2])
    client = sanitize_cached(header.client_id or "")
    if quotas.resolve(key, user, client) is None:
        return None
    return QuotaGate(quotas, key, user, client)
