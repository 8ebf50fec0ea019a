"""Pipelined Produce requests on one connection append in request order, even when the first
one waits on KIP-890 verification (``broker.server.append_order``), through the real network
layer and dispatcher."""

from __future__ import annotations

import asyncio
import struct

import pytest
from test_server_harness import NOW_MS, Harness, run

from broker.records import Record, encode_batch
from broker.server.append_order import AppendOrder
from broker.server.network import KafkaServer, NetworkLimits
from broker.wire import ErrorCode, decode_response, encode_request

PRODUCE = 0
PID = 1000
_EVENT_LOOP_TURNS = 50  # how long the first verification is held back: plenty for request 2


class SlowFirstVerifier:
    """Accepts everything; the first verification answers only after the event loop has run
    ``_EVENT_LOOP_TURNS`` more steps, the others at once (a coordinator round trip that a later
    request overtakes)."""

    def __init__(self) -> None:
        self.calls = 0

    async def verify(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.calls += 1
        if self.calls == 1:
            for _ in range(_EVENT_LOOP_TURNS):
                await asyncio.sleep(0)
        return ErrorCode.NONE


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1,))
    h.add_topic("events", {0: [1]})
    yield h
    h.close()


def frame(correlation_id: int, value: str, sequence: int) -> bytes:
    batch = encode_batch([Record(0, NOW_MS, b"k", value.encode())], producer_id=PID, producer_epoch=0,
                         base_sequence=sequence, transactional=True)
    request = {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
               "topic_data": [{"name": "events", "partition_data": [{"index": 0, "records": batch}]}]}
    body = encode_request(PRODUCE, 9, correlation_id, "test", request)
    return struct.pack(">i", len(body)) + body


async def pipelined_produce(h: Harness) -> list:
    """Both requests in one write on one connection; the two answers, in order."""
    server = KafkaServer(h.dispatcher, "127.0.0.1", 0, NetworkLimits())
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(frame(1, "first", 0) + frame(2, "second", 1))
        answers = []
        for correlation_id in (1, 2):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            correlation, response = decode_response(PRODUCE, 9, await reader.readexactly(size))
            assert correlation == correlation_id
            answers.append(response.responses[0].partition_responses[0])
        writer.close()
        return answers
    finally:
        await server.close()


def test_pipelined_produce_appends_in_request_order_despite_slow_verification(harness):
    harness.context.txn_verifier = verifier = SlowFirstVerifier()
    first, second = run(pipelined_produce(harness))
    assert verifier.calls == 2  # both opened the transaction on the partition: both verified
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 1)


def test_a_later_ticket_waits_for_every_earlier_one_and_the_line_empties():
    async def scenario():
        order = AppendOrder()
        tickets = [order.take() for _ in range(3)]
        appended = []

        async def holder(i):
            try:
                await order.wait_turn(tickets[i])
                appended.append(i)
            finally:
                order.release(tickets[i])

        third = asyncio.ensure_future(holder(2))
        second = asyncio.ensure_future(holder(1))
        await asyncio.sleep(0)
        assert appended == []  # ticket 0 not released yet
        second.cancel()  # a cancelled request gives its place up
        order.release(tickets[0])
        await asyncio.gather(third, second, return_exceptions=True)
        assert appended == [2] and len(order) == 0
    run(scenario())
