"""DescribeCluster (key 60), v0-2: the cluster id, the controller and the live brokers (KIP-700).

The same brokers as Metadata's list (live registrations with an endpoint on this listener). The
controller is the real one from ``/controller`` (ZooKeeper mode: Kafka 2.8-3.x brokers answered
the same way; a KRaft broker answers a random live broker). Only the broker endpoint type is
served: EndpointType 2 (controllers, KIP-919) is MISMATCHED_ENDPOINT_TYPE as a Kafka broker
answers it, any other value UNSUPPORTED_ENDPOINT_TYPE. pylog does not fence brokers (a broker
is live while its ZooKeeper registration exists), so ``is_fenced`` is always false and
``include_fenced_brokers`` changes nothing.
"""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, DescribeClusterResponse, ErrorCode
from broker.wire.apis.describe_cluster import ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_CLUSTER
_Broker = DescribeClusterResponse.DescribeClusterBroker


async def handle(ctx: BrokerContext, header, request) -> DescribeClusterResponse:
    if request.endpoint_type != ENDPOINT_TYPE_BROKER:
        if request.endpoint_type == ENDPOINT_TYPE_CONTROLLER:
            return _error(request, ErrorCode.MISMATCHED_ENDPOINT_TYPE,
                          "The request was sent to an endpoint of type BROKER, "
                          "but we wanted an endpoint of type CONTROLLER")
        return _error(request, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                      f"Unsupported endpoint type {request.endpoint_type}")
    snapshot = ctx.metadata.snapshot
    brokers = []
    for broker_id, registration in sorted(snapshot.brokers.items()):
        endpoint = snapshot.endpoint(broker_id, ctx.client_listener_name)
        if endpoint is not None:
            brokers.append(_Broker(broker_id=broker_id, host=endpoint.host, port=endpoint.port,
                                   rack=registration.rack, is_fenced=False))
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        endpoint_type=ENDPOINT_TYPE_BROKER, cluster_id=snapshot.cluster_id or "",
        controller_id=snapshot.controller_id, brokers=brokers,
    )


def _error(request, error_code: int, message: str) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=error_code, error_message=message)


def error_response(header, request, error_code: int) -> DescribeClusterResponse:
    return _error(request, error_code, ErrorCode(error_code).message)
