"""FindCoordinator (key 10): COORDINATOR_NOT_AVAILABLE (15) until the group and transaction
coordinators exist, but the request already creates the topic that coordinator will need, as
Kafka's ``KafkaApis.getCoordinator`` does: key type 0 (group) creates ``__consumer_offsets``,
1 (transaction) ``__transaction_state`` (``broker.server.internal_topics``; not while fewer
brokers are live than its replication factor). 15 is retriable, so clients ask again.

v4+ batches keys (KIP-699); an empty key list creates nothing, as in Kafka, where the topic is
looked up per key. A key type other than 0 and 1 is INVALID_REQUEST (42): Kafka's share type (2)
needs v6, and other values fail its ``CoordinatorType.forId``.

It is advertised even while no coordinator exists because librdkafka enables lz4 only when key
10 is present (reference pitfall 8.2).
"""

from __future__ import annotations

from broker.cluster.internal_topics import topic_for_key_type
from broker.server.context import BrokerContext
from broker.server.internal_topics import ensure_internal_topic
from broker.wire import ApiKey, ErrorCode, FindCoordinatorResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.FIND_COORDINATOR
_MESSAGE = "pylog has no group or transaction coordinator yet"


def error_response(header, request, error_code: int) -> FindCoordinatorResponse:
    message = _MESSAGE if error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE else ErrorCode(error_code).message
    if header.api_version >= 4:
        return FindCoordinatorResponse(coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=-1, host="", port=-1,
                                                error_code=error_code, error_message=message)
            for key in request.coordinator_keys
        ])
    return FindCoordinatorResponse(error_code=error_code, error_message=message,
                                   node_id=-1, host="", port=-1)


async def handle(ctx: BrokerContext, header, request) -> FindCoordinatorResponse:
    topic = topic_for_key_type(request.key_type)
    if topic is None:
        return error_response(header, request, ErrorCode.INVALID_REQUEST)
    if header.api_version < 4 or request.coordinator_keys:
        await ensure_internal_topic(ctx, topic)
    return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
