"""JoinGroup (key 11), v0-9: a member joins (or rejoins) a classic group; the answer waits for
the rebalance to complete (the group coordinator core parks it). The member-id handshake (v4+,
MEMBER_ID_REQUIRED 79), ``group.initial.rebalance.delay.ms``, session and rebalance timeouts and
static membership are the core's (``broker.coordinator.group.core``)."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, JoinGroupResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.JOIN_GROUP


async def handle(ctx: BrokerContext, header, request) -> JoinGroupResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> JoinGroupResponse:
    """Kafka's ``JoinGroupRequest.getErrorResponse``: no member id, generation -1, no protocol
    (null from v7, when the field became nullable)."""
    return JoinGroupResponse(error_code=error_code, generation_id=-1, member_id="", leader="",
                             protocol_name=None if header.api_version >= 7 else "", members=[])
