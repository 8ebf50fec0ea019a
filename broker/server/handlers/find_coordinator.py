"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.

Key type 0 (group): the coordinator of group G is the leader of ``__consumer_offsets``
partition ``partition_for(G, offsets.topic.num.partitions)`` (Java's ``String.hashCode``, as
Kafka, so both pick the same partition for a group); the answer is that leader's node id, host
and port for the listener the request came in on, from this broker's metadata. While the topic,
the partition's leader, or the leader's registration is missing, the answer is
COORDINATOR_NOT_AVAILABLE (15), retriable, and the request creates the topic if it does not
exist yet, as Kafka's ``KafkaApis.getCoordinator`` does (``broker.server.internal_topics``; not
while fewer brokers are live than its replication factor). The leader named may still be
loading the partition: it answers the group requests COORDINATOR_LOAD_IN_PROGRESS meanwhile.

Key type 1 (transaction): the same rule with ``__transaction_state`` and
``transaction.state.log.num.partitions``: the coordinator of transactional id T leads partition
``partition_for(T, n)`` (Kafka's ``TransactionStateManager.partitionFor``, the same function).

v4+ batches keys (KIP-699); an empty key list creates nothing, as in Kafka, where the topic is
looked up per key. A key type other than 0 and 1 is INVALID_REQUEST (42): Kafka's share type (2)
needs v6, and other values fail its ``CoordinatorType.forId``.

librdkafka enables lz4 only when key 10 is advertised (reference pitfall 8.2).
"""

from __future__ import annotations

from broker.cluster.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    KEY_TYPE_GROUP,
    TRANSACTION_STATE_TOPIC_NAME,
    topic_for_key_type,
)
from broker.coordinator.group.core import partition_for
from broker.server.context import BrokerContext
from broker.server.internal_topics import ensure_internal_topic
from broker.wire import ApiKey, ErrorCode, FindCoordinatorResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.FIND_COORDINATOR
_Coordinator = FindCoordinatorResponse.Coordinator
_NOT_AVAILABLE = (-1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def error_response(header, request, error_code: int) -> FindCoordinatorResponse:
    keys = request.coordinator_keys if header.api_version >= 4 else [request.key]
    return _response(header, [(key, (-1, "", -1, error_code), None) for key in keys])


async def handle(ctx: BrokerContext, header, request) -> FindCoordinatorResponse:
    topic = topic_for_key_type(request.key_type)
    if topic is None:
        return error_response(header, request, ErrorCode.INVALID_REQUEST)
    keys = request.coordinator_keys if header.api_version >= 4 else [request.key]
    existed = topic in ctx.metadata.snapshot.topics
    if keys and not existed:
        await ensure_internal_topic(ctx, topic)
    if not existed:  # Kafka answers a creating call so too
        return _response(header, [(key, _NOT_AVAILABLE, None) for key in keys])
    if request.key_type == KEY_TYPE_GROUP:
        return _response(header, [(key, group_coordinator(ctx, key), None) for key in keys])
    return _response(header, [(key, txn_coordinator(ctx, key), None) for key in keys])


def group_coordinator(ctx: BrokerContext, group_id: str) -> tuple[int, str, int, int]:
    """(node id, host, port, error code) of ``group_id``'s coordinator."""
    return _leader_of(ctx, GROUP_METADATA_TOPIC_NAME,
                      partition_for(group_id, ctx.config.internal_topics.offsets_topic_num_partitions))


def txn_coordinator(ctx: BrokerContext, transactional_id: str) -> tuple[int, str, int, int]:
    """(node id, host, port, error code) of ``transactional_id``'s coordinator."""
    return _leader_of(ctx, TRANSACTION_STATE_TOPIC_NAME,
                      partition_for(transactional_id, ctx.config.internal_topics.transaction_state_log_num_partitions))


def _leader_of(ctx: BrokerContext, topic_name: str, index: int) -> tuple[int, str, int, int]:
    snapshot = ctx.metadata.snapshot
    topic = snapshot.topics.get(topic_name)
    if topic is None:
        return _NOT_AVAILABLE
    view = topic.partitions.get(index)
    leader = -1 if view is None or view.state is None else view.state.leader
    endpoint = snapshot.endpoint(leader, ctx.client_listener_name) if leader >= 0 else None
    if endpoint is None:
        return _NOT_AVAILABLE
    return leader, endpoint.host, endpoint.port, ErrorCode.NONE


def _response(header, answers) -> FindCoordinatorResponse:
    """``answers``: (key, (node id, host, port, error), message or None) per key."""
    def message(error: int, text: str | None) -> str | None:
        return None if error == ErrorCode.NONE else text or ErrorCode(error).message

    if header.api_version >= 4:
        return FindCoordinatorResponse(coordinators=[
            _Coordinator(key=key, node_id=node, host=host, port=port, error_code=error,
                         error_message=message(error, text))
            for key, (node, host, port, error), text in answers])
    ((_, (node, host, port, error), text),) = answers
    return FindCoordinatorResponse(error_code=error, error_message=message(error, text),
                                   node_id=node, host=host, port=port)
