"""LeaveGroup (key 13), v0-5: one member (v0-2) or a batch of members by id or instance id (v3+,
KIP-345) leave; the group rebalances or becomes Empty. Decided by the group coordinator core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, LeaveGroupResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.LEAVE_GROUP


async def handle(ctx: BrokerContext, header, request) -> LeaveGroupResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> LeaveGroupResponse:
    """Kafka's ``LeaveGroupRequest.getErrorResponse``: the error at the top, no member results."""
    return LeaveGroupResponse(error_code=error_code, members=[])
