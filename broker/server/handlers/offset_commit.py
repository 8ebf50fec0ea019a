"""OffsetCommit (key 8), v2-9 served (Kafka 4 removed v0-1, KIP-896).

As Kafka's ``KafkaApis.handleOffsetCommitRequest``: a partition the cluster does not have (its
topic unknown, or the topic has no such partition in this broker's metadata) is answered
UNKNOWN_TOPIC_OR_PARTITION (3) here and never reaches the coordinator; the rest go to the group
coordinator core (generation and member checks, ``offset.metadata.max.bytes``, the acks=all
append to ``__consumer_offsets``), and the two answers are merged in request order. A request
with no known partition left is answered without the coordinator.
"""

from __future__ import annotations

from typing import Awaitable

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import (
    forward,
    merge_partition_errors,
    per_partition_response,
    split_unknown_partitions,
)
from broker.wire import ApiKey, OffsetCommitResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.OFFSET_COMMIT
_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(ctx: BrokerContext, header, request) -> Awaitable[OffsetCommitResponse]:
    """Every partition known (the common case): the coordinator's awaitable itself, no
    coroutine of this handler's to resume per commit."""
    answered, known = split_unknown_partitions(ctx, request)
    if known is request:
        return forward(ctx, header, request, error_response)
    return _handle_some_unknown(ctx, header, request, answered, known)


async def _handle_some_unknown(ctx: BrokerContext, header, request, answered, known) -> OffsetCommitResponse:
    if known is not None:
        merge_partition_errors(answered, await forward(ctx, header, known, error_response))
    return _response(request, answered)


def _response(request, errors: dict[tuple[str, int], int]) -> OffsetCommitResponse:
    return per_partition_response(OffsetCommitResponse, _Topic, _Partition, request, errors)


def error_response(header, request, error_code: int) -> OffsetCommitResponse:
    return _response(request, {(t.name, p.partition_index): error_code
                               for t in request.topics for p in t.partitions})
