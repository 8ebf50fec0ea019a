"""Hostile and broken input: every failure is a typed WireError carrying what was expected and
what was found; never IndexError, struct.error, UnicodeDecodeError or MemoryError."""

from __future__ import annotations

import struct
import tracemalloc
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import broker.wire as wire
from broker.wire import (
    CreateTopicsRequest,
    FetchRequest,
    FetchResponse,
    MalformedRequest,
    MalformedResponse,
    MetadataRequest,
    ProduceRequest,
    WireError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)


def produce(version: int) -> bytes:
    return encode_request(0, version, 11, "producer-1", ProduceRequest(
        transactional_id="txn-1", acks=-1, timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=b"\x01" * 30),
            ProduceRequest.PartitionProduceData(index=1, records=None),
        ])],
    ))


def fetch(version: int) -> bytes:
    return encode_request(1, version, 12, "consumer-1", FetchRequest(
        cluster_id="c" if version >= 12 else None, max_wait_ms=500, min_bytes=1, isolation_level=1,
        topics=[FetchRequest.FetchTopic(topic="orders", partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=42, partition_max_bytes=1 << 20),
        ])],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="old", partitions=[1, 2])],
        rack_id="rack-a",
    ))


def metadata(version: int) -> bytes:
    topic = MetadataRequest.MetadataRequestTopic(name="orders", topic_id=uuid.UUID(int=5))
    return encode_request(3, version, 13, None, MetadataRequest(topics=[topic]))


def create_topics(version: int) -> bytes:
    topic = CreateTopicsRequest.CreatableTopic(
        name="t", num_partitions=-1, replication_factor=-1,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value=None)],
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2])],
    )
    return encode_request(19, version, 14, "admin", CreateTopicsRequest(topics=[topic], validate_only=True))


def api_versions(version: int) -> bytes:
    return encode_request(18, version, 15, "rdkafka", wire.ApiVersionsRequest(
        client_software_name="librdkafka", client_software_version="2.16.0"))


FRAMES = [
    pytest.param(build(version), id=f"{build.__name__}-v{version}")
    for build, versions in [
        (produce, (3, 8, 9, 10)),
        (fetch, (4, 11, 12)),
        (metadata, (1, 9, 12)),
        (create_topics, (4, 5, 7)),
        (api_versions, (3,)),
    ]
    for version in versions
]


@pytest.mark.parametrize("frame", FRAMES)
def test_every_truncation_is_a_malformed_request(frame):
    decode_request(frame)  # the whole frame is valid
    for cut in range(len(frame)):
        with pytest.raises(MalformedRequest) as info:
            decode_request(frame[:cut])
        assert info.value.expected and info.value.found
        assert 0 <= info.value.offset <= cut


@pytest.mark.parametrize("frame", FRAMES)
def test_every_single_byte_corruption_raises_only_wire_errors(frame):
    for position in range(len(frame)):
        for replacement in (0x00, 0x7F, 0x80, 0xFF):
            corrupt = bytearray(frame)
            corrupt[position] = replacement
            try:
                decode_request(bytes(corrupt))
            except WireError:
                pass


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([values[0] for values in (p.values for p in FRAMES)]), st.data())
def test_random_corruption_raises_only_wire_errors(frame, data):
    corrupt = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 8))):
        corrupt[data.draw(st.integers(0, len(corrupt) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_request(bytes(corrupt))
    except WireError:
        pass


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_wire_errors(frame):
    try:
        decode_request(frame)
    except WireError:
        pass


def test_too_short_for_a_header():
    with pytest.raises(MalformedRequest) as info:
        decode_request(b"\x00\x03\x00")
    assert (info.value.expected, info.value.found) == ("8 bytes", "3 bytes")


def body_offset(frame: bytes) -> int:
    return wire.decode_request_header(frame)[1]


@pytest.mark.parametrize("compact", [False, True], ids=["classic", "flexible"])
def test_huge_array_count_is_refused_without_allocating(compact):
    version = 12 if compact else 11
    frame = fetch(version)
    # Fetch: replica_id, max_wait, min_bytes, max_bytes (4 each), isolation (1), session (4+4).
    count_at = body_offset(frame) + 4 * 4 + 1 + 8
    huge = wire.primitives.encode_uvarint(2**31) if compact else struct.pack(">i", 2**31 - 1)
    hostile = frame[:count_at] + huge + frame[count_at + 1 if compact else count_at + 4:]
    tracemalloc.start()
    try:
        with pytest.raises(MalformedRequest) as info:
            decode_request(hostile)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.field == "FetchRequest.topics"
    assert "items of >= " in info.value.expected and "bytes left" in info.value.found
    assert peak < 1 << 20


def test_negative_string_length_is_malformed():
    frame = metadata(1)
    # v1: topics count (4), then the first topic name's int16 length.
    at = body_offset(frame) + 4
    hostile = frame[:at] + struct.pack(">h", -7) + frame[at + 2:]
    with pytest.raises(MalformedRequest) as info:
        decode_request(hostile)
    assert info.value.field == "MetadataRequestTopic.name" and info.value.found == "-7"


def test_null_in_a_non_nullable_string_is_malformed():
    frame = metadata(9)  # v9: topic names are not nullable until v10
    at = body_offset(frame) + 1  # after the compact topics count
    hostile = frame[:at] + b"\x00" + frame[at + 7:]  # compact null instead of "orders"
    with pytest.raises(MalformedRequest) as info:
        decode_request(hostile)
    assert info.value.field == "MetadataRequestTopic.name"
    assert "not nullable" in info.value.expected


def test_overlong_varint_length_is_malformed():
    frame = metadata(9)
    at = body_offset(frame)
    hostile = frame[:at] + b"\xff\xff\xff\xff\xff\x01" + frame[at + 1:]
    with pytest.raises(MalformedRequest) as info:
        decode_request(hostile)
    assert "at most 5 bytes" in info.value.expected


def test_invalid_utf8_is_malformed():
    frame = api_versions(3)
    name_at = frame.index(b"librdkafka")
    hostile = frame[:name_at] + b"\xff" + frame[name_at + 1:]
    with pytest.raises(MalformedRequest) as info:
        decode_request(hostile)
    assert info.value.field == "ApiVersionsRequest.client_software_name"


def test_tagged_field_count_larger_than_the_bytes_left_is_malformed():
    frame = metadata(12)
    hostile = frame[:-1] + b"\x7f"  # 127 tagged fields announced, none present
    with pytest.raises(MalformedRequest) as info:
        decode_request(hostile)
    assert info.value.field == "MetadataRequest.<tagged fields>"


def test_malformed_responses_raise_malformed_response():
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, records=b"x" * 50)])])
    frame = encode_response(1, 12, 9, response)
    decode_response(1, 12, frame)
    for cut in range(len(frame)):
        with pytest.raises(MalformedResponse):
            decode_response(1, 12, frame[:cut])
