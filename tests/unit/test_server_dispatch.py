"""The dispatcher: what the broker answers to versions and keys it does not serve (reference 1.3,
pitfalls 8.3/8.4), byte for byte where Kafka fixes the bytes."""

from __future__ import annotations

import struct

import pytest
from test_server_harness import Harness, batch, run

from broker.server.network import CloseConnection
from broker.wire.apis import API_SPECS
from broker.wire import (
    SUPPORTED_API_VERSIONS,
    ApiKey,
    ErrorCode,
    decode_response,
    encode_request,
    encode_request_header,
)


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    h.add_topic("events", {0: [1]})
    yield h
    h.close()


def raw_request(api_key: int, version: int, correlation_id: int, body: bytes, flexible: bool) -> bytes:
    header = struct.pack(">hhi", api_key, version, correlation_id) + struct.pack(">h", 4) + b"test"
    return header + (b"\x00" if flexible else b"") + body


def answer(h: Harness, frame: bytes) -> bytes:
    chunks = run(h.dispatcher.handle(frame))
    return b"".join(bytes(c) for c in chunks)


@pytest.mark.parametrize("version", [5, 9, 0x7FFF])
def test_api_versions_of_an_unknown_version_gets_the_kip511_v0_body(harness, version):
    """v0 body: error 35, an array (int32 count) holding key 18's range; header v0, no tags."""
    frame = raw_request(18, version, 77, b"\x05pylog\x040.1\x00", flexible=True)
    low, high = SUPPORTED_API_VERSIONS[ApiKey.API_VERSIONS]
    body = struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, low, high)
    expected = struct.pack(">ii", 4 + len(body), 77) + body
    assert answer(harness, frame) == expected


@pytest.mark.parametrize("version", range(5))
def test_api_versions_lists_every_served_api(harness, version):
    response = run(harness.call(18, version, {"client_software_name": "x", "client_software_version": "1"}))
    assert response.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == {
        int(key): value for key, value in SUPPORTED_API_VERSIONS.items()}
    assert {0, 1, 2, 3, 10, 18, 19, 22, 23} <= {k.api_key for k in response.api_keys}


@pytest.mark.parametrize("name, version, valid", [
    ("librdkafka", "2.16.0", True), ("a.b-c", "1", True), ("x", "1", True),
    ("bad name!", "1", False), ("", "", False), ("ok", "1.0-rc!", False), ("-lead", "1", False),
    ("trail.", "1", False), ("ok", "1+local", False),
])
def test_api_versions_v3_refuses_software_names_outside_kip511(harness, name, version, valid):
    """Kafka's ApiVersionsRequest.isValid: INVALID_REQUEST with no api keys (tests/peer)."""
    for api_version in (3, 4):
        response = run(harness.call(18, api_version, {"client_software_name": name,
                                                      "client_software_version": version}))
        expected = (ErrorCode.NONE, True) if valid else (ErrorCode.INVALID_REQUEST, False)
        assert (response.error_code, bool(response.api_keys)) == expected
    assert run(harness.call(18, 2, {})).error_code == ErrorCode.NONE  # v0-2 carry no names


@pytest.mark.parametrize("api_key, version, request_body, check", [
    (0, 2, {"acks": 1, "timeout_ms": 100, "topic_data": [{"name": "events", "partition_data": [
        {"index": 0, "records": None}]}]},
     lambda r: r.responses[0].partition_responses[0].error_code),
    (1, 3, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "topics": [{"topic": "events", "partitions": [
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 100}]}]},
     lambda r: r.responses[0].partitions[0].error_code),
    (23, 1, {"topics": [{"topic": "events", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
     lambda r: r.topics[0].partitions[0].error_code),
])
def test_parsed_but_unserved_versions_get_unsupported_version_at_that_version(
        harness, api_key, version, request_body, check):
    response = run(harness.call(api_key, version, request_body))
    assert check(response) == ErrorCode.UNSUPPORTED_VERSION
    assert harness.replicas.get("events", 0).log.log_end_offset == 0


def test_acks_zero_produce_at_an_unserved_version_closes(harness):
    frame = encode_request(0, 1, 5, "test", {"acks": 0, "timeout_ms": 1, "topic_data": []})
    with pytest.raises(CloseConnection):
        run(harness.dispatcher.handle(frame))


@pytest.mark.parametrize("frame", [
    pytest.param(raw_request(1, 13, 1, b"", flexible=True), id="fetch-v13-cannot-be-parsed"),
    pytest.param(raw_request(0, 11, 1, b"", flexible=True), id="produce-v11-cannot-be-parsed"),
    pytest.param(raw_request(57, 0, 1, b"", flexible=False), id="unknown-api-key-update-features"),
    pytest.param(raw_request(11, 0, 1, b"", flexible=False), id="malformed-joingroup-body"),
    pytest.param(raw_request(999, 0, 1, b"", flexible=False), id="unknown-api-key-999"),
    pytest.param(raw_request(3, 1, 1, b"\x00\x00", flexible=False), id="malformed-metadata-body"),
    pytest.param(raw_request(0, 9, 1, b"\x00\x00\x01", flexible=True), id="malformed-produce-body"),
    pytest.param(b"\x00\x03", id="truncated-header"),
])
def test_requests_that_cannot_be_answered_close_the_connection(harness, frame):
    with pytest.raises(CloseConnection):
        run(harness.dispatcher.handle(frame))


def test_trailing_bytes_are_ignored_as_kafka_does(harness):
    """librdkafka 2.16's all-topics Metadata v12: a 4-byte zero array-count placeholder, i.e. a
    compact null array and three stray bytes, then its own fields (rd_kafka_MetadataRequest0)."""
    frame = encode_request_header(3, 12, 9, "rdkafka") + bytes.fromhex("00000000010000")
    data = answer(harness, frame)
    correlation, response = decode_response(3, 12, data[4:])
    assert correlation == 9 and [t.name for t in response.topics] == ["events"]


def test_a_produce_round_trip_through_the_dispatcher(harness):
    response = run(harness.call(0, 9, {"acks": -1, "timeout_ms": 100, "topic_data": [
        {"name": "events", "partition_data": [{"index": 0, "records": batch(2)}]}]}))
    part = response.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset, part.log_append_time_ms) == (0, 0, -1)


# Issue 15: the transaction specs land before their handlers (the txn shell advertises them);
# until then the dispatcher closes the connection for them as for an unknown key.
AWAITING_HANDLERS = {ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
                     ApiKey.WRITE_TXN_MARKERS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_PRODUCERS,
                     ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS}


def test_every_parsed_key_is_served():
    """The group APIs (issue 14) parsed before their handlers existed, and the dispatcher closed
    the connection for them as for an unknown key; every key the codec parses has a handler but
    the issue-15 ones still awaiting theirs."""
    assert sorted(set(API_SPECS) - set(SUPPORTED_API_VERSIONS) - AWAITING_HANDLERS) == []


@pytest.mark.parametrize("served_versions", [True, False], ids=["advertised", "not-advertised"])
def test_a_parsed_key_without_a_handler_closes_like_an_unknown_key(harness, monkeypatch, served_versions):
    """Every parsed key has a handler today; this keeps the dispatcher's answer for one that
    does not (an API whose spec lands before its handler, as the group APIs did in issue 14):
    close the connection as for an unknown key, never a KeyError in the dispatcher."""
    from broker.server import dispatch

    key = ApiKey.JOIN_GROUP
    monkeypatch.setattr(dispatch, "HANDLERS", {k: m for k, m in dispatch.HANDLERS.items() if k != key})
    if not served_versions:
        monkeypatch.setattr(dispatch, "SERVED_API_VERSIONS",
                            {k: v for k, v in dispatch.SERVED_API_VERSIONS.items() if k != key})
    spec = API_SPECS[key]
    for version in (spec.valid.low, spec.valid.high):
        frame = encode_request(key, version, 1, "test", spec.request_class())
        with pytest.raises(CloseConnection, match="not served"):
            run(harness.dispatcher.handle(frame))
