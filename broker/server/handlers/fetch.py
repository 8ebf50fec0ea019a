"""Fetch (key 1), v4-12: whole record batches, long-polled, never decoded.

Limits (Kafka ``ReplicaManager.readFromLocalLog``): the response holds at most
``min(max_bytes, fetch.max.bytes)``; each partition at most ``partition_max_bytes`` and what is
left of the response. The first partition that has data returns at least one whole batch even
when it is bigger than both (KIP-74 "min one batch"), so a consumer never stalls on a large
batch; later partitions return only whole batches that fit.

Visibility: read_uncommitted reads up to the high watermark; read_committed up to the last
stable offset (the first offset of the oldest open transaction, or the high watermark) with the
aborted transactions overlapping the batches returned, from the ``.txnindex``
(``Partition.aborted_transactions``; an empty list when none, null for read_uncommitted,
reference section 3).

Followers (``replica_id >= 0``, Kafka's replica fetch): each partition's fetch offset is the
follower's log end offset, recorded once per request before reading
(``Partition.record_follower_fetch``: it may move the high watermark and propose an ISR
expansion, handed to ``ReplicaManager.submit_isr_change``); the read goes up to the log end,
and a follower long poll wakes on appends (key ``(topic, partition, "log-end")``) rather than on
high-watermark moves. A replica the partition does not list gets REPLICA_NOT_AVAILABLE (9).

Replication throttles (KIP-73, ``broker.server.replication_quota``): a follower that is not in
the ISR, fetching a partition this broker throttles as leader while the leader rate is over
``leader.replication.throttled.rate``, gets that partition empty (nothing is read), as Kafka's
``shouldLeaderThrottle``; the bytes of every throttled partition sent to any follower are
counted once the answer is final.

Long poll: with less than ``min_bytes`` available and ``max_wait_ms`` > 0 the request waits in
the purgatory, woken whenever the high watermark of one of its partitions moves; it re-reads
after each wake-up and answers when ``min_bytes`` is reached, a partition errs, or the time is
up. Fetch sessions (KIP-227) are declined: ``session_id`` 0 in every answer, so clients send
full requests (reference pitfall 8.18); a request for an existing session (id != 0) gets
FETCH_SESSION_ID_NOT_FOUND (70) and the client falls back to a full request.
"""

from __future__ import annotations

import asyncio

from broker.replica.partition import ISOLATION_READ_COMMITTED, LOG_END, ReadResult
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.wire import ApiKey, ErrorCode, FetchResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.FETCH
_Topic = FetchResponse.FetchableTopicResponse
_Partition = FetchResponse.PartitionData
_Aborted = FetchResponse.AbortedTransaction


async def handle(ctx: BrokerContext, header, request) -> FetchResponse:
    if request.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    refused = _record_follower_fetches(ctx, request) if request.replica_id >= 0 else {}
    reads = _read_all(ctx, request, refused)
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    if request.replica_id >= 0:
        keys = [(*key, LOG_END) for key in keys]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    while not _satisfied(ctx, request, reads):
        waiter = ctx.replicas.purgatory.watch(keys)
        if waiter is None:
            break
        with waiter:
            woken = await waiter.wait(deadline - loop.time())
        reads = _read_all(ctx, request, refused)
        if not woken:
            break
    if request.replica_id >= 0 and ctx.replication_quotas is not None:
        _record_throttled(ctx, request, reads)
    return _response(request, reads)


def _satisfied(ctx: BrokerContext, request, reads: list[ReadResult]) -> bool:
    """Kafka's ``ReplicaManager.fetchMessages``: answer now when not asked to wait, when there
    is nothing to wait for, on any error, or with ``min_bytes`` in hand."""
    if ctx.stopping or request.max_wait_ms <= 0 or not reads:
        return True
    if any(r.error_code != ErrorCode.NONE for r in reads):
        return True
    return sum(len(r.records) for r in reads) >= request.min_bytes


def _record_follower_fetches(ctx: BrokerContext, request) -> dict[tuple[str, int], int]:
    """A follower's fetch offsets are its log end offsets: record them once per request.
    Returns the partitions refused, with their error."""
    refused = {}
    for topic in request.topics:
        for fetch in topic.partitions:
            partition, error = local_leader(ctx, topic.topic, fetch.partition)
            if partition is not None:
                error = partition.leader_epoch_error(fetch.current_leader_epoch)
                if error == ErrorCode.NONE and request.replica_id not in partition.replicas:
                    error = ErrorCode.REPLICA_NOT_AVAILABLE
            if error != ErrorCode.NONE:
                refused[(topic.topic, fetch.partition)] = error
                continue
            ctx.replicas.submit_isr_change(partition.record_follower_fetch(
                request.replica_id, fetch.fetch_offset, log_start_offset=fetch.log_start_offset))
    return refused


def _read_all(ctx: BrokerContext, request, refused: dict) -> list[ReadResult]:
    """One read per requested partition, in request order, within the byte limits."""
    remaining = min(request.max_bytes, ctx.config.fetch_max_bytes)
    min_one_batch = True
    reads = []
    for topic in request.topics:
        for fetch in topic.partitions:
            error = refused.get((topic.topic, fetch.partition))
            if error is not None:
                reads.append(ReadResult(error))
                continue
            read = _read_partition(ctx, request, topic.topic, fetch,
                                   min(fetch.partition_max_bytes, remaining), min_one_batch)
            if read.records:
                min_one_batch = False
                remaining = max(0, remaining - len(read.records))
            reads.append(read)
    return reads


def _read_partition(ctx: BrokerContext, request, topic: str, fetch, max_bytes: int,
                    min_one_batch: bool) -> ReadResult:
    partition, error = local_leader(ctx, topic, fetch.partition)
    if partition is None:
        return ReadResult(error)
    epoch_error = partition.leader_epoch_error(fetch.current_leader_epoch)
    if epoch_error != ErrorCode.NONE:
        return ReadResult(epoch_error)
    quotas = ctx.replication_quotas
    if (request.replica_id >= 0 and quotas is not None and quotas.leader.should_throttle(
            topic, fetch.partition, request.replica_id in partition.isr, ctx.now_ms())):
        return partition.read(fetch.fetch_offset, 0, request.isolation_level, False, request.replica_id)
    return partition.read(fetch.fetch_offset, max(0, max_bytes), request.isolation_level,
                          min_one_batch, request.replica_id)


def _record_throttled(ctx: BrokerContext, request, reads: list[ReadResult]) -> None:
    """Count the bytes of throttled partitions, in sync or not (``sizeOfThrottledPartitions``)."""
    quota = ctx.replication_quotas.leader
    if not quota.throttled:
        return
    position = iter(reads)
    size = 0
    for topic in request.topics:
        for fetch in topic.partitions:
            read = next(position)
            if read.records and quota.is_throttled(topic.topic, fetch.partition):
                size += len(read.records)
    if size:
        quota.record(size, ctx.now_ms())


def _response(request, reads: list[ReadResult]) -> FetchResponse:
    committed = request.isolation_level == ISOLATION_READ_COMMITTED
    position = iter(reads)
    topics = []
    for topic in request.topics:
        partitions = []
        for fetch in topic.partitions:
            read = next(position)
            partitions.append(_Partition(
                partition_index=fetch.partition, error_code=read.error_code,
                high_watermark=read.high_watermark, last_stable_offset=read.last_stable_offset,
                log_start_offset=read.log_start_offset,
                aborted_transactions=_aborted(read) if committed and read.error_code == ErrorCode.NONE else None,
                records=read.records,
            ))
        topics.append(_Topic(topic=topic.topic, partitions=partitions))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=topics)


def _aborted(read: ReadResult) -> list:
    return [_Aborted(producer_id=entry.producer_id, first_offset=entry.first_offset)
            for entry in read.aborted_transactions]


def error_response(header, request, error_code: int) -> FetchResponse:
    return _response(request, [ReadResult(error_code)
                               for t in request.topics for _ in t.partitions])
