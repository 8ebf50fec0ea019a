"""The request path of client quotas (broker/server/quota_gate.py): who a request counts for,
and that a connection's later requests wait out a throttle, in order."""

from __future__ import annotations

import asyncio
import contextvars
import time
from types import SimpleNamespace

from broker.server import network
from broker.server.quota import DEFAULT, FETCH, PRODUCE, ClientQuotas, QuotaSettings
from broker.server.quota_gate import gate_for
from broker.wire import ApiKey, ProduceResponse


def _header(api_key: int, client_id: str = "app"):
    return SimpleNamespace(api_key=api_key, api_version=9, correlation_id=1, client_id=client_id)


def test_gate_only_where_a_quota_resolves_for_the_connections_principal():
    contextvars.copy_context().run(_gate_scenario)  # the principal set here stays here


def _gate_scenario():
    quotas = ClientQuotas()
    assert gate_for(quotas, _header(ApiKey.PRODUCE), None) is None  # no quotas at all
    quotas.set_entity("alice", None, {PRODUCE: "1000"})
    network._CONNECTION_STATE.set({"principal": "User:alice"})
    gate = gate_for(quotas, _header(ApiKey.PRODUCE), None)
    assert (gate.user, gate.client, gate.key) == ("alice", "app", PRODUCE)
    assert gate_for(quotas, _header(ApiKey.METADATA), None) is None
    assert gate_for(quotas, _header(ApiKey.FETCH), SimpleNamespace(replica_id=-1)) is None  # no fetch quota
    quotas.set_entity(None, DEFAULT, {FETCH: "1000"})
    assert gate_for(quotas, _header(ApiKey.FETCH), SimpleNamespace(replica_id=2)) is None  # a follower
    network._CONNECTION_STATE.set({"principal": "User:bob"})
    assert gate_for(quotas, _header(ApiKey.PRODUCE), None) is None


def test_a_throttled_connection_waits_and_keeps_its_order():
    async def scenario():
        network._CONNECTION_STATE.set({})
        quotas = ClientQuotas(QuotaSettings(window_num=2, window_size_ms=1000))
        quotas.set_entity(None, "app", {PRODUCE: "1000"})
        order, clock = [], lambda: int(time.monotonic() * 1000)

        async def serve(n: int, size: int):
            gate = gate_for(quotas, _header(ApiKey.PRODUCE), None)

            async def answer():
                order.append((n, time.monotonic()))
                return ProduceResponse(responses=[], throttle_time_ms=0)
            return await gate.serve(clock, _header(ApiKey.PRODUCE), None, size, answer)

        started = time.monotonic()
        first = asyncio.create_task(serve(1, 1200))  # 1200 B over a 1 s window: 200 ms throttle
        second = asyncio.create_task(serve(2, 10))
        await asyncio.gather(first, second)
        return started, order, quotas
    started, order, _ = asyncio.run(scenario())
    assert [n for n, _ in order] == [1, 2]
    assert order[1][1] - started >= 0.15  # the second waited out the first one's throttle
