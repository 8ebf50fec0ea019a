"""DeleteGroups (key 42), v0-2: delete Empty groups and their offsets (tombstones in
``__consumer_offsets``); NON_EMPTY_GROUP (68) while members remain. Decided by the group
coordinator core, per group."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, DeleteGroupsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DELETE_GROUPS
_Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(ctx: BrokerContext, header, request) -> DeleteGroupsResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[_Result(group_id=group_id, error_code=error_code)
                                         for group_id in request.groups_names])
