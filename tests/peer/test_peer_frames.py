"""Versions a broker does not serve and frames that do not parse: what Apache Kafka and pylog do
with the connection (answer, close, or wait for more bytes), and that each keeps serving a client
connected before the bad input and a client connecting after it.
"""

from __future__ import annotations

import struct
import time

import pytest
from peer_support import unique_topic
from wire_probe import answer_or_close, batch_of, connect, produce_partition, produce_request, serves_after

from broker.records.header import CRC_OFFSET
from broker.wire import (
    ApiKey,
    ApiVersionsRequest,
    ErrorCode,
    FetchRequest,
    MetadataRequest,
    encode_request,
    with_size_prefix,
)

SOCKET_REQUEST_MAX_BYTES = 104_857_600  # socket.request.max.bytes: Kafka's default and pylog's


def header_only_frame(api_key: int, version: int, body: bytes = b"", flexible: bool = True) -> bytes:
    """A frame with a request header v1/v2 (client id "x") for a key or version no codec may know."""
    header = struct.pack(">hhih", api_key, version, 7, 1) + b"x" + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def request_frame(api_key: int, version: int, request) -> bytes:
    return with_size_prefix(encode_request(api_key, version, 7, "peer-tier", request))


def truncated(api_key: int, version: int, request, cut: int) -> bytes:
    """A whole frame holding only the first ``cut`` bytes of the request (header included)."""
    return with_size_prefix(encode_request(api_key, version, 7, "peer-tier", request)[:cut])


def with_bad_crc(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[CRC_OFFSET] ^= 0xFF
    return bytes(damaged)


# Closed with no answer by both brokers.
CLOSED = {
    "garbage body (api key -8531)": lambda: b"\x00\x00\x00\x0c" + b"\xde\xad\xbe\xef" * 3,
    "unknown api key 999": lambda: header_only_frame(999, 0, bytes(8), flexible=False),
    "Metadata v99": lambda: header_only_frame(ApiKey.METADATA, 99, b"\x00\x00"),
    "Fetch v99": lambda: header_only_frame(ApiKey.FETCH, 99, bytes(32)),
    "truncated Produce v9 body": lambda: truncated(ApiKey.PRODUCE, 9, produce_request("t", batch_of([b"v"])), 30),
    "truncated Metadata v12 body": lambda: truncated(ApiKey.METADATA, 12, MetadataRequest(topics=None), -2),
    "length over socket.request.max.bytes": lambda: struct.pack(">i", SOCKET_REQUEST_MAX_BYTES + 1) + bytes(64),
    "2 GiB length": lambda: b"\x7f\xff\xff\xff" + bytes(64),
    "negative length": lambda: b"\xff\xff\xff\xfe" + bytes(64),
    "zero length": lambda: b"\x00\x00\x00\x00",
    "HTTP request": lambda: b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
}


@pytest.fixture
def bystanders(peers):
    """A connection per broker opened before the bad input; each must still be answered."""
    connections = {peer.name: connect(peer) for peer in peers}
    yield connections
    for connection in connections.values():
        connection.close()


def bystander_answered(connection) -> bool:
    response = connection.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="bystander", client_software_version="1"))
    return response.error_code == ErrorCode.NONE


def what_happens(peer, data: bytes, wait_s: float = 5.0) -> str:
    with connect(peer) as raw:
        raw.send_bytes(data)
        return answer_or_close(raw, wait_s)


@pytest.mark.parametrize("case", CLOSED)
def test_unparseable_input_closes_the_connection_on_both(peers, bystanders, case):
    data = CLOSED[case]()
    seen = {peer.name: what_happens(peer, data) for peer in peers}
    assert seen == {"kafka": "closed", "pylog": "closed"}
    for peer in peers:
        assert bystander_answered(bystanders[peer.name]), peer.name
        assert serves_after(peer), peer.name


def test_a_half_frame_is_waited_for_on_both_while_others_are_served(peers, bystanders):
    for peer in peers:
        with connect(peer) as hanging:
            hanging.send_bytes(b"\x00\x00\x10\x00" + b"\x00\x00\x00\x09")  # 4 KiB announced, 4 sent
            assert answer_or_close(hanging, 0.5) == "silent", peer.name
            assert bystander_answered(bystanders[peer.name]), peer.name
            assert serves_after(peer), peer.name


@pytest.mark.parametrize("version", [5, 9, 127])
def test_api_versions_too_new_is_answered_alike_and_the_connection_stays(peers, version):
    """KIP-511: a v0 body with UNSUPPORTED_VERSION and the ApiVersions range, then the client
    retries on the same connection."""
    body = b"\x02a\x021\x00"  # client software name and version (compact strings), no tags
    seen = {}
    for peer in peers:
        with connect(peer) as raw:
            raw.send_bytes(header_only_frame(ApiKey.API_VERSIONS, version, body))
            frame = raw.receive_frame()
            seen[peer.name] = frame[4:]  # without the correlation id
            assert bystander_answered(raw), f"{peer.name}: the retry on the same connection"
    assert seen["kafka"] == seen["pylog"], "byte for byte"
    assert seen["pylog"][:2] == struct.pack(">h", ErrorCode.UNSUPPORTED_VERSION)


# Intended difference: for a version pylog's codec parses but does not serve (Produce v0-2,
# Fetch v0-3; ListOffsets v0 is served, Burrow 1.2.1 in Debian sends it), pylog answers
# UNSUPPORTED_VERSION (35) in every slot, an error the client can report; Kafka 4 closes the
# connection, as it no longer parses these versions (KIP-896) even where it still advertises them
# (Produce from v0). broker/server/dispatch.py.
NOT_SERVED = {
    "Produce v2": lambda topic: request_frame(ApiKey.PRODUCE, 2, produce_request(topic, batch_of([b"v"]))),
    "Fetch v3": lambda topic: request_frame(ApiKey.FETCH, 3, FetchRequest(
        max_wait_ms=0, min_bytes=1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])],
        forgotten_topics_data=[])),
}


@pytest.mark.parametrize("case", NOT_SERVED)
def test_removed_versions_close_on_kafka_and_are_answered_unsupported_by_pylog(peers, bystanders, case):
    seen = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("old-version"))
        seen[peer.name] = what_happens(peer, NOT_SERVED[case](topic))
        assert bystander_answered(bystanders[peer.name]) and serves_after(peer), peer.name
    assert seen == {"kafka": "closed", "pylog": "answered"}


def wait_until_writable(peer, topic: str, timeout_s: float = 15.0) -> None:
    """Kafka answers CreateTopics before its broker leads the new partition; produce with acks=1
    until a batch is accepted."""
    deadline = time.monotonic() + timeout_s
    with connect(peer) as raw:
        while True:
            answer = produce_partition(raw, 9, produce_request(topic, batch_of([b"ready?"]), acks=1))
            if answer.error_code == ErrorCode.NONE:
                return
            assert time.monotonic() < deadline, ErrorCode(answer.error_code).name
            time.sleep(0.05)  # polling a condition with a deadline: no notice comes


def test_a_failed_acks_0_produce_closes_the_connection_on_both(peers, bystanders):
    """acks=0 gets no answer, so a refused batch is signalled by closing; a good one is not."""
    for peer in peers:
        topic = peer.create_topic(unique_topic("acks0"))
        wait_until_writable(peer, topic)  # else the good acks=0 batch may meet a leader not ready yet
        good = request_frame(ApiKey.PRODUCE, 9, produce_request(topic, batch_of([b"fine"]), acks=0))
        bad = request_frame(ApiKey.PRODUCE, 9, produce_request(
            topic, with_bad_crc(batch_of([b"tampered"])), acks=0))
        unknown = request_frame(ApiKey.PRODUCE, 9, produce_request(
            unique_topic("acks0-missing"), batch_of([b"lost"]), acks=0))
        assert what_happens(peer, good, wait_s=0.5) == "silent", peer.name
        assert what_happens(peer, bad) == "closed", peer.name
        assert what_happens(peer, unknown) == "closed", peer.name
        assert bystander_answered(bystanders[peer.name]) and serves_after(peer), peer.name


@pytest.mark.parametrize("name, version", [("bad name!", "1"), ("", ""), ("ok", "1.0-rc!"), ("-lead", "1"),
                                           ("pylog-peer-tier", "2.16.0")])
def test_api_versions_software_names_are_checked_alike(peers, name, version):
    """KIP-511's name and version pattern: outside it, INVALID_REQUEST with no api keys; the
    connection stays usable."""
    seen = {}
    for peer in peers:
        with connect(peer) as raw:
            response = raw.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
                client_software_name=name, client_software_version=version))
            seen[peer.name] = (ErrorCode(response.error_code).name, bool(response.api_keys))
            assert bystander_answered(raw), peer.name
    assert seen["kafka"] == seen["pylog"]
