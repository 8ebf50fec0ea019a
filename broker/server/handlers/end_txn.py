"""EndTxn (key 26), v0-4: commit or abort a producer's transaction. The core answers once the
PrepareCommit/PrepareAbort record is replicated; the markers follow (``txn_markers``).

v5 (KIP-890 part 2, transaction version 2: the epoch bumped at every commit, returned in the
answer) is not advertised although Kafka 4.1 advertises it: pylog has no transaction version 2
(tests/peer/test_peer_versions.py names the difference).
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
