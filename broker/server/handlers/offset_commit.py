"""OffsetCommit (key 8), v2-9 served (Kafka 4 removed v0-1, KIP-896).

As Kafka's ``KafkaApis.handleOffsetCommitRequest``: a partition the cluster does not have (its
topic unknown, or the topic has no such partition in this broker's metadata) is answered
UNKNOWN_TOPIC_OR_PARTITION (3) here and never reaches the coordinator; the rest go to the group
coordinator core (generation and member checks, ``offset.metadata.max.bytes``, the acks=all
append to ``__consumer_offsets``), and the two answers are merged in request order. A request
with no known partition left is answered without the coordinator.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, ErrorCode, OffsetCommitResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.OFFSET_COMMIT
_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = OffsetCommitResponse.OffsetCommitResponsePartition


async def handle(ctx: BrokerContext, header, request) -> OffsetCommitResponse:
    topics = ctx.metadata.snapshot.topics
    unknown: dict[tuple[str, int], int] = {}
    known_topics = []
    for topic in request.topics:
        known = topics.get(topic.name)
        partitions = [p for p in topic.partitions if known is not None and p.partition_index in known.partitions]
        for p in topic.partitions:
            if known is None or p.partition_index not in known.partitions:
                unknown[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if partitions:
            known_topics.append(type(topic)(name=topic.name, partitions=partitions))
    if not unknown:
        return await forward(ctx, header, request, error_response)
    answered: dict[tuple[str, int], int] = dict(unknown)
    if known_topics:
        response = await forward(ctx, header, _with_topics(request, known_topics), error_response)
        for topic in response.topics:
            for p in topic.partitions:
                answered[(topic.name, p.partition_index)] = p.error_code
    return _response(request, answered)


def _with_topics(request, topics):
    copy = type(request)(**{name: getattr(request, name) for name, _, _ in request._init_plan})
    copy.topics = topics
    return copy


def _response(request, errors: dict[tuple[str, int], int]) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        _Topic(name=topic.name, partitions=[
            _Partition(partition_index=p.partition_index,
                       error_code=errors.get((topic.name, p.partition_index), ErrorCode.UNKNOWN_SERVER_ERROR))
            for p in topic.partitions])
        for topic in request.topics])


def error_response(header, request, error_code: int) -> OffsetCommitResponse:
    return _response(request, {(t.name, p.partition_index): error_code
                               for t in request.topics for p in t.partitions})
