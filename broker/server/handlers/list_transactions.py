"""ListTransactions (key 66): the transactional ids this broker coordinates, filtered by state
and producer id (KIP-664; ``kafka-transactions list`` asks every broker)."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.txn_common import forward
from broker.wire import ApiKey, ListTransactionsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.LIST_TRANSACTIONS


async def handle(ctx: BrokerContext, header, request) -> ListTransactionsResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=error_code, unknown_state_filters=[], transaction_states=[])
