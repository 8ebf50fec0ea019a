"""StopReplica (key 5), v0-3: the controller makes this broker stop fetching partitions, and
maybe delete them (topic deletion; v0-2 one flag for the request, v3 one per partition).

Fenced like LeaderAndIsr: STALE_BROKER_EPOCH (77) for a request meant for a previous
incarnation, STALE_CONTROLLER_EPOCH (11) for an older controller.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, StopReplicaResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.STOP_REPLICA
_Error = StopReplicaResponse.StopReplicaPartitionError


def _partitions(request, api_version: int) -> list[tuple[tuple[str, int], bool]]:
    if api_version == 0:
        return [((p.topic_name, p.partition_index), request.delete_partitions)
                for p in request.ungrouped_partitions]
    if api_version < 3:
        return [((t.name, index), request.delete_partitions)
                for t in request.topics for index in t.partition_indexes]
    return [((t.topic_name, p.partition_index), p.delete_partition)
            for t in request.topic_states for p in t.partition_states]


async def handle(ctx: BrokerContext, header, request) -> StopReplicaResponse:
    partitions = _partitions(request, header.api_version)
    if 0 <= ctx.broker_epoch and 0 <= request.broker_epoch < ctx.broker_epoch:
        return _every(partitions, ErrorCode.STALE_BROKER_EPOCH)
    error, errors = ctx.replicas.stop_replicas(request.controller_epoch, partitions)
    if error != ErrorCode.NONE:
        return _every(partitions, error)
    return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=[
        _Error(topic_name=topic, partition_index=index, error_code=errors.get((topic, index), 0))
        for (topic, index), _ in partitions])


def _every(partitions, error_code: int) -> StopReplicaResponse:
    return StopReplicaResponse(error_code=error_code, partition_errors=[
        _Error(topic_name=topic, partition_index=index, error_code=error_code)
        for (topic, index), _ in partitions])


def error_response(header, request, error_code: int) -> StopReplicaResponse:
    return _every(_partitions(request, header.api_version), error_code)
