"""SyncGroup (key 14), v0-5: the leader hands in the assignment, every member gets its own;
followers wait for the leader's (parked by the core), and the answer goes out once the group's
metadata record is replicated in ``__consumer_offsets``."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, SyncGroupResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.SYNC_GROUP


async def handle(ctx: BrokerContext, header, request) -> SyncGroupResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=error_code, assignment=b"")
