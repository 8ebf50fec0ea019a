"""What the group handlers share: handing a request to the group coordinator.

Every group API is decided by the pure core behind ``BrokerContext.groups``
(``broker.server.group_coordinator``); a handler only forwards the decoded request with the
client id (request header) and the client's address as Kafka writes it, Java's
``InetAddress.toString()`` of the peer without a host name, ``"/127.0.0.1"`` (JoinGroup records it:
DescribeGroups answers it, ``kafka-consumer-groups`` prints it, the group metadata record keeps it). Without a coordinator (a context built for unit tests) every group
request is answered COORDINATOR_NOT_AVAILABLE (15), which clients retry.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from broker.server.context import BrokerContext
from broker.server.network import client_host
from broker.wire import ErrorCode

__all__ = ["forward"]


def forward(ctx: BrokerContext, header, request, error_response: Callable) -> Awaitable:
    """The awaitable of the coordinator's answer: its future itself (``submit``), no coroutine
    frame here to resume through per request."""
    if ctx.groups is None:
        return _answered(error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    return ctx.groups.submit(header.api_key, header.api_version, request, header.client_id,
                             "/" + client_host())


async def _answered(response):
    return response


def split_unknown_partitions(ctx: BrokerContext, request) -> tuple[dict[tuple[str, int], int], object | None]:
    """OffsetCommit and TxnOffsetCommit (Kafka's ``KafkaApis``): a partition the cluster does not
    have (unknown topic, or no such partition in this broker's metadata) is answered
    UNKNOWN_TOPIC_OR_PARTITION here and never reaches the coordinator. Returns those answers and
    the request narrowed to the known partitions (None when none is left; ``request`` itself when
    every partition is known)."""
    topics = ctx.metadata.snapshot.topics
    for topic in request.topics:  # the common case first: every partition known, nothing built
        known = topics.get(topic.name)
        if known is None or any(p.partition_index not in known.partitions for p in topic.partitions):
            break
    else:
        return {}, request
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
        return unknown, request
    if not known_topics:
        return unknown, None
    narrowed = type(request)(**{name: getattr(request, name) for name, _, _ in request._init_plan})
    narrowed.topics = known_topics
    return unknown, narrowed


def per_partition_response(response_class, topic_class, partition_class, request,
                           errors: dict[tuple[str, int], int]):
    """A commit answer with one error per requested partition, in request order (a partition
    missing from ``errors`` would be a bug: UNKNOWN_SERVER_ERROR rather than a silent success)."""
    return response_class(topics=[
        topic_class(name=topic.name, partitions=[
            partition_class(partition_index=p.partition_index,
                            error_code=errors.get((topic.name, p.partition_index), ErrorCode.UNKNOWN_SERVER_ERROR))
            for p in topic.partitions])
        for topic in request.topics])


def merge_partition_errors(errors: dict[tuple[str, int], int], response) -> None:
    """Add a coordinator answer's per-partition error codes to ``errors``."""
    for topic in response.topics:
        for p in topic.partitions:
            errors[(topic.name, p.partition_index)] = p.error_code
