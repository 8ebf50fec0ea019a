"""Heartbeat (key 12), v0-4: keeps a member's session alive; REBALANCE_IN_PROGRESS (27) tells it
to rejoin. Decided by the group coordinator core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, HeartbeatResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.HEARTBEAT


async def handle(ctx: BrokerContext, header, request) -> HeartbeatResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=error_code)
