"""The request path of client quotas (broker/server/quota_gate.py): who a request counts for,
and that a connection's later requests wait out a throttle, in order."""

from __future__ import annotations

import asyncio
import contextvars
import time
from types import SimpleNamespace

from broker.server import network
from broker.server.quota import DEFAULT, FETCH, PRODUCE, REQUEST, ClientQuotas, QuotaSettings
from broker.server.quota_gate import _Timed, gate_for
from broker.wire import ApiKey, MetadataResponse, ProduceResponse


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


def _burn(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_request_percentage_counts_handler_time_and_exempts_the_cluster():
    contextvars.copy_context().run(_request_quota_scenario)


def _request_quota_scenario():
    quotas = ClientQuotas(QuotaSettings(window_num=2, window_size_ms=1000))
    quotas.set_entity(None, "app", {REQUEST: "1"})  # 1 % of the loop: 10 ms of handler time per s
    network._CONNECTION_STATE.set({"principal": "User:ANONYMOUS"})
    gate = gate_for(quotas, _header(ApiKey.METADATA), None)
    assert (gate.key, gate.timed) == (None, True)
    assert gate_for(quotas, _header(ApiKey.LEADER_AND_ISR), None) is None  # Kafka exempts the cluster
    assert gate_for(quotas, _header(ApiKey.FETCH), SimpleNamespace(replica_id=2)) is None  # a follower
    assert gate_for(quotas, _header(ApiKey.METADATA, client_id="other"), None) is None

    async def answer():
        _burn(0.03)  # counted
        await asyncio.sleep(0.2)  # waiting: not counted
        _burn(0.03)
        return MetadataResponse()

    async def scenario():
        network._CONNECTION_STATE.set({"principal": "User:ANONYMOUS"})
        started = time.monotonic()
        timed = _Timed(answer())
        await timed
        assert 0.055 <= timed.seconds < min(0.2, time.monotonic() - started - 0.15), timed.seconds
        header = _header(ApiKey.METADATA)
        await gate_for(quotas, header, None).serve(lambda: int(time.monotonic() * 1000), header, None, 0, answer)
        return network.throttle_remaining_s()
    throttled_s = asyncio.run(scenario())
    # 60 ms against 10 ms/s over a padded 1 s window: (6 % - 1 %) / 1 % x 1 s, bounded by one window
    assert 0.9 <= throttled_s <= 1.0, throttled_s
