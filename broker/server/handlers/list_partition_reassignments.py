"""ListPartitionReassignments (key 46), v0: the reassignments in progress (KIP-455).

The controller lists the reassignments in progress (AlterPartitionReassignments,
``broker.controller.reassignment``): all, or those asked (nothing for unknown or idle ones). As
in Kafka's ZooKeeper mode, only the controller answers; another broker says NOT_CONTROLLER and
the admin client asks the controller named in Metadata.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, ListPartitionReassignmentsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
_Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_Ongoing = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


async def handle(ctx: BrokerContext, header, request) -> ListPartitionReassignmentsResponse:
    ongoing = ctx.controller.reassignments() if ctx.controller.active else None
    if ongoing is None:
        return error_response(header, request, ErrorCode.NOT_CONTROLLER)
    wanted = None if request.topics is None else {(t.name, p) for t in request.topics for p in t.partition_indexes}
    topics: dict[str, list] = {}
    for (topic, index), (target, original) in sorted(ongoing.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        topics.setdefault(topic, []).append(_Ongoing(
            partition_index=index, replicas=list(dict.fromkeys([*target, *original])),
            adding_replicas=[r for r in target if r not in original],
            removing_replicas=[r for r in original if r not in target]))
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                              topics=[_Topic(name=n, partitions=p) for n, p in topics.items()])


def error_response(header, request, error_code: int) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=error_code,
                                              error_message=ErrorCode(error_code).message, topics=[])
