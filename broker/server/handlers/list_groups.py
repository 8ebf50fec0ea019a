"""ListGroups (key 16), v0-5: the groups this broker coordinates (those of the
``__consumer_offsets`` partitions it has loaded); admin clients ask every broker. States filter
(v4+) and types filter (v5+) are applied by the group coordinator core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, ListGroupsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.LIST_GROUPS


async def handle(ctx: BrokerContext, header, request) -> ListGroupsResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=error_code, groups=[])
