"""The controller's requests (``broker.controller.requests``) as wire messages, and back.

Versions sent (Kafka 2.4-2.7's, flexible): LeaderAndIsr v4, UpdateMetadata v6, StopReplica v3.
Endpoints are the brokers' registered ones; the security protocol ids are Kafka's
(``SecurityProtocol``: PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3).
"""

from __future__ import annotations

from broker.cluster.layout import BrokerRegistration
from broker.controller.requests import LeaderAndIsr, StopReplica, UpdateMetadata
from broker.wire import ApiKey, LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

__all__ = ["to_wire", "LEADER_AND_ISR_VERSION", "UPDATE_METADATA_VERSION", "STOP_REPLICA_VERSION",
           "SECURITY_PROTOCOL_IDS"]

LEADER_AND_ISR_VERSION = 4
UPDATE_METADATA_VERSION = 6
STOP_REPLICA_VERSION = 3
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

_LTopic = LeaderAndIsrRequest.LeaderAndIsrTopicState
_LPart = LeaderAndIsrRequest.LeaderAndIsrPartitionState
_LLeader = LeaderAndIsrRequest.LeaderAndIsrLiveLeader
_UTopic = UpdateMetadataRequest.UpdateMetadataTopicState
_UPart = UpdateMetadataRequest.UpdateMetadataPartitionState
_UBroker = UpdateMetadataRequest.UpdateMetadataBroker
_UEndpoint = UpdateMetadataRequest.UpdateMetadataEndpoint
_STopic = StopReplicaRequest.StopReplicaTopicState
_SPart = StopReplicaRequest.StopReplicaPartitionState


def to_wire(request, listener_name: str) -> tuple[int, int, object]:
    """(api key, version, message) for one controller request."""
    if isinstance(request, LeaderAndIsr):
        return ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, _leader_and_isr(request, listener_name)
    if isinstance(request, UpdateMetadata):
        return ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, _update_metadata(request)
    assert isinstance(request, StopReplica), request
    return ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, _stop_replica(request)


def _grouped(entries, make) -> dict[str, list]:
    topics: dict[str, list] = {}
    for entry in entries:
        topics.setdefault(entry[0][0], []).append(make(entry))
    return topics


def _leader_and_isr(request: LeaderAndIsr, listener_name: str) -> LeaderAndIsrRequest:
    def make(entry):
        (_, index), leadership, is_new = entry
        state = leadership.state
        return _LPart(partition_index=index, controller_epoch=state.controller_epoch, leader=state.leader,
                      leader_epoch=state.leader_epoch, isr=list(state.isr), zk_version=leadership.zk_version,
                      replicas=list(leadership.replicas), adding_replicas=[], removing_replicas=[],
                      is_new=is_new)

    leaders = []
    for registration in request.live_leaders:
        endpoint = _endpoint(registration, listener_name)
        if endpoint is not None:
            leaders.append(_LLeader(broker_id=registration.broker_id, host_name=endpoint.host,
                                    port=endpoint.port))
    return LeaderAndIsrRequest(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[_LTopic(topic_name=t, partition_states=ps)
                      for t, ps in _grouped(request.partitions, make).items()],
        live_leaders=leaders)


def _update_metadata(request: UpdateMetadata) -> UpdateMetadataRequest:
    def make(entry):
        (_, index), leadership, offline = entry
        state = leadership.state
        return _UPart(partition_index=index, controller_epoch=state.controller_epoch, leader=state.leader,
                      leader_epoch=state.leader_epoch, isr=list(state.isr), zk_version=leadership.zk_version,
                      replicas=list(leadership.replicas), offline_replicas=list(offline))

    brokers = [_UBroker(id=reg.broker_id, rack=reg.rack, endpoints=[
        _UEndpoint(port=e.port, host=e.host, listener=e.listener_name,
                   security_protocol=SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0))
        for e in reg.endpoints]) for reg in request.live_brokers]
    return UpdateMetadataRequest(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[_UTopic(topic_name=t, partition_states=ps)
                      for t, ps in _grouped(request.partitions, make).items()],
        live_brokers=brokers)


def _stop_replica(request: StopReplica) -> StopReplicaRequest:
    def make(entry):
        (_, index), epoch, delete = entry
        return _SPart(partition_index=index, leader_epoch=epoch, delete_partition=delete)

    return StopReplicaRequest(
        controller_id=request.controller_id, controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=[_STopic(topic_name=t, partition_states=ps)
                      for t, ps in _grouped(request.partitions, make).items()])


def _endpoint(registration: BrokerRegistration, listener_name: str):
    return next((e for e in registration.endpoints if e.listener_name == listener_name), None)
