"""broker.wire.frame: headers, the server/client entry points and their documented quirks
(ApiVersions header v0 and v0 fallback, unknown keys, unsupported versions, zero-copy records,
tagged fields, trailing bytes)."""

from __future__ import annotations

import struct

import pytest

import broker.wire as wire
from broker.wire import (
    ApiKey,
    ErrorCode,
    FetchResponse,
    MalformedRequest,
    MetadataRequest,
    ProduceRequest,
    UnknownApiKey,
    UnsupportedVersion,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
)
from broker.wire.apis import API_SPECS, SUPPORTED_API_VERSIONS


def produce_request(records) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(
            name="orders",
            partition_data=[ProduceRequest.PartitionProduceData(index=3, records=records)],
        )],
    )


def fetch_response(records) -> FetchResponse:
    partition = FetchResponse.PartitionData(
        partition_index=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
        aborted_transactions=[FetchResponse.AbortedTransaction(producer_id=7, first_offset=2)],
        records=records,
    )
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="orders", partitions=[partition])])


# ------------------------------------------------------------------------------- headers


@pytest.mark.parametrize(
    "api_key, api_version, client_id, header_version, expected",
    [
        pytest.param(3, 8, "c", 1, b"\x00\x03\x00\x08\x00\x00\x00\x2a\x00\x01c", id="v1-metadata-v8"),
        pytest.param(3, 9, "c", 2, b"\x00\x03\x00\x09\x00\x00\x00\x2a\x00\x01c\x00", id="v2-metadata-v9"),
        pytest.param(3, 9, None, 2, b"\x00\x03\x00\x09\x00\x00\x00\x2a\xff\xff\x00", id="v2-null-client-id"),
        pytest.param(18, 3, "c", 2, b"\x00\x12\x00\x03\x00\x00\x00\x2a\x00\x01c\x00", id="v2-api-versions-v3"),
        pytest.param(57, 9, "c", 1, b"\x00\x39\x00\x09\x00\x00\x00\x2a\x00\x01c", id="v1-unknown-key"),
    ],
)
def test_request_header_encoding_and_decoding(api_key, api_version, client_id, header_version, expected):
    assert wire.encode_request_header(api_key, api_version, 42, client_id) == expected
    assert wire.request_header_version(api_key, api_version) == header_version
    header, offset = decode_request_header(expected + b"body")
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_key, api_version, 42, client_id)
    assert offset == len(expected)
    assert header.header_version == header_version


@pytest.mark.parametrize(
    "api_key, api_version, header_version",
    [
        (ApiKey.API_VERSIONS, 0, 0), (ApiKey.API_VERSIONS, 3, 0), (ApiKey.API_VERSIONS, 4, 0),
        (ApiKey.METADATA, 8, 0), (ApiKey.METADATA, 9, 1), (ApiKey.PRODUCE, 9, 1),
        (ApiKey.FETCH, 11, 0), (ApiKey.FETCH, 12, 1), (ApiKey.INIT_PRODUCER_ID, 2, 1),
    ],
    ids=lambda v: str(int(v)),
)
def test_response_header_version(api_key, api_version, header_version):
    assert wire.response_header_version(api_key, api_version) == header_version


def test_api_versions_v3_response_has_no_header_tag_byte():
    response = wire.ApiVersionsResponse(api_keys=[
        wire.ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(SUPPORTED_API_VERSIONS.items())
    ])
    encoded = encode_response(18, 3, 99, response)
    # correlation id, then straight to the body's error code: no tagged-field byte in between.
    assert encoded[:6] == b"\x00\x00\x00\x63\x00\x00"
    assert encoded[6] == len(SUPPORTED_API_VERSIONS) + 1  # compact array count


def test_request_header_v2_skips_unknown_header_tags():
    header = wire.encode_request_header(3, 9, 1, "")
    body = encode_request(3, 9, 1, "", MetadataRequest(topics=[]))[len(header):]
    with_tags = header[:-1] + b"\x01" + b"\x07\x02hi"  # one header tag: 7 -> "hi"
    decoded_header, offset = decode_request_header(with_tags + body)
    assert decoded_header.unknown_tags == {7: b"hi"} and offset == len(with_tags)
    _, request = decode_request(with_tags + body)
    assert request == MetadataRequest(topics=[])


# ------------------------------------------------------------- unknown keys and versions


def test_unknown_api_key_header_still_parses_and_decode_request_says_unknown():
    frame = wire.encode_request_header(57, 5, 1234, "joiner") + b"\x00\x01whatever"
    header, _ = decode_request_header(frame)
    assert (header.api_key, header.correlation_id, header.client_id) == (57, 1234, "joiner")
    with pytest.raises(UnknownApiKey) as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 1234
    assert isinstance(info.value, UnsupportedVersion)
    assert info.value.kafka_error_code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    "api_key, api_version",
    [(ApiKey.FETCH, 13), (ApiKey.API_VERSIONS, 5), (ApiKey.METADATA, 13), (ApiKey.PRODUCE, -1)],
    ids=["fetch-v13", "api-versions-v5", "metadata-v13", "produce-negative"],
)
def test_unsupported_version_carries_the_header(api_key, api_version):
    frame = wire.encode_request_header(api_key, api_version, 77, "c") + b"\x00\x00\x00"
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 77
    assert info.value.header.api_version == api_version
    spec = API_SPECS[api_key]
    assert info.value.valid == (spec.valid.low, spec.valid.high)


def test_api_versions_future_version_uses_the_flexible_header():
    """KIP-511: a v5 ApiVersions request has a v2 header; parsing it as v1 would misplace the
    body, but the server only needs the correlation id and the client software fields."""
    frame = wire.encode_request_header(18, 5, 3, "c")
    assert frame.endswith(b"\x00")
    header, offset = decode_request_header(frame + b"\x04rdk\x042.1\x00")
    assert header.header_version == 2 and offset == len(frame)


def test_unsupported_api_versions_answer_is_a_v0_body_the_client_reads_as_v0():
    answer = wire.ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[wire.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)],
    )
    encoded = encode_response(18, 0, 5, answer)
    correlation_id, decoded = decode_response(18, 3, encoded)  # we asked v3, got v0
    assert correlation_id == 5
    assert decoded.error_code == 35 and decoded.api_keys[0].max_version == 4


def test_produce_v0_parses_although_it_is_not_served():
    frame = encode_request(0, 0, 1, "old", produce_request(b"\x00" * 20))
    header, request = decode_request(frame)
    assert header.api_version == 0
    assert request.transactional_id is None  # a v3+ field: its default, not read from the wire
    assert request.topic_data[0].partition_data[0].records == b"\x00" * 20


def test_supported_versions_match_the_full_profile():
    """The reference's full profile, plus the inter-broker APIs of ZooKeeper mode (LeaderAndIsr,
    StopReplica, UpdateMetadata, ControlledShutdown) at Kafka 2.4-2.7's ranges, plus the admin
    APIs Kafka 4's Java admin client asks for (ListPartitionReassignments, DescribeCluster,
    DescribeTopicPartitions), plus the classic group APIs at Kafka 4.1's ranges (issue 14; see
    test_wire_group_apis.py), plus the transaction APIs (issue 15)."""
    assert dict(SUPPORTED_API_VERSIONS) == {
        0: (0, 12), 1: (4, 12), 2: (0, 7), 3: (0, 12), 4: (0, 4), 5: (0, 3), 6: (0, 6), 7: (1, 3),
        10: (0, 4), 18: (0, 4), 19: (0, 7), 20: (0, 6), 22: (0, 5), 23: (2, 4), 32: (0, 4),
        46: (0, 0), 60: (0, 2), 75: (0, 0),
        8: (2, 9), 9: (1, 9), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5),
        42: (0, 2), 47: (0, 0),
        # transactions (issue 15; see test_server_txn_handlers.py for the differences from Kafka 4.1)
        24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 1), 28: (0, 5), 61: (0, 0), 65: (0, 0), 66: (0, 1),
        # ACL admin (issue 17 part 2; Kafka 4.1's versions)
        29: (1, 3), 30: (1, 3), 31: (1, 3),
        # authentication (issue 17 part 1; Kafka 4.1's versions)
        17: (0, 1), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        # operations (issue 18; Kafka 4.1's versions but AlterPartitionReassignments v1)
        33: (0, 2), 44: (0, 1), 37: (0, 3), 21: (0, 2), 43: (0, 2), 35: (1, 4), 45: (0, 0),
        48: (0, 1), 49: (0, 1),  # client quotas (issue 18 item 3)
    }


# ----------------------------------------------------------------------- zero-copy records


def test_produce_records_decode_as_a_view_into_the_frame():
    records = bytes(range(200))
    frame = encode_request(0, 9, 1, "p", produce_request(records))
    _, request = decode_request(frame)
    view = request.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and view.obj is frame
    assert view == records


def test_fetch_response_chunks_keep_the_records_object_and_a_correct_size_prefix():
    records = memoryview(bytearray(b"R" * 1000))
    chunks = encode_response_chunks(1, 12, 8, fetch_response(records))
    assert any(chunk is records for chunk in chunks)
    payload = b"".join(bytes(c) for c in chunks)
    assert struct.unpack(">i", payload[:4])[0] == len(payload) - 4
    assert payload[4:] == encode_response(1, 12, 8, fetch_response(records))
    correlation_id, decoded = decode_response(1, 12, payload[4:])
    assert correlation_id == 8 and decoded == fetch_response(bytes(records))


def test_with_size_prefix_and_response_correlation_id():
    payload = encode_response(3, 1, 0x01020304, wire.MetadataResponse())
    framed = wire.with_size_prefix(payload)
    assert framed[:4] == struct.pack(">i", len(payload))
    assert wire.response_correlation_id(payload) == 0x01020304


# ---------------------------------------------------------------------------- tagged fields


def test_tagged_fields_are_written_only_when_not_default():
    plain = fetch_response(b"")
    tagged = fetch_response(b"")
    tagged.responses[0].partitions[0].current_leader = FetchResponse.LeaderIdAndEpoch(leader_id=1, leader_epoch=4)
    assert len(encode_response(1, 12, 0, tagged)) > len(encode_response(1, 12, 0, plain))
    assert encode_response(1, 11, 0, tagged) == encode_response(1, 11, 0, plain)  # not flexible
    _, decoded = decode_response(1, 12, encode_response(1, 12, 0, tagged))
    assert decoded.responses[0].partitions[0].current_leader.leader_epoch == 4
    assert decoded.responses[0].partitions[0].diverging_epoch is None


def test_unknown_tags_are_kept_and_written_back():
    frame = encode_request(3, 11, 1, "c", MetadataRequest(topics=[]))
    assert frame.endswith(b"\x00")  # the body's empty tagged-field section
    with_tags = frame[:-1] + b"\x02" + b"\x05\x03abc" + b"\x09\x00"  # tags 5 -> "abc", 9 -> ""
    _, request = decode_request(with_tags)
    assert request.unknown_tags == {5: b"abc", 9: b""}
    assert encode_request(3, 11, 1, "c", request) == with_tags


def test_a_known_tag_must_use_exactly_its_size():
    frame = encode_request(1, 12, 1, "c", wire.FetchRequest(cluster_id="x"))
    assert frame.endswith(b"\x01\x00\x02\x02x")  # 1 tag: tag 0, size 2, compact "x"
    lying = frame[:-5] + b"\x01\x00\x03\x02x\xaa"  # claims 3 bytes, the string uses 2
    with pytest.raises(MalformedRequest) as info:
        decode_request(lying)
    assert info.value.field == "FetchRequest.cluster_id"
    assert info.value.expected == "3 bytes"


# ------------------------------------------------------------ trailing bytes, dicts, errors


def test_trailing_bytes_are_rejected_unless_lenient():
    frame = encode_request(3, 1, 1, "c", MetadataRequest(topics=None)) + b"\x00"
    with pytest.raises(MalformedRequest) as info:
        decode_request(frame)
    assert info.value.header.correlation_id == 1
    _, request = decode_request(frame, strict=False)
    assert request.topics is None


def test_encode_accepts_nested_dicts():
    as_dict = {
        "responses": [{"topic": "orders", "partitions": [{"partition_index": 0, "high_watermark": 10,
                       "last_stable_offset": 10, "log_start_offset": 0,
                       "aborted_transactions": [{"producer_id": 7, "first_offset": 2}],
                       "records": b"xyz"}]}],
    }
    assert encode_response(1, 7, 3, as_dict) == encode_response(1, 7, 3, fetch_response(b"xyz"))


@pytest.mark.parametrize(
    "api_key, message, problem",
    [
        pytest.param(3, MetadataRequest(topics=None), "null in a non-nullable array", id="null-topics-v0"),
        pytest.param(3, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None)]),
                     "MetadataRequestTopic.name: null in a non-nullable string", id="null-name-v0"),
        pytest.param(0, ProduceRequest(acks=70000), "ProduceRequest.acks: 70000 does not fit int16",
                     id="acks-out-of-range"),
        pytest.param(3, FetchResponse(), "expected MetadataRequest or dict, got FetchResponse", id="wrong-class"),
    ],
)
def test_unencodable_messages_raise_encode_error_naming_the_field(api_key, message, problem):
    with pytest.raises(wire.EncodeError) as info:
        encode_request(api_key, 0, 1, "c", message)
    assert problem in str(info.value)


def test_encode_rejects_versions_outside_the_spec():
    with pytest.raises(wire.EncodeError):
        encode_response(1, 13, 0, FetchResponse())


def test_messages_fill_defaults_and_refuse_unknown_fields():
    request = wire.FetchRequest()
    assert (request.replica_id, request.max_bytes, request.session_epoch, request.topics) == (-1, 0x7FFFFFFF, -1, [])
    assert wire.FetchRequest().topics is not request.topics  # no shared mutable default
    with pytest.raises(TypeError):
        wire.FetchRequest(no_such_field=1)
    with pytest.raises(AttributeError):
        request.no_such_field = 1  # __slots__: a typo is an error, not a new attribute


def test_absent_fields_decode_to_their_defaults():
    frame = encode_request(1, 4, 1, "c", wire.FetchRequest(max_bytes=5, isolation_level=1, rack_id="r1"))
    _, request = decode_request(frame)
    assert request.isolation_level == 1 and request.max_bytes == 5
    assert request.rack_id == "" and request.session_epoch == -1  # v11+ and v7+ fields
