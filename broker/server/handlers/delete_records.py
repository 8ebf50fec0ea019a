"""DeleteRecords (key 21), v0-2: each partition's leader moves its log start offset to the
asked offset (-1: the high watermark); readers then start there (ListOffsets earliest, a fetch
below it is OFFSET_OUT_OF_RANGE: consumers reset, Spark's failOnDataLoss sees the loss), and
retention deletes the segments wholly below it. Followers follow the leader's log start offset
from their fetch answers (the leader wakes their long polls) and report theirs in their next
fetch.

As Kafka's ``DelayedDeleteRecords``, the answer waits (in the purgatory, up to the request's
``timeout_ms``) until the partition's low watermark, the lowest log start offset over the leader
and its in-sync followers (``Partition.low_watermark``), reaches the asked offset, and carries
that low watermark; past the timeout the partition answers REQUEST_TIMED_OUT with -1.

Errors as Kafka's: not the leader NOT_LEADER_OR_FOLLOWER, an unknown partition
UNKNOWN_TOPIC_OR_PARTITION, an offset above the high watermark OFFSET_OUT_OF_RANGE, a topic
without the ``delete`` cleanup policy POLICY_VIOLATION.
"""

from __future__ import annotations

import asyncio

from broker.log import LogError
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.wire import ApiKey, DeleteRecordsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DELETE_RECORDS
_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(ctx: BrokerContext, header, request) -> DeleteRecordsResponse:
    results, pending = {}, {}
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            results[key], waiting = _delete(ctx, t.name, p.partition_index, p.offset)
            if waiting is not None:
                pending[key] = waiting
    if pending:
        await _wait_for_low_watermarks(ctx, pending, results, request.timeout_ms)
    topics = [_Topic(name=t.name, partitions=[results[(t.name, p.partition_index)] for p in t.partitions])
              for t in request.topics]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete(ctx: BrokerContext, topic: str, index: int, offset: int):
    """(this partition's answer, (partition, target, leader term) if it must wait for followers)."""
    partition, error = local_leader(ctx, topic, index)
    if partition is None:
        return _Partition(partition_index=index, low_watermark=-1, error_code=error), None
    if not partition.log.config.delete:
        return _Partition(partition_index=index, low_watermark=-1, error_code=ErrorCode.POLICY_VIOLATION), None
    target = partition.high_watermark if offset == -1 else offset  # Kafka's requiredOffset
    try:
        partition.delete_records(offset)
    except ValueError:
        return _Partition(partition_index=index, low_watermark=-1, error_code=ErrorCode.OFFSET_OUT_OF_RANGE), None
    except LogError as exc:
        return _Partition(partition_index=index, low_watermark=-1, error_code=exc.kafka_error_code), None
    low = partition.low_watermark
    if low >= target:
        return _Partition(partition_index=index, low_watermark=low, error_code=ErrorCode.NONE), None
    return None, (partition, target, partition.leader_term)


async def _wait_for_low_watermarks(ctx: BrokerContext, pending: dict, results: dict, timeout_ms: int) -> None:
    """Kafka's ``DelayedDeleteRecords``: re-check on every wake-up of the partitions' keys
    (a follower's fetch that moves its log start offset notifies them) until all are done or
    the request's timeout passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(timeout_ms, 0) / 1000
    waiter = ctx.replicas.purgatory.watch(partition.key for partition, _, _ in pending.values())
    try:
        while pending:
            for key, (partition, target, term) in list(pending.items()):
                if not partition.is_leader or partition.leader_term != term:
                    results[key] = _Partition(partition_index=key[1], low_watermark=-1,
                                              error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
                elif partition.low_watermark >= target:
                    results[key] = _Partition(partition_index=key[1], low_watermark=partition.low_watermark,
                                              error_code=ErrorCode.NONE)
                else:
                    continue
                del pending[key]
            if not pending or waiter is None or not await waiter.wait(deadline - loop.time()):
                break
    finally:
        if waiter is not None:
            waiter.close()
    for key in pending:
        results[key] = _Partition(partition_index=key[1], low_watermark=-1, error_code=ErrorCode.REQUEST_TIMED_OUT)


def error_response(header, request, error_code: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=p.partition_index, low_watermark=-1,
                                                   error_code=error_code) for p in t.partitions])
        for t in request.topics])
