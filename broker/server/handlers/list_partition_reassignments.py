"""ListPartitionReassignments (key 46), v0: the reassignments in progress (KIP-455).

pylog never moves replicas (no AlterPartitionReassignments, no ``/admin/reassign_partitions``), so
no partition is ever being reassigned: the controller answers with no topics, whatever was asked
(Kafka lists only partitions with a reassignment in progress, and nothing for unknown ones). As
in Kafka's ZooKeeper mode, only the controller answers; another broker says NOT_CONTROLLER and
the admin client asks the controller named in Metadata.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, ListPartitionReassignmentsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS


async def handle(ctx: BrokerContext, header, request) -> ListPartitionReassignmentsResponse:
    if not ctx.controller.active:
        return error_response(header, request, ErrorCode.NOT_CONTROLLER)
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                              error_message=None, topics=[])


def error_response(header, request, error_code: int) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=error_code,
                                              error_message=ErrorCode(error_code).message, topics=[])
