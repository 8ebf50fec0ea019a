"""DescribeTransactions (key 65), v0: the state, timeout, start time, producer id and epoch and
partitions of transactional ids this broker coordinates (KIP-664; ``kafka-transactions
describe``); other ids are answered NOT_COORDINATOR by the core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.txn_common import forward
from broker.wire import ApiKey, DescribeTransactionsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
_State = DescribeTransactionsResponse._nested["transaction_states"][0]


async def handle(ctx: BrokerContext, header, request) -> DescribeTransactionsResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(transaction_states=[
        _State(error_code=error_code, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
               transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
        for tid in request.transactional_ids])
