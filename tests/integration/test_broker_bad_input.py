"""A real broker process against bad input on raw sockets (reference reliability.md section 3).

Every case sends something a broken or hostile client could send: garbage, a 2 GiB length
prefix, HTTP, a half frame left hanging, a batch with a wrong CRC, an oversize batch, acks=5, an
invalid topic name, versions we do not serve. Each checks the documented answer (an error code
with the broker's message, or a closed connection with no answer), and then that the broker is
unharmed: a connection opened *before* the bad input is still answered, a fresh producer still
writes, and reading the topic from the beginning returns exactly every record acknowledged so
far, in order (nothing lost, nothing half-appended).
"""

from __future__ import annotations

import struct
import time

import pytest
from integration_support import ClusterFactory
from raw_socket import Raw

from broker.client import AdminClient, Consumer, Producer
from broker.records import Compression, Record, encode_batch
from broker.records.header import CRC_OFFSET, HEADER_SIZE, compute_crc
from broker.wire import (
    ApiKey,
    ApiVersionsRequest,
    CreateTopicsRequest,
    ErrorCode,
    MetadataRequest,
    ProduceRequest,
    encode_request,
    with_size_prefix,
)

pytestmark = pytest.mark.integration

TOPIC = "kept"
KNOWN_RECORDS = 200
MESSAGE_MAX_BYTES = 1_048_588  # the broker's default message.max.bytes


class Ledger:
    """Every value the broker acknowledged on partition 0 of TOPIC, in offset order."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.values: list[bytes] = []

    def produce(self, values: list[bytes]) -> None:
        with Producer(self.bootstrap, acks=-1, linger_ms=0) as producer:
            deliveries = [producer.send(TOPIC, v, partition=0) for v in values]
            producer.flush()
        offsets = [d.get().offset for d in deliveries]
        assert offsets == list(range(len(self.values), len(self.values) + len(values)))
        self.values += values

    def read_all(self) -> list[bytes]:
        found: list[bytes] = []
        deadline = time.monotonic() + 20
        with Consumer(self.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(TOPIC, 0)])
            consumer.seek_to_beginning()
            while len(found) < len(self.values) and time.monotonic() < deadline:
                found += [r.value for r in consumer.poll(timeout_ms=500)]
            found += [r.value for r in consumer.poll(timeout_ms=200)]  # anything beyond is a bug
        return found


@pytest.fixture(scope="module")
def broker(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("bad-input"))
    try:
        cluster = factory.make(1)
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topics(TOPIC, partitions=1, replication_factor=1)
        ledger = Ledger(cluster.bootstrap)
        ledger.produce([b"known-%04d" % i for i in range(KNOWN_RECORDS)])
        yield cluster.brokers[0], ledger
    finally:
        factory.close()


def api_versions_ok(connection: Raw) -> bool:
    response = connection.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="bystander", client_software_version="1"))
    return response.error_code == ErrorCode.NONE and any(k.api_key == ApiKey.PRODUCE for k in response.api_keys)


@pytest.fixture
def bystander(broker):
    """A connection opened before the bad input; it must be answered throughout."""
    process, _ = broker
    connection = Raw(process.port)
    assert api_versions_ok(connection)
    try:
        yield connection
    finally:
        connection.close()


@pytest.fixture
def still_serving(broker, bystander):
    """Call after the bad input: the broker answers old and new clients and lost nothing."""
    process, ledger = broker

    def check(tag: str) -> None:
        assert process.is_running(), process.log_tail()
        assert api_versions_ok(bystander)
        metadata = bystander.call(ApiKey.METADATA, 9, MetadataRequest(topics=None))
        assert TOPIC in {t.name for t in metadata.topics}
        ledger.produce([f"after {tag} {i}".encode() for i in range(3)])
        assert ledger.read_all() == ledger.values

    return check


def produce_request(batch: bytes | None, acks: int = -1, topic: str = TOPIC) -> ProduceRequest:
    partition = ProduceRequest.PartitionProduceData(index=0, records=batch)
    return ProduceRequest(acks=acks, timeout_ms=10_000,
                          topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[partition])])


def batch_of(values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(i, now, None, v) for i, v in enumerate(values)])


def produce_error(connection: Raw, request: ProduceRequest, version: int = 9):
    response = connection.call(ApiKey.PRODUCE, version, request)
    [topic] = response.responses
    [partition] = topic.partition_responses
    return partition


# ------------------------------------------------------------------------- closed connections


UNPARSEABLE = [
    ("garbage", b"\x00\x00\x00\x0c" + b"\xde\xad\xbe\xef" * 3),  # api key -8531: unknown
    ("random tail", b"\x00\x00\x00\x40" + bytes(range(7, 71))),
    ("truncated produce body", with_size_prefix(
        encode_request(ApiKey.PRODUCE, 9, 1, "x", produce_request(batch_of([b"v"])))[:30])),
    ("2 GiB length prefix", b"\x7f\xff\xff\xff" + b"\x00" * 64),
    ("negative length prefix", b"\xff\xff\xff\xfe" + b"\x00" * 64),
    ("HTTP request", b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/8\r\n\r\n"),
]


@pytest.mark.parametrize("name, data", UNPARSEABLE, ids=[name for name, _ in UNPARSEABLE])
def test_unparseable_input_closes_the_connection_without_an_answer(broker, still_serving, name, data):
    process, _ = broker
    bad = Raw(process.port)
    try:
        bad.send_bytes(data)
        started = time.monotonic()
        assert bad.closed_without_answer(), name
        assert time.monotonic() - started < 5, "the broker must not wait for 2 GiB that never come"
    finally:
        bad.close()
    still_serving(name)


def test_a_half_frame_left_hanging_does_not_block_other_clients(broker, still_serving):
    process, _ = broker
    hanging = Raw(process.port)
    try:
        hanging.send_bytes(b"\x00\x00\x10\x00" + b"\x00\x00\x00\x09")  # 4 KiB announced, 4 bytes sent
        still_serving("half frame")  # while the half frame is still pending
    finally:
        hanging.close()


def test_fetch_v13_cannot_be_parsed_and_closes_the_connection(broker, still_serving):
    """Fetch v13 (topic ids) is beyond what the codec parses: close, as Kafka does for versions
    it does not know."""
    process, _ = broker
    bad = Raw(process.port)
    try:
        header = struct.pack(">hhih", ApiKey.FETCH, 13, 7, 1) + b"x" + b"\x00"  # header v2, no tags
        body = b"\x00" * 32
        bad.send_bytes(struct.pack(">i", len(header) + len(body)) + header + body)
        assert bad.closed_without_answer()
    finally:
        bad.close()
    still_serving("fetch v13")


# ------------------------------------------------------------------------ answered with errors


def test_api_versions_v9_gets_the_kip511_answer_and_the_connection_stays(broker, still_serving):
    process, _ = broker
    client = Raw(process.port)
    try:
        header = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 42, 1) + b"x" + b"\x00"
        body = b"\x02a\x021\x00"  # client software name and version (compact strings), no tags
        client.send_bytes(struct.pack(">i", len(header) + len(body)) + header + body)
        response = client.receive(ApiKey.API_VERSIONS, 0, 42)
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        [(key, low, high)] = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
        assert (key, low, high) == (ApiKey.API_VERSIONS, 0, 4)
        assert api_versions_ok(client), "the client retries with a version we serve, same connection"
    finally:
        client.close()
    still_serving("api versions v9")


def test_produce_v2_parses_but_is_answered_unsupported_version(broker, still_serving):
    process, _ = broker
    client = Raw(process.port)
    try:
        partition = produce_error(client, produce_request(batch_of([b"never"])), version=2)
        assert partition.error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        client.close()
    still_serving("produce v2")


def test_batch_with_a_wrong_crc_is_corrupt_message(broker, still_serving):
    process, _ = broker
    batch = bytearray(batch_of([b"tampered-%d" % i for i in range(5)]))
    batch[-3] ^= 0xFF  # a record byte: the CRC (over attributes..end) no longer matches
    client = Raw(process.port)
    try:
        partition = produce_error(client, produce_request(bytes(batch)))
        assert partition.error_code == ErrorCode.CORRUPT_MESSAGE
        assert partition.base_offset == -1
        assert api_versions_ok(client), "a bad batch is an error value, not a reason to close"
    finally:
        client.close()
    still_serving("wrong crc")


def test_acks_0_with_a_wrong_crc_closes_the_connection(broker, still_serving):
    """acks=0 gets no answer, so a rejected batch can only be signalled by closing (Kafka does)."""
    process, _ = broker
    batch = bytearray(batch_of([b"tampered, unacknowledged"]))
    batch[-2] ^= 0x01
    client = Raw(process.port)
    try:
        client.send(ApiKey.PRODUCE, 9, produce_request(bytes(batch), acks=0))
        assert client.closed_without_answer()
    finally:
        client.close()
    still_serving("acks=0 wrong crc")


def test_batch_with_a_zeroed_crc_field_is_corrupt_message(broker, still_serving):
    process, _ = broker
    batch = bytearray(batch_of([b"crc-zeroed"]))
    batch[CRC_OFFSET:CRC_OFFSET + 4] = b"\x00\x00\x00\x00"
    client = Raw(process.port)
    try:
        assert produce_error(client, produce_request(bytes(batch))).error_code == ErrorCode.CORRUPT_MESSAGE
    finally:
        client.close()
    still_serving("zeroed crc")


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def test_compressed_garbage_with_a_valid_crc_is_corrupt_message(broker, still_serving):
    """The CRC only proves the bytes are the producer's; a leader must also check they decode,
    or one bad producer stores a batch every consumer then fails on."""
    process, _ = broker
    now = int(time.time() * 1000)
    batch = bytearray(encode_batch([Record(i, now, None, b"v" * 200) for i in range(50)],
                                   compression=Compression.LZ4))
    batch[HEADER_SIZE + 12:HEADER_SIZE + 40] = b"\xff" * 28  # inside the lz4 frame's first block
    client = Raw(process.port)
    try:
        partition = produce_error(client, produce_request(recrc(batch)))
        assert partition.error_code == ErrorCode.CORRUPT_MESSAGE
        assert "lz4" in (partition.error_message or "")
        assert api_versions_ok(client)
    finally:
        client.close()
    still_serving("lz4 garbage with a valid crc")


def test_decompression_bomb_is_message_too_large(broker, still_serving):
    process, _ = broker
    bomb = encode_batch([Record(0, int(time.time() * 1000), None, bytes(70 << 20))],
                        compression=Compression.LZ4)
    assert len(bomb) < MESSAGE_MAX_BYTES  # small on the wire: only the decompressed cap stops it
    client = Raw(process.port)
    try:
        partition = produce_error(client, produce_request(bomb))
        assert partition.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert api_versions_ok(client)
    finally:
        client.close()
    still_serving("lz4 bomb")


def test_batch_over_message_max_bytes_is_message_too_large(broker, still_serving):
    process, _ = broker
    batch = batch_of([b"x" * (MESSAGE_MAX_BYTES + 1024)])
    client = Raw(process.port)
    try:
        partition = produce_error(client, produce_request(batch))
        assert partition.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert api_versions_ok(client)
    finally:
        client.close()
    still_serving("oversize batch")


@pytest.mark.parametrize("acks", [5, 2, -2])
def test_acks_other_than_0_1_all_is_invalid_required_acks(broker, still_serving, acks):
    process, _ = broker
    client = Raw(process.port)
    try:
        partition = produce_error(client, produce_request(batch_of([b"bad acks"]), acks=acks))
        assert partition.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    finally:
        client.close()
    still_serving(f"acks={acks}")


INVALID_NAMES = ["bad/name", "..", ".", "", "x" * 250, "spaces here", "ünïcode", "tab\tname"]


@pytest.mark.parametrize("version", [4, 7])
def test_create_topics_with_invalid_names_is_invalid_topic_exception(broker, still_serving, version):
    process, _ = broker
    valid = f"valid-name-v{version}"
    topics = [CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                                 assignments=[], configs=[])
              for n in [*INVALID_NAMES, valid]]
    client = Raw(process.port)
    try:
        response = client.call(ApiKey.CREATE_TOPICS, version, CreateTopicsRequest(topics=topics, timeout_ms=10_000))
        errors = {t.name: t.error_code for t in response.topics}
        assert errors == {**{n: ErrorCode.INVALID_TOPIC_EXCEPTION for n in INVALID_NAMES}, valid: ErrorCode.NONE}
        messages = {t.name: t.error_message for t in response.topics}
        assert all(messages[n] for n in INVALID_NAMES), "each refusal says why"
        metadata = client.call(ApiKey.METADATA, 9, MetadataRequest(topics=None))
        assert not set(INVALID_NAMES) & {t.name for t in metadata.topics}
    finally:
        client.close()
    still_serving(f"create topics v{version}")
