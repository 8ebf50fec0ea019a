"""DescribeTopicPartitions (key 75), v0: topics and partitions, paged by partition count (KIP-966).

As Kafka's ``DescribeTopicPartitionsRequestHandler`` and metadata cache answer it:
- An empty topic list means every topic. Topics are answered in name order, from the cursor's
  topic on (its partitions from the cursor's index); a named list must contain the cursor's topic,
  or the whole request is INVALID_REQUEST.
- At most min(``response_partition_limit``, ``PARTITIONS_PER_RESPONSE_MAX``) partitions are
  answered; ``next_cursor`` then names the first partition left out (the next topic's partition
  0 when a topic ended exactly at the limit and more topics follow).
- A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name), with no partitions; it takes nothing from the partition budget.
- Partitions as in Metadata: leader, leader epoch, replicas, ISR, offline replicas; no state or a
  leader that is not live is LEADER_NOT_AVAILABLE with leader -1. pylog elects from the ISR only
  (ZooKeeper mode has no eligible leader replicas), so the ELR and last known ELR are empty lists
  (what Kafka 4 answers for a partition whose ISR is complete), not null.
"""

from __future__ import annotations

from broker.cluster.errors import InvalidTopicError
from broker.cluster.names import validate_topic_name
from broker.server.context import BrokerContext
from broker.server.metadata import ClusterSnapshot, TopicMetadata, ZERO_TOPIC_ID
from broker.wire import ApiKey, DescribeTopicPartitionsResponse, ErrorCode

__all__ = ["API_KEY", "PARTITIONS_PER_RESPONSE_MAX", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
# Kafka's max.request.partition.size.limit default: the most partitions one response carries.
PARTITIONS_PER_RESPONSE_MAX = 2000
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # as Metadata's
_Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
_Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
_Cursor = DescribeTopicPartitionsResponse.Cursor


async def handle(ctx: BrokerContext, header, request) -> DescribeTopicPartitionsResponse:
    snapshot = ctx.metadata.snapshot
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    describe_all = not request.topics
    names = snapshot.topics if describe_all else {t.name for t in request.topics}
    names = sorted(name for name in names if name >= cursor_topic)
    if cursor is not None and not describe_all and cursor_topic not in names:
        return error_response(header, request, ErrorCode.INVALID_REQUEST)
    remaining = min(PARTITIONS_PER_RESPONSE_MAX, request.response_partition_limit)
    response = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
    for name in names:
        if remaining == 0:  # the budget ran out exactly at the end of the previous topic
            response.next_cursor = _Cursor(topic_name=name, partition_index=0)
            break
        if remaining < 0:
            break
        topic = snapshot.topics.get(name)
        if topic is None:
            response.topics.append(_missing(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        indexes = [index for index in sorted(topic.partitions) if index >= start]
        taken = indexes[:remaining]
        response.topics.append(_topic(snapshot, topic, taken))
        if len(taken) < len(indexes):
            response.next_cursor = _Cursor(topic_name=name, partition_index=indexes[len(taken)])
            break
        remaining -= len(taken)
    return response


def error_response(header, request, error_code: int) -> DescribeTopicPartitionsResponse:
    """Every named topic with the error, no partitions (Kafka's ``getErrorResponse``)."""
    return DescribeTopicPartitionsResponse(topics=[
        _Topic(error_code=error_code, name=t.name, topic_id=ZERO_TOPIC_ID, partitions=[])
        for t in request.topics
    ])


def _missing(name: str):
    try:
        validate_topic_name(name)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except InvalidTopicError:
        error = ErrorCode.INVALID_TOPIC_EXCEPTION
    return _Topic(error_code=error, name=name, topic_id=ZERO_TOPIC_ID,
                  is_internal=name in _INTERNAL_TOPICS, partitions=[])


def _topic(snapshot: ClusterSnapshot, topic: TopicMetadata, indexes: list[int]):
    return _Topic(
        error_code=ErrorCode.NONE, name=topic.name,
        topic_id=topic.topic_id if topic.topic_id is not None else ZERO_TOPIC_ID,
        is_internal=topic.name in _INTERNAL_TOPICS,
        partitions=[_partition(snapshot, index, topic.partitions[index]) for index in indexes],
    )


def _partition(snapshot: ClusterSnapshot, index: int, view):
    state = view.state
    live_leader = state is not None and state.leader in snapshot.brokers
    return _Partition(
        error_code=ErrorCode.NONE if live_leader else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=index,
        leader_id=state.leader if live_leader else -1,
        leader_epoch=state.leader_epoch if state is not None else -1,
        replica_nodes=list(view.replicas),
        isr_nodes=list(state.isr) if state is not None else [],
        eligible_leader_replicas=[],
        last_known_elr=[],
        offline_replicas=[r for r in view.replicas if r not in snapshot.brokers],
    )
