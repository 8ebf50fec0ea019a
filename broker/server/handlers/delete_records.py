"""DeleteRecords (key 21), v0-2: each partition's leader moves its log start offset to the
asked offset (-1: the high watermark); readers then start there (ListOffsets earliest, a fetch
below it is OFFSET_OUT_OF_RANGE: consumers reset, Spark's failOnDataLoss sees the loss), and
retention deletes the segments wholly below it. Followers follow the leader's log start offset
from their fetch answers.

Errors as Kafka's: not the leader NOT_LEADER_OR_FOLLOWER, an unknown partition
UNKNOWN_TOPIC_OR_PARTITION, an offset above the high watermark OFFSET_OUT_OF_RANGE, a topic
without the ``delete`` cleanup policy POLICY_VIOLATION. Unlike Kafka, the answer does not wait
for the followers' log start offsets (the low watermark is the leader's).
"""

from __future__ import annotations

from broker.log import LogError
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.wire import ApiKey, DeleteRecordsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DELETE_RECORDS
_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(ctx: BrokerContext, header, request) -> DeleteRecordsResponse:
    topics = [_Topic(name=t.name, partitions=[_delete(ctx, t.name, p.partition_index, p.offset)
                                              for p in t.partitions])
              for t in request.topics]
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


def _delete(ctx: BrokerContext, topic: str, index: int, offset: int):
    partition, error = local_leader(ctx, topic, index)
    if partition is None:
        return _Partition(partition_index=index, low_watermark=-1, error_code=error)
    if not partition.log.config.delete:
        return _Partition(partition_index=index, low_watermark=-1, error_code=ErrorCode.POLICY_VIOLATION)
    try:
        low = partition.delete_records(offset)
    except ValueError:
        return _Partition(partition_index=index, low_watermark=-1, error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    except LogError as exc:
        return _Partition(partition_index=index, low_watermark=-1, error_code=exc.kafka_error_code)
    return _Partition(partition_index=index, low_watermark=low, error_code=ErrorCode.NONE)


def error_response(header, request, error_code: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(throttle_time_ms=0, topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=p.partition_index, low_watermark=-1,
                                                   error_code=error_code) for p in t.partitions])
        for t in request.topics])
