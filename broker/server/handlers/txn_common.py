"""What the transaction handlers share: handing a request to the transaction coordinator.

Every transaction API is decided by the pure core behind ``BrokerContext.txn``
(``broker.server.txn_coordinator``); a handler only forwards the decoded request. The core
answers NOT_COORDINATOR (16) for transactional ids whose ``__transaction_state`` partition this
broker does not lead, and COORDINATOR_LOAD_IN_PROGRESS (14) while it loads one. Without a
coordinator (a context built for unit tests) every request is answered
COORDINATOR_NOT_AVAILABLE (15), which clients retry.
"""

from __future__ import annotations

from typing import Callable

from broker.server.context import BrokerContext
from broker.wire import ErrorCode

__all__ = ["forward"]


async def forward(ctx: BrokerContext, header, request, error_response: Callable):
    if ctx.txn is None:
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return await ctx.txn.handle(header.api_key, header.api_version, request)
