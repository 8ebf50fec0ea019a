"""AlterConfigs (key 33), v0-2: replace a topic's or broker's whole set of dynamic configs
(KIP-133); a key left out is removed. Each resource is checked and written on its own
(``config_alter``); ``validate_only`` checks without writing. Log levels (BROKER_LOGGER) only
through IncrementalAlterConfigs: here INVALID_REQUEST, as Kafka."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.config_alter import alter_resource
from broker.wire import AlterConfigsResponse, ApiKey, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ALTER_CONFIGS
_Result = AlterConfigsResponse.AlterConfigsResourceResponse
_BROKER_LOGGER = 8


async def handle(ctx: BrokerContext, header, request) -> AlterConfigsResponse:
    results = []
    for resource in request.resources:
        wanted = {c.name: c.value for c in resource.configs}
        if resource.resource_type == _BROKER_LOGGER:
            code, message = (ErrorCode.INVALID_REQUEST,
                             "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
        else:
            code, message = await alter_resource(ctx, resource.resource_type, resource.resource_name,
                                                 lambda _current, wanted=wanted: dict(wanted), request.validate_only)
        results.append(_Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=results)


def error_response(header, request, error_code: int) -> AlterConfigsResponse:
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        _Result(error_code=error_code, error_message=ErrorCode(error_code).message,
                resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
