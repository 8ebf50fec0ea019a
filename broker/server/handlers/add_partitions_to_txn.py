"""AddPartitionsToTxn (key 24), v0-5: a transactional producer registers partitions with its
transaction (v0-3, the client form), or a partition leader verifies that a partition is in a
producer's transaction (v4+, the broker form, ``verify_only``; KIP-890 part 1). Both go to the
transaction coordinator's core.

Advertised 0-5 as Kafka 4.1 advertises it: clients never send v4+ (Kafka's client builder stops at
v3, librdkafka at v3), and the dispatcher serves only advertised versions, so v4-5 must be
advertised for other brokers' verification requests to be served.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.txn_common import forward
from broker.wire import AddPartitionsToTxnResponse, ApiKey

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
_TopicResult = AddPartitionsToTxnResponse._nested["results_by_topic_v3_and_below"][0]
_PartitionResult = _TopicResult._nested["results_by_partition"][0]


async def handle(ctx: BrokerContext, header, request) -> AddPartitionsToTxnResponse:
    if (header.api_version >= 4 and ctx.txn is not None and hasattr(ctx.txn, "handle_settled")
            and any(not t.verify_only for t in request.transactions)):
        # another leader's implicit add (transaction version 2): waits here for the previous
        # transaction of the id to complete rather than bounce CONCURRENT_TRANSACTIONS back
        return await ctx.txn.handle_settled(header.api_key, header.api_version, request)
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> AddPartitionsToTxnResponse:
    """v0-3: ``error_code`` for every partition (Kafka's ``AddPartitionsToTxnRequest.getErrorResponse``);
    v4+: the top-level error code and no per-transaction results."""
    if header.api_version >= 4:
        return AddPartitionsToTxnResponse(error_code=error_code, results_by_transaction=[])
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        _TopicResult(name=topic.name, results_by_partition=[
            _PartitionResult(partition_index=p, partition_error_code=error_code) for p in topic.partitions])
        for topic in request.v3_and_below_topics])
