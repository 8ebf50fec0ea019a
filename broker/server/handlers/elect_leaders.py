"""ElectLeaders (key 43), v0-2: preferred or unclean leader election, on the controller
(``ControllerCore.on_elect_leaders``); another broker answers NOT_CONTROLLER (top-level code,
v1+) and the client asks the controller."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ElectLeadersResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ELECT_LEADERS
_Topic = ElectLeadersResponse.ReplicaElectionResult
_Partition = ElectLeadersResponse.PartitionResult


async def handle(ctx: BrokerContext, header, request) -> ElectLeadersResponse:
    wanted = None if request.topic_partitions is None else [
        (t.topic, p) for t in request.topic_partitions for p in t.partitions]
    results = await ctx.controller.elect_leaders(request.election_type, wanted)
    if results is None:
        return error_response(header, request, ErrorCode.NOT_CONTROLLER)
    by_topic: dict[str, list] = {}
    for (topic, partition), (code, message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(_Partition(partition_id=partition, error_code=code,
                                                         error_message=message))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[
        _Topic(topic=topic, partition_result=partitions) for topic, partitions in by_topic.items()])


def error_response(header, request, error_code: int) -> ElectLeadersResponse:
    return ElectLeadersResponse(throttle_time_ms=0, error_code=error_code, replica_election_results=[
        _Topic(topic=t.topic, partition_result=[
            _Partition(partition_id=p, error_code=error_code, error_message=ErrorCode(error_code).message)
            for p in t.partitions]) for t in request.topic_partitions or []])
