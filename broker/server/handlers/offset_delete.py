"""OffsetDelete (key 47), v0 (KIP-496): delete a group's committed offsets of some partitions;
GROUP_SUBSCRIBED_TO_TOPIC (86) for a topic an active member is subscribed to. Decided by the
group coordinator core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, OffsetDeleteResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.OFFSET_DELETE


async def handle(ctx: BrokerContext, header, request) -> OffsetDeleteResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=error_code, topics=[])
