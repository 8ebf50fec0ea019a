"""EndTxn (key 26), v0-5: commit or abort a producer's transaction. The core answers once the
PrepareCommit/PrepareAbort record is replicated; the markers follow (``txn_markers``).

v5 (KIP-890 part 2, transaction version 2): the coordinator bumps the epoch with the decision
and the answer carries the producer id and epoch to go on with (``TxnMetadata.prepare_end``).
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.txn_common import forward
from broker.wire import ApiKey, EndTxnResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.END_TXN


async def handle(ctx: BrokerContext, header, request) -> EndTxnResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> EndTxnResponse:
    return EndTxnResponse(error_code=error_code)
