"""FindCoordinator (key 10): always COORDINATOR_NOT_AVAILABLE until the group and transaction
coordinators exist. It is advertised anyway because librdkafka enables lz4 only when key 10 is
present (reference pitfall 8.2); 15 is retriable, so clients that need a coordinator wait."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, FindCoordinatorResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.FIND_COORDINATOR
_MESSAGE = "pylog has no group or transaction coordinator yet"


def error_response(header, request, error_code: int) -> FindCoordinatorResponse:
    if header.api_version >= 4:
        return FindCoordinatorResponse(coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=-1, host="", port=-1,
                                                error_code=error_code, error_message=_MESSAGE)
            for key in request.coordinator_keys
        ])
    return FindCoordinatorResponse(error_code=error_code, error_message=_MESSAGE,
                                   node_id=-1, host="", port=-1)


async def handle(ctx: BrokerContext, header, request) -> FindCoordinatorResponse:
    return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
