"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND or SUBTRACT single keys of a
topic's or broker's dynamic configs (KIP-339), the API ``kafka-configs --alter`` sends. The
operations apply over what ZooKeeper holds (``dynamic_config.apply_incremental``); the result
is checked as a whole (``config_alter``) before anything is written."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.dynamic_config import apply_incremental
from broker.server.handlers.config_alter import alter_resource
from broker.wire import ApiKey, ErrorCode, IncrementalAlterConfigsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
_Result = IncrementalAlterConfigsResponse.IncrementalAlterConfigsResourceResponse


async def handle(ctx: BrokerContext, header, request) -> IncrementalAlterConfigsResponse:
    results = []
    for resource in request.resources:
        ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
        code, message = await alter_resource(ctx, resource.resource_type, resource.resource_name,
                                             lambda current, ops=ops: apply_incremental(current, ops),
                                             request.validate_only)
        results.append(_Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def error_response(header, request, error_code: int) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        _Result(error_code=error_code, error_message=ErrorCode(error_code).message,
                resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
