"""CreatePartitions (key 37), v0-3: more partitions for existing topics (KIP-195), on the
controller (``ControllerService.create_partitions``; any other broker answers NOT_CONTROLLER
and the client asks again). A topic named twice is INVALID_REQUEST for both, as in Kafka."""

from __future__ import annotations

from collections import Counter

from broker.server.context import BrokerContext
from broker.wire import ApiKey, CreatePartitionsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.CREATE_PARTITIONS
_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: BrokerContext, header, request) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        else:
            assignments = None if topic.assignments is None else [a.broker_ids for a in topic.assignments]
            code, message = await ctx.controller.create_partitions(topic.name, topic.count, assignments,
                                                                   request.validate_only)
        results.append(_Result(name=topic.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def error_response(header, request, error_code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        _Result(name=t.name, error_code=error_code, error_message=ErrorCode(error_code).message)
        for t in request.topics])
