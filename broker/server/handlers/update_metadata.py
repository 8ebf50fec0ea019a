"""UpdateMetadata (key 6), v0-6: the controller pushes partition states to the metadata cache.

Each partition state newer than the cached one (leader epoch, then znode version) replaces it,
so clients asking any broker see the new leader and ISR (Metadata). The live-broker list is
not taken from here: every broker watches ``/brokers/ids`` itself. Partitions of topics this
broker has not read yet trigger a ZooKeeper read of those topics. Fenced like LeaderAndIsr
(STALE_BROKER_EPOCH 77, STALE_CONTROLLER_EPOCH 11).
"""

from __future__ import annotations

from broker.cluster.layout import PartitionState
from broker.server.context import BrokerContext
from broker.server.metadata import PartitionView, merge_partition_states
from broker.wire import ApiKey, ErrorCode, UpdateMetadataResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.UPDATE_METADATA


def _states(request, api_version: int):
    if api_version < 5:
        return [(p.topic_name, p) for p in request.ungrouped_partition_states]
    return [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]


async def handle(ctx: BrokerContext, header, request) -> UpdateMetadataResponse:
    if 0 <= ctx.broker_epoch and 0 <= request.broker_epoch < ctx.broker_epoch:
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    replicas = ctx.replicas
    if request.controller_epoch < replicas.controller_epoch:
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
    replicas.controller_epoch = request.controller_epoch
    views = {}
    for topic, p in _states(request, header.api_version):
        try:
            state = PartitionState(p.leader, p.leader_epoch, tuple(p.isr), p.controller_epoch)
        except ValueError:
            continue  # a state that breaks the znode's rules is not cached
        views[(topic, p.partition_index)] = PartitionView(tuple(p.replicas), state, p.zk_version)
    snapshot, unknown = merge_partition_states(ctx.metadata.snapshot, request.controller_id, views)
    if snapshot is not ctx.metadata.snapshot:
        ctx.metadata.publish(snapshot)
    if unknown:
        ctx.request_metadata_refresh(topics=unknown)
    return UpdateMetadataResponse(error_code=ErrorCode.NONE)


def error_response(header, request, error_code: int) -> UpdateMetadataResponse:
    return UpdateMetadataResponse(error_code=error_code)
