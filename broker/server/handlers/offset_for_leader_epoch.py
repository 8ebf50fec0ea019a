"""OffsetForLeaderEpoch (key 23), v2-4: where a leader epoch ended (KIP-101, KIP-320).

For the current epoch the answer is the log end offset; for an older one, the start offset of
the next epoch (``LeaderEpochCache.end_offset_for``). Consumers use it to detect truncation after
a leader change (librdkafka sends exactly v2, reference pitfall 8.19); followers will use it to
truncate. The request's current leader epoch is fenced like Fetch's.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.common import local_replica
from broker.wire import ApiKey, ErrorCode, OffsetForLeaderEpochResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
_Topic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_Partition = OffsetForLeaderEpochResponse.EpochEndOffset


async def handle(ctx: BrokerContext, header, request) -> OffsetForLeaderEpochResponse:
    topics = []
    for topic in request.topics:
        partitions = [_partition(ctx, topic.topic, p) for p in topic.partitions]
        topics.append(_Topic(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _partition(ctx: BrokerContext, topic: str, wanted):
    partition, error = local_replica(ctx, topic, wanted.partition)
    if partition is None:
        return _Partition(error_code=error, partition=wanted.partition)
    error = partition.leader_epoch_error(wanted.current_leader_epoch)
    if error == ErrorCode.NONE and not partition.is_leader:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if error != ErrorCode.NONE:
        return _Partition(error_code=error, partition=wanted.partition)
    epoch, end_offset = partition.leader_epochs.end_offset_for(wanted.leader_epoch,
                                                              partition.log.log_end_offset)
    return _Partition(error_code=ErrorCode.NONE, partition=wanted.partition,
                      leader_epoch=epoch, end_offset=end_offset)


def error_response(header, request, error_code: int) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(topics=[
        _Topic(topic=t.topic, partitions=[_Partition(error_code=error_code, partition=p.partition)
                                          for p in t.partitions])
        for t in request.topics
    ])
