"""The inter-broker APIs of ZooKeeper mode (LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6,
ControlledShutdown 7) against their layouts in Kafka's message JSON, byte by byte.

kafka-python, the oracle of test_wire_kafka_python.py, does not implement these APIs, so the
expected bytes are written out here from the JSON (field order = wire order; flexible versions
use compact lengths, uvarint(n + 1), and end every struct with an empty tagged-field section),
and each sample is decoded back too. The controller's own conversion (``controller_requests``)
is checked to produce what the handlers read.
"""

from __future__ import annotations

import struct

import pytest

from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState
from broker.controller.requests import LeaderAndIsr, PartitionLeadership, StopReplica, UpdateMetadata
from broker.server.controller_requests import to_wire
from broker.wire import (
    ApiKey,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    UpdateMetadataRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


# -- a tiny independent encoder ---------------------------------------------------------------

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])


def string(s: str, flexible: bool = False) -> bytes:
    data = s.encode()
    return (uvarint(len(data) + 1) if flexible else i16(len(data))) + data


def array(items: list[bytes], flexible: bool = False) -> bytes:
    return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)


def ints(values, flexible=False) -> bytes:
    return array([i32(v) for v in values], flexible)


TAGS = b"\x00"


def body(api_key: int, version: int, message, flexible: bool) -> bytes:
    frame = encode_request(api_key, version, 7, None, message)
    header = 2 + 2 + 4 + 2 + (1 if flexible else 0)
    return frame[header:]


# -- LeaderAndIsr -----------------------------------------------------------------------------

def leader_and_isr(version: int):
    state = dict(partition_index=2, controller_epoch=5, leader=1, leader_epoch=9, isr=[1, 3],
                 zk_version=12, replicas=[1, 3, 4], is_new=version >= 1)  # v0 has no IsNew
    if version < 2:
        return LeaderAndIsrRequest(controller_id=1, controller_epoch=5, ungrouped_partition_states=[
            LeaderAndIsrRequest.LeaderAndIsrUngroupedPartitionState(topic_name="t", **state)],
            live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092)])
    return LeaderAndIsrRequest(controller_id=1, controller_epoch=5, broker_epoch=77, topic_states=[
        LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="t", partition_states=[
            LeaderAndIsrRequest.LeaderAndIsrPartitionState(**state)])],
        live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(broker_id=1, host_name="h", port=9092)])


def expected_leader_and_isr(version: int) -> bytes:
    f = version >= 4
    state = (i32(2) + i32(5) + i32(1) + i32(9) + ints([1, 3], f) + i32(12) + ints([1, 3, 4], f)
             + (ints([], f) + ints([], f) if version >= 3 else b"")
             + (i8(1) if version >= 1 else b"") + (TAGS if f else b""))
    leaders = array([i32(1) + string("h", f) + i32(9092) + (TAGS if f else b"")], f)
    if version < 2:
        return i32(1) + i32(5) + array([string("t") + state]) + leaders
    topics = array([string("t", f) + array([state], f) + (TAGS if f else b"")], f)
    return i32(1) + i32(5) + i64(77) + topics + leaders + (TAGS if f else b"")


@pytest.mark.parametrize("version", range(5))
def test_leader_and_isr_request_layout(version):
    message = leader_and_isr(version)
    assert body(ApiKey.LEADER_AND_ISR, version, message, version >= 4) == expected_leader_and_isr(version)
    _, decoded = decode_request(encode_request(ApiKey.LEADER_AND_ISR, version, 7, None, message))
    assert decoded == message


@pytest.mark.parametrize("version", range(5))
def test_leader_and_isr_response_layout(version):
    f = version >= 4
    response = LeaderAndIsrResponse(error_code=0, partition_errors=[
        LeaderAndIsrResponse.LeaderAndIsrPartitionError(topic_name="t", partition_index=2, error_code=11)])
    encoded = encode_response(ApiKey.LEADER_AND_ISR, version, 7, response)
    expected = i16(0) + array([string("t", f) + i32(2) + i16(11) + (TAGS if f else b"")], f) + (TAGS if f else b"")
    assert encoded.endswith(expected)
    assert decode_response(ApiKey.LEADER_AND_ISR, version, encoded)[1] == response


# -- UpdateMetadata ---------------------------------------------------------------------------

def update_metadata(version: int):
    state = dict(partition_index=0, controller_epoch=2, leader=3, leader_epoch=4, isr=[3], zk_version=6,
                 replicas=[3, 1], offline_replicas=[1])
    broker = UpdateMetadataRequest.UpdateMetadataBroker(
        id=3, v0_host="h", v0_port=9093, rack="r1",
        endpoints=[UpdateMetadataRequest.UpdateMetadataEndpoint(port=9093, host="h", listener="PLAINTEXT",
                                                                 security_protocol=0)])
    if version < 5:
        return UpdateMetadataRequest(controller_id=3, controller_epoch=2, ungrouped_partition_states=[
            UpdateMetadataRequest.UpdateMetadataUngroupedPartitionState(topic_name="t", **state)],
            live_brokers=[broker])
    return UpdateMetadataRequest(controller_id=3, controller_epoch=2, broker_epoch=9, topic_states=[
        UpdateMetadataRequest.UpdateMetadataTopicState(topic_name="t", partition_states=[
            UpdateMetadataRequest.UpdateMetadataPartitionState(**state)])], live_brokers=[broker])


def expected_update_metadata(version: int) -> bytes:
    f = version >= 6
    state = (i32(0) + i32(2) + i32(3) + i32(4) + ints([3], f) + i32(6) + ints([3, 1], f)
             + (ints([1], f) if version >= 4 else b"") + (TAGS if f else b""))
    if version == 0:
        broker = i32(3) + string("h") + i32(9093)
    else:
        endpoint = (i32(9093) + string("h", f) + (string("PLAINTEXT", f) if version >= 3 else b"")
                    + i16(0) + (TAGS if f else b""))
        broker = i32(3) + array([endpoint], f) + (string("r1", f) if version >= 2 else b"") + (TAGS if f else b"")
    brokers = array([broker], f)
    if version < 5:
        return i32(3) + i32(2) + array([string("t") + state]) + brokers
    topics = array([string("t", f) + array([state], f) + (TAGS if f else b"")], f)
    return i32(3) + i32(2) + i64(9) + topics + brokers + (TAGS if f else b"")


@pytest.mark.parametrize("version", range(7))
def test_update_metadata_request_layout(version):
    message = update_metadata(version)
    assert body(ApiKey.UPDATE_METADATA, version, message, version >= 6) == expected_update_metadata(version)
    _, decoded = decode_request(encode_request(ApiKey.UPDATE_METADATA, version, 7, None, message))
    assert decoded.controller_id == 3 and len(decoded.live_brokers) == 1


# -- StopReplica ------------------------------------------------------------------------------

def test_stop_replica_layouts():
    v0 = StopReplicaRequest(controller_id=1, controller_epoch=2, delete_partitions=True, ungrouped_partitions=[
        StopReplicaRequest.StopReplicaPartitionV0(topic_name="t", partition_index=4)])
    assert body(ApiKey.STOP_REPLICA, 0, v0, False) == i32(1) + i32(2) + i8(1) + array([string("t") + i32(4)])
    v1 = StopReplicaRequest(controller_id=1, controller_epoch=2, broker_epoch=5, delete_partitions=False, topics=[
        StopReplicaRequest.StopReplicaTopicV1(name="t", partition_indexes=[4, 5])])
    assert body(ApiKey.STOP_REPLICA, 1, v1, False) == (i32(1) + i32(2) + i64(5) + i8(0)
                                                        + array([string("t") + ints([4, 5])]))
    v3 = StopReplicaRequest(controller_id=1, controller_epoch=2, broker_epoch=5, topic_states=[
        StopReplicaRequest.StopReplicaTopicState(topic_name="t", partition_states=[
            StopReplicaRequest.StopReplicaPartitionState(partition_index=4, leader_epoch=6, delete_partition=True)])])
    partition = i32(4) + i32(6) + i8(1) + TAGS
    assert body(ApiKey.STOP_REPLICA, 3, v3, True) == (i32(1) + i32(2) + i64(5)
                                                       + array([string("t", True) + array([partition], True) + TAGS], True)
                                                       + TAGS)


# -- ControlledShutdown -----------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2, 3])
def test_controlled_shutdown_layouts(version):
    f = version >= 3
    request = ControlledShutdownRequest(broker_id=2, broker_epoch=44)
    assert body(ApiKey.CONTROLLED_SHUTDOWN, version, request, f) == (
        i32(2) + (i64(44) if version >= 2 else b"") + (TAGS if f else b""))
    response = ControlledShutdownResponse(error_code=0, remaining_partitions=[
        ControlledShutdownResponse.RemainingPartition(topic_name="t", partition_index=1)])
    encoded = encode_response(ApiKey.CONTROLLED_SHUTDOWN, version, 7, response)
    assert encoded.endswith(i16(0) + array([string("t", f) + i32(1) + (TAGS if f else b"")], f) + (TAGS if f else b""))


# -- the controller's conversion --------------------------------------------------------------

def test_controller_requests_convert_to_what_the_handlers_read():
    registration = BrokerRegistration(2, (EndPoint("PLAINTEXT", "b2", 9092, "PLAINTEXT"),), 0)
    leadership = PartitionLeadership((2, 1), PartitionState(2, 3, (2, 1), 4), 8)
    key, version, message = to_wire(LeaderAndIsr(1, 4, 55, ((("t", 0), leadership, True),), (registration,)),
                                    "PLAINTEXT")
    _, decoded = decode_request(encode_request(key, version, 1, "c", message))
    state = decoded.topic_states[0].partition_states[0]
    assert (key, version, decoded.broker_epoch) == (ApiKey.LEADER_AND_ISR, 4, 55)
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version, state.replicas, state.is_new) == \
        (2, 3, [2, 1], 8, [2, 1], True)
    assert decoded.live_leaders[0].host_name == "b2"
    key, version, message = to_wire(UpdateMetadata(1, 4, 55, ((("t", 0), leadership, (1,)),), (registration,)),
                                    "PLAINTEXT")
    _, decoded = decode_request(encode_request(key, version, 1, "c", message))
    assert decoded.topic_states[0].partition_states[0].offline_replicas == [1]
    assert decoded.live_brokers[0].endpoints[0].port == 9092
    key, version, message = to_wire(StopReplica(1, 4, 55, ((("t", 0), 3, True),)), "PLAINTEXT")
    _, decoded = decode_request(encode_request(key, version, 1, "c", message))
    assert decoded.topic_states[0].partition_states[0].delete_partition is True
