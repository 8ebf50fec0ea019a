"""BrokerConnection against a scripted socket server: framing, correlation ids, ApiVersions
negotiation and its KIP-511 fallback, timeouts, reconnects. Responses are built by the wire codec."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from broker.client.config import ClientConfig
from broker.client.connection import CLIENT_API_VERSIONS, BrokerConnection, pick_version
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError, KafkaTimeoutError
from fake_kafka import CLOSE, FakeBroker, Raw, api_versions_response
from broker.wire import (
    SUPPORTED_API_VERSIONS,
    ApiKey,
    ErrorCode,
    MetadataResponse,
    encode_response,
    with_size_prefix,
)

FAST = ClientConfig(request_timeout_ms=2000, connect_timeout_ms=2000)


def metadata_response(cluster_id: str = "c") -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id=cluster_id, controller_id=1, topics=[],
    )


class Script:
    """A handler: ApiVersions per ``api_versions`` (a function of the version asked), everything
    else from ``replies`` (a function of header and request)."""

    def __init__(self, replies=None, api_versions=None):
        self.replies = replies or (lambda header, request: metadata_response())
        self.api_versions = api_versions or (lambda version: api_versions_response())

    def __call__(self, header, request):
        if header.api_key == ApiKey.API_VERSIONS:
            return self.api_versions(header.api_version)
        return self.replies(header, request)


@pytest.fixture
def broker_factory():
    brokers = []

    def make(handler) -> FakeBroker:
        broker = FakeBroker(handler)
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        broker.close()
        assert broker.handler_errors == []


def connect(broker: FakeBroker, config: ClientConfig = FAST) -> BrokerConnection:
    conn = BrokerConnection(broker.host, broker.port, "test-client", config)
    conn.connect()
    return conn


def versions_asked(broker: FakeBroker) -> list[int]:
    return [h.api_version for h, _ in broker.requests_for(ApiKey.API_VERSIONS)]


# ------------------------------------------------------------------ version choice


@pytest.mark.parametrize("client, broker, expected", [
    ((0, 12), (0, 9), 9),
    ((4, 12), (0, 3), None),
    ((1, 7), (5, 10), 7),
    ((3, 3), (3, 3), 3),
    ((0, 4), None, None),
])
def test_pick_version_is_the_highest_common_version(client, broker, expected):
    assert pick_version(client, broker) == expected


def test_client_ranges_require_record_batch_v2_capable_versions():
    assert CLIENT_API_VERSIONS[ApiKey.PRODUCE][0] == 3
    assert CLIENT_API_VERSIONS[ApiKey.FETCH] == (4, 12)
    assert CLIENT_API_VERSIONS[ApiKey.METADATA][0] >= 1


# ------------------------------------------------------------------ negotiation


def test_negotiates_with_api_versions_v3_and_picks_common_versions(broker_factory):
    advertised = dict(SUPPORTED_API_VERSIONS)
    advertised[ApiKey.METADATA] = (0, 5)
    advertised[ApiKey.FETCH] = (0, 3)
    broker = broker_factory(Script(api_versions=lambda v: api_versions_response(advertised)))
    conn = connect(broker)
    (header, request), = broker.requests_for(ApiKey.API_VERSIONS)
    assert header.api_version == 3 and header.client_id == "test-client"
    assert request.client_software_name == "pylog-client"
    assert conn.api_versions_version == 3
    assert conn.version_for(ApiKey.METADATA) == 5
    assert conn.version_for(ApiKey.PRODUCE) == 12
    with pytest.raises(KafkaError) as info:
        conn.version_for(ApiKey.FETCH)  # broker 0-3, client needs 4+
    assert info.value.code == ErrorCode.UNSUPPORTED_VERSION and "Fetch" in str(info.value)
    assert conn.version_for(ApiKey.METADATA, max_version=3) == 3


def test_falls_back_to_the_brokers_api_versions_max_on_error_35(broker_factory):
    def api_versions(version):
        if version > 2:  # an old broker: KIP-511 error answer with its own range for key 18
            return api_versions_response({ApiKey.API_VERSIONS: (0, 2)}, ErrorCode.UNSUPPORTED_VERSION)
        return api_versions_response()

    broker = broker_factory(Script(api_versions=api_versions))
    conn = connect(broker)
    assert versions_asked(broker) == [3, 2]
    assert conn.api_versions_version == 2
    assert conn.version_for(ApiKey.METADATA) == 12
    assert conn.request(ApiKey.METADATA, {"topics": None}).cluster_id == "c"


def test_falls_back_to_v0_when_the_error_gives_no_range(broker_factory):
    def api_versions(version):
        if version > 0:
            return api_versions_response({}, ErrorCode.UNSUPPORTED_VERSION)
        return api_versions_response()

    broker = broker_factory(Script(api_versions=api_versions))
    connect(broker)
    assert versions_asked(broker) == [3, 0]


def test_other_api_versions_errors_fail_the_connection(broker_factory):
    broker = broker_factory(Script(api_versions=lambda v: api_versions_response(
        {}, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)))
    conn = BrokerConnection(broker.host, broker.port, "c", FAST)
    with pytest.raises(KafkaError) as info:
        conn.connect()
    assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert not conn.connected
    assert versions_asked(broker) == [3]


def test_connection_refused_is_a_retriable_connection_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connect is refused
        conn = BrokerConnection("127.0.0.1", port, "c", FAST)
        with pytest.raises(KafkaConnectionError) as info:
            conn.connect()
    assert info.value.retriable and info.value.code == ErrorCode.NETWORK_EXCEPTION
    assert f"127.0.0.1:{port}" in str(info.value)


# ------------------------------------------------------------------ framing and correlation


def test_pipelined_requests_come_back_in_order(broker_factory):
    counter = iter(range(100))
    broker = broker_factory(Script(replies=lambda h, r: metadata_response(f"c{next(counter)}")))
    conn = connect(broker)
    ids = [conn.send(ApiKey.METADATA, {"topics": None}) for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert conn.in_flight_count == 3
    assert [conn.receive().cluster_id for _ in range(3)] == ["c0", "c1", "c2"]
    assert conn.in_flight_count == 0


def test_correlation_id_mismatch_closes_the_connection(broker_factory):
    def reply(header, request):
        wrong = encode_response(header.api_key, header.api_version, header.correlation_id + 1, metadata_response())
        return Raw(with_size_prefix(wrong))

    broker = broker_factory(Script(replies=reply))
    conn = connect(broker)
    with pytest.raises(KafkaProtocolError) as info:
        conn.request(ApiKey.METADATA, {"topics": None})
    assert "correlation id" in str(info.value) and not info.value.retriable
    assert not conn.connected and conn.in_flight_count == 0


@pytest.mark.parametrize("size", [1_000_000, -5, 2])
def test_response_frame_size_outside_the_limit_is_refused_before_reading_it(broker_factory, size):
    broker = broker_factory(Script(replies=lambda h, r: Raw(struct.pack(">i", size) + b"\x00" * 16)))
    conn = connect(broker, FAST.with_(response_bytes_max=64 * 1024))
    with pytest.raises(KafkaProtocolError) as info:
        conn.request(ApiKey.METADATA, {"topics": None})
    assert "response_bytes_max" in str(info.value) and str(size) in str(info.value)
    assert not conn.connected


@pytest.mark.parametrize("brokers", [1, 8000])  # read ahead; a body past its reach goes straight into its buffer
def test_a_frame_just_under_the_limit_is_accepted(broker_factory, brokers):
    body = metadata_response("x" * 1000)
    body.brokers = body.brokers * brokers
    broker = broker_factory(Script(replies=lambda h, r: body))
    frame_size = len(encode_response(ApiKey.METADATA, 12, 0, body))
    conn = connect(broker, FAST.with_(response_bytes_max=frame_size))
    answer = conn.request(ApiKey.METADATA, {"topics": None})
    assert answer.cluster_id == "x" * 1000 and len(answer.brokers) == brokers and (brokers == 1 or frame_size > 64 * 1024)


def test_unparsable_response_body_is_a_protocol_error(broker_factory):
    def reply(header, request):
        good = encode_response(header.api_key, header.api_version, header.correlation_id, metadata_response())
        return Raw(with_size_prefix(good[:-3]))

    broker = broker_factory(Script(replies=reply))
    conn = connect(broker)
    with pytest.raises(KafkaProtocolError) as info:
        conn.request(ApiKey.METADATA, {"topics": None})
    assert "does not parse" in str(info.value)
    assert not conn.connected


def test_no_response_within_the_request_timeout(broker_factory):
    broker = broker_factory(Script(replies=lambda h, r: None))
    conn = connect(broker, FAST.with_(request_timeout_ms=200))
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as info:
        conn.request(ApiKey.METADATA, {"topics": None})
    assert 0.15 < time.monotonic() - started < 2.0
    assert info.value.retriable and info.value.code == ErrorCode.REQUEST_TIMED_OUT
    assert not conn.connected


def test_broker_closing_the_connection_fails_the_request_and_the_next_one_reconnects(broker_factory):
    answers = iter([CLOSE, metadata_response("again")])
    broker = broker_factory(Script(replies=lambda h, r: next(answers)))
    conn = connect(broker)
    with pytest.raises(KafkaConnectionError) as info:
        conn.request(ApiKey.METADATA, {"topics": None})
    assert info.value.retriable and "closed by the broker" in str(info.value)
    assert conn.request(ApiKey.METADATA, {"topics": None}).cluster_id == "again"
    assert versions_asked(broker) == [3, 3]  # negotiated again on the new socket


def test_in_flight_requests_are_bounded(broker_factory):
    broker = broker_factory(Script())
    conn = connect(broker, FAST.with_(inflight_requests_max=2))
    conn.send(ApiKey.METADATA, {"topics": None})
    conn.send(ApiKey.METADATA, {"topics": None})
    with pytest.raises(AssertionError):
        conn.send(ApiKey.METADATA, {"topics": None})
    assert conn.receive().cluster_id == "c" and conn.receive().cluster_id == "c"


def test_requests_without_a_response_are_not_awaited(broker_factory):
    broker = broker_factory(Script(replies=lambda h, r: None))
    conn = connect(broker)
    conn.send(ApiKey.METADATA, {"topics": None}, expect_response=False)
    assert conn.in_flight_count == 0


# ------------------------------------------------------------------ non-blocking socket I/O


def _big_metadata_request(megabytes: int) -> dict:
    """A Metadata request of about ``megabytes`` MiB: far more than the socket buffers hold,
    so it goes out in several partial non-blocking sends."""
    return {"topics": [{"name": f"{i:08d}" + "t" * 1016} for i in range(megabytes * 1024)]}


def test_a_request_larger_than_the_socket_buffers_goes_out_whole_to_a_slow_reader(broker_factory):
    def slow_first(header, request):
        if len(broker.requests_for(ApiKey.METADATA)) == 1:
            time.sleep(0.3)  # reads nothing meanwhile: the client's next send fills the buffers
        return metadata_response(str(len(request.topics or ())))

    broker = broker_factory(Script(replies=slow_first))
    conn = connect(broker)
    conn.send(ApiKey.METADATA, {"topics": None})
    conn.send(ApiKey.METADATA, _big_metadata_request(8))
    assert conn.receive().cluster_id == "0"
    assert conn.receive().cluster_id == str(8 * 1024)
    (_, request) = broker.requests_for(ApiKey.METADATA)[1]
    assert [t.name[:8] for t in request.topics] == [f"{i:08d}" for i in range(8 * 1024)]


def test_a_send_that_cannot_finish_within_the_request_timeout_fails_and_closes(broker_factory):
    broker = broker_factory(Script(replies=lambda h, r: time.sleep(1.5)))  # stops reading, never answers
    conn = connect(broker, FAST.with_(request_timeout_ms=300))
    conn.send(ApiKey.METADATA, {"topics": None})
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError) as info:
        conn.send(ApiKey.METADATA, _big_metadata_request(16))
    assert 0.25 < time.monotonic() - started < 1.5
    assert "sending a request timed out" in str(info.value)
    assert not conn.connected


def test_a_response_split_across_reads_is_reassembled(broker_factory):
    def trickle(header, request):
        sock = next(iter(broker._sockets))
        frame = with_size_prefix(encode_response(ApiKey.METADATA, header.api_version, header.correlation_id,
                                                 metadata_response("split")))
        for i in range(0, len(frame), 7):  # the client's reads find a few bytes at a time
            sock.sendall(frame[i:i + 7])
            time.sleep(0.001)
        return None

    broker = broker_factory(Script(replies=trickle))
    conn = connect(broker)
    assert conn.request(ApiKey.METADATA, {"topics": None}).cluster_id == "split"


def test_gather_keeps_record_sets_uncopied_and_joins_the_small_pieces():
    """A Produce's record sets go to ``sendmsg`` as the caller's own buffers; the small header
    pieces around them are joined; the frame is exactly size prefix + chunks either way."""
    from broker.client.connection import _GATHER_BYTES_MIN, _GATHER_PARTS_MAX, _gather

    big = memoryview(bytearray(b"r" * _GATHER_BYTES_MIN))
    other = bytearray(b"s" * (_GATHER_BYTES_MIN + 5))
    chunks = [b"head", b"\x00\x01", big, b"mid", other, b"tail"]
    parts = _gather(chunks)
    frame = b"".join(bytes(p) for p in parts)
    body = b"".join(bytes(c) for c in chunks)
    assert frame == struct.pack(">i", len(body)) + body
    assert parts[1] is big and parts[3] is other  # not copied
    assert len(parts) == 5
    small = [b"a", b"bc"]
    assert _gather(small) == [struct.pack(">i", 3) + b"abc"]  # one send, one buffer
    many = [b"x", big] * (_GATHER_PARTS_MAX // 2 + 1)
    joined = _gather(many)
    assert len(joined) == 1 and bytes(joined[0])[4:] == b"".join(bytes(c) for c in many)
