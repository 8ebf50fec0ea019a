"""DeleteTopics (key 20), v0-6, answered by the controller only (NOT_CONTROLLER 41 elsewhere).

The controller marks the topic in ``/admin/delete_topics`` and deletes its znodes; its topic
watch then sends StopReplica (delete) to the replicas, and every broker also deletes its logs
when the topic leaves its own ZooKeeper watch (whichever comes first). The answer waits until
this broker no longer has the topic (at most ``timeout_ms``, then REQUEST_TIMED_OUT). Unknown
topics are UNKNOWN_TOPIC_OR_PARTITION (3); v6 may name a topic by id (UNKNOWN_TOPIC_ID 100 when
no topic has it); ``delete.topic.enable=false`` is TOPIC_DELETION_DISABLED (73). A name (or id)
given twice is answered once with INVALID_REQUEST (42) and not deleted, as Kafka answers.

An internal topic (``__consumer_offsets``, ``__transaction_state``) is refused with
INVALID_TOPIC_EXCEPTION (17) and a message. This is a deliberate difference from Kafka 4.1,
whose controller deletes it (error 0; ``tests/peer/test_peer_internal_topics.py`` pins both):
deleting it throws away every group's committed offsets or every transaction's state, which
no client should be able to do by accident (Kafka's own ``kafka-topics --delete`` refused it
client-side while it spoke to ZooKeeper). 17 is the code Produce gives the same topic.
"""

from __future__ import annotations

from collections import Counter

from broker.cluster.internal_topics import is_internal
from broker.server.context import BrokerContext
from broker.server.metadata import ZERO_TOPIC_ID
from broker.wire import ApiKey, DeleteTopicsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DELETE_TOPICS
_Result = DeleteTopicsResponse.DeletableTopicResult


def _requested(header, request) -> list[tuple[str | None, object]]:
    if header.api_version >= 6:
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, ZERO_TOPIC_ID) for name in request.topic_names]


async def handle(ctx: BrokerContext, header, request) -> DeleteTopicsResponse:
    if not ctx.controller.active:
        return error_response(header, request, ErrorCode.NOT_CONTROLLER)
    if not ctx.config.delete_topic_enable:
        return error_response(header, request, ErrorCode.TOPIC_DELETION_DISABLED)
    snapshot = ctx.metadata.snapshot
    results, deleted = [], []
    requested = _requested(header, request)
    counts = Counter(name if name is not None else topic_id for name, topic_id in requested)
    for name, topic_id in requested:
        key = name if name is not None else topic_id
        if counts[key] > 1:  # Kafka: one INVALID_REQUEST per duplicated name or id, nothing deleted
            if not any(r.name == name and r.topic_id == topic_id for r in results):
                results.append(_Result(name=name, topic_id=topic_id, error_code=ErrorCode.INVALID_REQUEST,
                                       error_message=f"Duplicate topic {'name' if name else 'id'}."))
            continue
        topic = snapshot.topics.get(name) if name is not None else snapshot.topic_by_id(topic_id)
        if topic is None:
            error = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            results.append(_Result(name=name, topic_id=topic_id, error_code=error))
            continue
        if is_internal(topic.name):
            results.append(_Result(
                name=topic.name, topic_id=topic.topic_id, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                error_message=f"Topic {topic.name} is a Kafka internal topic and is not allowed to be deleted"))
            continue
        error, message = await ctx.controller.delete_topic(topic.name)
        results.append(_Result(name=topic.name, topic_id=topic.topic_id, error_code=error,
                               error_message=message))
        if error == ErrorCode.NONE:
            deleted.append(topic.name)
    if deleted and request.timeout_ms > 0:
        gone = await ctx.metadata.wait_for(
            lambda s: not any(name in s.topics for name in deleted), request.timeout_ms / 1000)
        if not gone:
            for result in results:
                if result.name in deleted and result.name in ctx.metadata.snapshot.topics:
                    result.error_code = ErrorCode.REQUEST_TIMED_OUT
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def error_response(header, request, error_code: int) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(responses=[
        _Result(name=name, topic_id=topic_id, error_code=error_code)
        for name, topic_id in _requested(header, request)
    ])
