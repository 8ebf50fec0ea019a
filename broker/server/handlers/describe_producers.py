"""DescribeProducers (key 61), v0: the producers a partition leader knows, each with its epoch,
last sequence and timestamp, the coordinator epoch of its last marker and the first offset of
its open transaction (-1: none) (KIP-664; Kafka ``Partition.activeProducerState``). This is how
``kafka-transactions find-hanging`` / ``describe-producers`` see an open transaction that holds a
partition's last stable offset.

Per partition: UNKNOWN_TOPIC_OR_PARTITION (3) when the cluster has no such partition,
NOT_LEADER_OR_FOLLOWER (6) when this broker does not lead it (Kafka answers from the leader's log
only).
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.wire import ApiKey, DescribeProducersResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_PRODUCERS
_Topic = DescribeProducersResponse.TopicResponse
_Partition = DescribeProducersResponse.PartitionResponse
_Producer = DescribeProducersResponse.ProducerState


async def handle(ctx: BrokerContext, header, request) -> DescribeProducersResponse:
    topics = [_Topic(name=topic.name, partitions=[_partition(ctx, topic.name, index)
                                                  for index in topic.partition_indexes])
              for topic in request.topics]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


def _partition(ctx: BrokerContext, topic: str, index: int):
    partition, error = local_leader(ctx, topic, index)
    if partition is None:
        return _Partition(partition_index=index, error_code=error, error_message=None, active_producers=[])
    producers = [
        _Producer(producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                  last_sequence=entry.last_seq,
                  last_timestamp=entry.batches[-1].timestamp if entry.batches else -1,
                  coordinator_epoch=entry.coordinator_epoch,
                  current_txn_start_offset=entry.current_txn_first_offset)
        for entry in partition.producer_state.entries()
    ]
    return _Partition(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                      active_producers=producers)


def error_response(header, request, error_code: int) -> DescribeProducersResponse:
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=i, error_code=error_code,
                                                   error_message=None, active_producers=[])
                                        for i in t.partition_indexes])
        for t in request.topics])
