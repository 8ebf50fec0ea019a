"""DescribeGroups (key 15), v0-6: state, protocol and members (client id and host, metadata and
assignment bytes) of each group named; a group this broker does not coordinate answers
NOT_COORDINATOR (16) in its own entry. Decided by the group coordinator core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, DescribeGroupsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_GROUPS
_Group = DescribeGroupsResponse.DescribedGroup


async def handle(ctx: BrokerContext, header, request) -> DescribeGroupsResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[
        _Group(error_code=error_code, group_id=group_id, group_state="", protocol_type="", protocol_data="",
               members=[])
        for group_id in request.groups])
