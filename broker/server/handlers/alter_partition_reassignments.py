"""AlterPartitionReassignments (key 45), v0: start or cancel partition reassignments on the
controller (``broker.controller.reassignment``); another broker answers NOT_CONTROLLER. The
answer comes once phase 1 is written (the new replicas are told to fetch); completion follows
as they join the ISR (ListPartitionReassignments shows what is still in progress)."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import AlterPartitionReassignmentsResponse, ApiKey, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
_Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_Partition = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def handle(ctx: BrokerContext, header, request) -> AlterPartitionReassignmentsResponse:
    wanted = {(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
              for t in request.topics for p in t.partitions}
    results = await ctx.controller.alter_reassignments(wanted)
    if results is None:
        return error_response(header, request, ErrorCode.NOT_CONTROLLER)
    topics: dict[str, list] = {}
    for (topic, index), (code, message) in sorted(results.items()):
        topics.setdefault(topic, []).append(_Partition(partition_index=index, error_code=code, error_message=message))
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                               responses=[_Topic(name=n, partitions=p) for n, p in topics.items()])


def error_response(header, request, error_code: int) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(throttle_time_ms=0, error_code=error_code,
                                               error_message=ErrorCode(error_code).message, responses=[])
