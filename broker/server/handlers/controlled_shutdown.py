"""ControlledShutdown (key 7), v1-3: a stopping broker asks the controller to move its
leaderships away first (Kafka ``KafkaController.doControlledShutdown``).

Only the controller answers (NOT_CONTROLLER 41 elsewhere). The answer lists the partitions the
broker still leads (no other in-sync replica could take them); the broker retries a few times
and then stops anyway. BROKER_NOT_AVAILABLE (8) if the controller does not know the broker as
live yet; STALE_BROKER_EPOCH (77) for a previous incarnation.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ControlledShutdownResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.CONTROLLED_SHUTDOWN
_Remaining = ControlledShutdownResponse.RemainingPartition


async def handle(ctx: BrokerContext, header, request) -> ControlledShutdownResponse:
    if not ctx.controller.active:
        return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    error, remaining = await ctx.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    return ControlledShutdownResponse(error_code=error, remaining_partitions=[
        _Remaining(topic_name=topic, partition_index=index) for topic, index in remaining])


def error_response(header, request, error_code: int) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(error_code=error_code)
