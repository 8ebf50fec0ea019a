"""``RemoteTxnVerifier`` against a stand-in coordinator broker on a real socket: the request is a
verify-only AddPartitionsToTxn v4 for exactly the producer's id, epoch and partition, sent to the
leader of the id's ``__transaction_state`` partition; the partition's error (or the top-level
one) is the answer; no leader known is NOT_COORDINATOR."""

from __future__ import annotations

import asyncio
import struct

from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState
from broker.coordinator.txn.core import partition_for
from broker.server.metadata import ClusterSnapshot, topic_metadata
from broker.server.txn_verify import RemoteTxnVerifier
from broker.wire import AddPartitionsToTxnResponse, ErrorCode, decode_request, encode_response, with_size_prefix

_Txn = AddPartitionsToTxnResponse._nested["results_by_transaction"][0]
_Topic = _Txn._nested["topic_results"][0]
_Part = _Topic._nested["results_by_partition"][0]


def snapshot(port: int, leader: int) -> ClusterSnapshot:
    states = {i: (PartitionState(leader, 0, (leader,), 1), 0) for i in range(4)}
    txn = topic_metadata("__transaction_state", {i: (leader,) for i in range(4)}, states, {})
    brokers = {2: BrokerRegistration(2, (EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),), 0)}
    return ClusterSnapshot(brokers=brokers, topics={"__transaction_state": txn})


async def serve(answers: list, seen: list):
    async def client(reader, writer):
        while True:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
            except asyncio.IncompleteReadError:
                return
            header, request = decode_request(await reader.readexactly(size))
            seen.append((header.api_key, header.api_version, request))
            writer.write(with_size_prefix(encode_response(header.api_key, header.api_version,
                                                          header.correlation_id, answers.pop(0))))
            await writer.drain()
    return await asyncio.start_server(client, "127.0.0.1", 0)


def test_verification_asks_the_coordinator_broker():
    async def main():
        seen: list = []
        answers = [
            AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[_Txn(
                transactional_id="t", topic_results=[_Topic(name="events", results_by_partition=[
                    _Part(partition_index=3, partition_error_code=ErrorCode.NONE)])])]),
            AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[_Txn(
                transactional_id="t", topic_results=[_Topic(name="events", results_by_partition=[
                    _Part(partition_index=1, partition_error_code=ErrorCode.INVALID_TXN_STATE)])])]),
            AddPartitionsToTxnResponse(error_code=ErrorCode.NOT_COORDINATOR, results_by_transaction=[]),
        ]
        server = await serve(answers, seen)
        port = server.sockets[0].getsockname()[1]
        box = [snapshot(port, 2)]
        verifier = RemoteTxnVerifier(1, lambda: box[0], "PLAINTEXT", 4, 5.0)
        try:
            assert await verifier("t", 7, 3, "events", 3) == ErrorCode.NONE
            assert await verifier("t", 7, 3, "events", 1) == ErrorCode.INVALID_TXN_STATE
            assert await verifier("t", 7, 3, "events", 0) == ErrorCode.NOT_COORDINATOR
            (key, version, request) = seen[0]
            assert (key, version) == (24, 4)
            (txn,) = request.transactions
            assert (txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.verify_only) == ("t", 7, 3, True)
            assert [(t.name, list(t.partitions)) for t in txn.topics] == [("events", [3])]
            box[0] = snapshot(port, 5)  # the id's partition led by a broker without an endpoint
            assert await verifier("t", 7, 3, "events", 3) == ErrorCode.NOT_COORDINATOR
            assert len(seen) == 3 and partition_for("t", 4) in range(4)
        finally:
            await verifier.close()
            server.close()
            await server.wait_closed()
    asyncio.run(asyncio.wait_for(main(), 20))


def test_concurrent_verifications_share_a_request():
    async def main():
        seen: list = []

        def answer_for(request):
            return AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[_Txn(
                transactional_id=t.transactional_id, topic_results=[_Topic(name=topic.name, results_by_partition=[
                    _Part(partition_index=p, partition_error_code=ErrorCode.NONE if p % 2 == 0
                          else ErrorCode.INVALID_TXN_STATE) for p in topic.partitions]) for topic in t.topics])
                for t in request.transactions])

        class Answers(list):
            def pop(self, _):
                return answer_for(seen[-1][2])

        server = await serve(Answers(), seen)
        port = server.sockets[0].getsockname()[1]
        verifier = RemoteTxnVerifier(1, lambda: snapshot(port, 2), "PLAINTEXT", 4, 5.0)
        try:
            calls = [verifier("t", 7, 3, topic, p) for topic in ("a", "b") for p in range(3)]
            calls.append(verifier("u", 8, 0, "a", 4))
            calls.append(verifier("t", 9, 0, "a", 0))  # the same id, another producer: a later request
            results = await asyncio.gather(*calls)
            assert results == [0, 48, 0, 0, 48, 0, 0, 0]
            # the 7 queued together (each call lets the others join first), then t/9
            assert verifier.requests == len(seen) == 2
            first = seen[0][2] if len(seen[0][2].transactions) > 1 else seen[1][2]
            assert {t.transactional_id for t in first.transactions} >= {"t"}
            assert all(len({(t.producer_id, t.producer_epoch) for t in r.transactions
                            if t.transactional_id == "t"}) == 1 for _, _, r in seen)
        finally:
            await verifier.close()
            server.close()
            await server.wait_closed()
    asyncio.run(asyncio.wait_for(main(), 20))
