"""OffsetFetch (key 9), v1-9 served (Kafka 4 removed v0, KIP-896): a group's committed offset,
leader epoch and metadata per partition (-1 and no error where none is committed), all of the
group's partitions when the topics are null (v2+); v8+ asks for several groups at once (each
answered, or NOT_COORDINATOR, in its own entry). Decided by the group coordinator core."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers.group_common import forward
from broker.wire import ApiKey, OffsetFetchResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.OFFSET_FETCH
R = OffsetFetchResponse


async def handle(ctx: BrokerContext, header, request) -> OffsetFetchResponse:
    return await forward(ctx, header, request, error_response)


def error_response(header, request, error_code: int) -> OffsetFetchResponse:
    """Kafka's ``OffsetFetchRequest.getErrorResponse``: v8+ the error in every group; v2-7 the
    top-level error, and every partition asked for with offset -1 and the error (v0-1 have
    only the per-partition one)."""
    if header.api_version >= 8:
        return R(groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=error_code)
                         for g in request.groups])
    topics = [R.OffsetFetchResponseTopic(name=t.name, partitions=[
        R.OffsetFetchResponsePartition(partition_index=index, committed_offset=-1, committed_leader_epoch=-1,
                                       metadata="", error_code=error_code)
        for index in t.partition_indexes]) for t in request.topics or []]
    return R(topics=topics, error_code=error_code)
