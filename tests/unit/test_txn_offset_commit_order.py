"""Pipelined TxnOffsetCommit requests on one connection reach the group coordinator in request
order even when the first one's KIP-890 verification answers last (``append_order``, as for
Produce): otherwise the older offsets could be written after the newer ones and win."""

from __future__ import annotations

import asyncio
import contextvars
from types import SimpleNamespace

from broker.server import network
from broker.server.handlers import txn_offset_commit
from broker.wire import ErrorCode, TxnOffsetCommitRequest, TxnOffsetCommitResponse

_TURNS = 50  # event-loop steps the first verification is held back


class SlowFirstVerifier:
    def __init__(self) -> None:
        self.calls = 0

    async def verify(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.calls += 1
        if self.calls == 1:
            for _ in range(_TURNS):
                await asyncio.sleep(0)
        return ErrorCode.NONE


class RecordingGroups:
    """Records the offsets in the order the coordinator receives them; answers NONE."""

    def __init__(self) -> None:
        self.received: list[int] = []

    async def handle_txn_offset_commit(self, version, request, client_id, client_host, guard):
        self.received.append(request.topics[0].partitions[0].committed_offset)
        return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
            name=t.name, partitions=[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index, error_code=ErrorCode.NONE) for p in t.partitions])
            for t in request.topics])


def _request(offset: int) -> TxnOffsetCommitRequest:
    topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(
        name="events", partitions=[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])
    return TxnOffsetCommitRequest(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0,
                                  generation_id=-1, member_id="", topics=[topic])


def _context(groups, verifier):
    metadata = SimpleNamespace(snapshot=SimpleNamespace(topics={"events": SimpleNamespace(partitions={0: None})}))
    return SimpleNamespace(groups=groups, txn_verifier=verifier, metadata=metadata, replicas=None)


def test_pipelined_txn_offset_commits_reach_the_coordinator_in_request_order(monkeypatch):
    groups = RecordingGroups()
    ctx = _context(groups, SlowFirstVerifier())
    header = SimpleNamespace(api_version=3, client_id="c")
    verifier = ctx.txn_verifier

    async def verify(ctx_, request, api_version):  # the handler's verification step, minus the partition lookup
        return await verifier.verify(request.transactional_id, request.producer_id,
                                     request.producer_epoch, "__consumer_offsets", 0), None
    monkeypatch.setattr(txn_offset_commit, "_verify", verify)

    async def one_connection():
        network._CONNECTION_STATE.set({})  # both requests share one connection's state
        first = asyncio.ensure_future(txn_offset_commit.handle(ctx, header, _request(10)))
        second = asyncio.ensure_future(txn_offset_commit.handle(ctx, header, _request(20)))
        return await asyncio.gather(first, second)

    answers = asyncio.run(contextvars.copy_context().run(one_connection))
    assert verifier.calls == 2 and groups.received == [10, 20]
    assert all(p.error_code == ErrorCode.NONE for a in answers for t in a.topics for p in t.partitions)
