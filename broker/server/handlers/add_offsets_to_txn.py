"""AddOffsetsToTxn (key 25), v0-4: a transactional producer adds a consumer group's
``__consumer_offsets`` partition to its transaction before TxnOffsetCommit (KIP-98, KIP-447);
decided by the transaction coordinator's core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.txn_common import forward
from broker.wire import AddOffsetsToTxnResponse, ApiKey

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN


async def handle(ctx: BrokerContext, header, request) -> AddOffsetsToTxnResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=error_code)
