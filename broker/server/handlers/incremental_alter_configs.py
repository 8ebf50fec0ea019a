"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND or SUBTRACT single keys of a
topic's or broker's dynamic configs (KIP-339), the API ``kafka-configs --alter`` sends. The
operations apply over what ZooKeeper holds (``dynamic_config.apply_incremental``); the result
is checked as a whole (``config_alter``) before anything is written. A BROKER_LOGGER (8) resource
changes this broker's log levels in the process (``logger_levels``), nothing written."""

from __future__ import annotations

from broker.server import logger_levels
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
        if resource.resource_type == logger_levels.RESOURCE_BROKER_LOGGER:
            code, message = _alter_log_levels(ctx, resource.resource_name, ops, request.validate_only)
        else:
            code, message = await alter_resource(ctx, resource.resource_type, resource.resource_name,
                                                 lambda current, ops=ops: apply_incremental(current, ops),
                                                 request.validate_only)
        results.append(_Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def _alter_log_levels(ctx: BrokerContext, name: str, ops, validate_only: bool) -> tuple[int, str | None]:
    """Kafka's ``RuntimeLoggerManager.applyChangesForResource``: all checked, then all applied."""
    try:
        logger_levels.check_node(name, ctx.broker_id)
        logger_levels.validate(ops)
    except logger_levels.LoggerLevelError as exc:
        return exc.error_code, exc.message
    if not validate_only:
        logger_levels.apply(ops)
    return ErrorCode.NONE, None


def error_response(header, request, error_code: int) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        _Result(error_code=error_code, error_message=ErrorCode(error_code).message,
                resource_type=r.resource_type, resource_name=r.resource_name)
        for r in request.resources])
