"""Produce/consume round trips: the same records, through the same client, on Apache Kafka and on
pylog; what the client reads back (partition, offset, key, value, headers, timestamp type and
timestamp) and what the producer was told (partition, offset, error) must be the same.

The records cover what clients encode differently: null keys, null values, empty keys and
values, repeated header names, a null header value, non-ASCII header names, a timestamp below its
predecessor's, and one incompressible record close to the 1 MiB limit.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from peer_clients import (
    NULL_MARKER,
    Sent,
    console_line,
    consume_console,
    consume_kafka_python,
    produce_confluent,
    produce_console,
    produce_kafka_python,
    produce_kafka_python_timestamps,
)
from peer_support import unique_topic

from broker.client.connection import BrokerConnection
from broker.client.errors import KafkaError
from broker.records import Record, encode_batch
from broker.wire import ApiKey, ErrorCode

SUPPORTED_COMPRESSION = ["none", "gzip", "lz4"]
# 1 MiB batch limit (message.max.bytes 1048588 on both) less lz4's growth on incompressible data.
LARGE_VALUE_BYTES = 1_040_000


def scenario_records(timestamp_ms: int) -> list[Sent]:
    rng = random.Random(12)
    return [
        Sent(b"key-0", b"value-0", (), timestamp_ms),
        Sent(None, b"null key", (("trace", b"1"),), timestamp_ms + 1),
        Sent(b"tombstone", None, (), timestamp_ms + 2),
        Sent(None, None, (("dup", b""), ("dup", b"again"), ("null", None)), timestamp_ms + 3),
        Sent(b"", b"", (("utf-8 \u00e9", "\u00fc".encode()),), timestamp_ms + 4),
        Sent(b"large", rng.randbytes(LARGE_VALUE_BYTES), (), timestamp_ms + 5),
        Sent(b"compressible", b"abc" * 20_000, (("h", b"x" * 100),), timestamp_ms + 6),
        Sent(b"late", b"an earlier timestamp", (), timestamp_ms - 1_000),
    ]


def as_sent(records: list[Sent]) -> list[tuple]:
    """What a reader of partition 0 should see: offsets in order, CreateTime (0) timestamps."""
    return [(0, offset, r.key, r.value, r.headers, 0, r.timestamp_ms) for offset, r in enumerate(records)]


@pytest.mark.parametrize("compression", SUPPORTED_COMPRESSION)
@pytest.mark.parametrize("produce", [produce_confluent, produce_kafka_python],
                         ids=["confluent-kafka", "kafka-python"])
def test_round_trip_matches_apache_kafka(peers, produce, compression):
    records = scenario_records(int(time.time() * 1000) - 60_000)
    if produce is produce_kafka_python:  # it refuses a record with neither key nor value
        records = [r for r in records if (r.key, r.value) != (None, None)]

    def round_trip(peer):
        topic = peer.create_topic(unique_topic(f"records-{compression}"))
        reports = produce(peer.bootstrap, topic, records, compression)
        # From the start, and from inside a batch (whole batches come back; the client skips).
        return (reports, consume_kafka_python(peer.bootstrap, topic, len(records)),
                consume_kafka_python(peer.bootstrap, topic, len(records) - 3, start_offset=3))
    # The two peers' halves are independent: side by side, so their client waits overlap.
    with ThreadPoolExecutor(max_workers=len(peers)) as pool:
        seen = {peer.name: outcome for peer, outcome in zip(peers, pool.map(round_trip, peers))}
    assert seen["pylog"] == seen["kafka"]
    reports, read, read_from_3 = seen["kafka"]  # the scenario is sound: Kafka returns what was sent
    assert reports == [(0, offset, None) for offset in range(len(records))]
    assert read == as_sent(records) and read_from_3 == read[3:]


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_unsupported_compression_is_refused_by_pylog_only(peers, compression):
    # Intended difference: pylog stores none/gzip/lz4 only (DESIGN.md, broker/records) and refuses
    # other codecs with UNSUPPORTED_COMPRESSION_TYPE, where Apache Kafka accepts snappy and zstd.
    # (The value compresses well: librdkafka sends a batch uncompressed when that is smaller.)
    reports = {peer.name: produce_confluent(peer.bootstrap, peer.create_topic(unique_topic(compression)),
                                            [Sent(b"k", b"abc" * 1000)], compression)
               for peer in peers}
    assert reports["kafka"] == [(0, 0, None)]
    ((_, _, pylog_error),) = reports["pylog"]
    assert pylog_error == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_topic_compression_other_than_producer_is_refused_by_pylog_only(peers):
    # Intended difference: pylog stores batches as the producer compressed them (the produce path
    # writes the request's bytes, DESIGN.md "Produce"), so it refuses a topic compression.type that
    # would make the broker recompress; Apache Kafka accepts it. "producer" works on both.
    outcome = {}
    for peer in peers:
        for codec in ("producer", "gzip"):
            try:
                peer.create_topic(unique_topic("topic-codec"), configs={"compression.type": codec})
                outcome[(peer.name, codec)] = ErrorCode.NONE
            except KafkaError as exc:
                outcome[(peer.name, codec)] = exc.code
    assert outcome == {("kafka", "producer"): 0, ("kafka", "gzip"): 0,
                       ("pylog", "producer"): 0, ("pylog", "gzip"): ErrorCode.INVALID_CONFIG}


def test_timestamps_out_of_bounds_are_refused_alike(peers):
    """KIP-937: a CreateTime record more than message.timestamp.after.max.ms (Kafka 4: one hour)
    ahead of the broker's clock, or more than message.timestamp.before.max.ms behind it, is
    INVALID_TIMESTAMP, with one record error per such record."""
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, ts, None, b"v") for i, ts in enumerate(
        [now, now + 2 * 3_600_000, now - 10 * 365 * 86_400_000, -1])])
    answers = {}
    for peer in peers:
        answers[peer.name] = []
        for configs in ({}, {"message.timestamp.before.max.ms": str(86_400_000)}):
            topic = peer.create_topic(unique_topic("timestamps"), configs=configs)
            with BrokerConnection("127.0.0.1", peer.ports[0]) as conn:
                response = conn.request(ApiKey.PRODUCE, {"acks": -1, "timeout_ms": 10_000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, api_version=9)
            answer = response.responses[0].partition_responses[0]
            answers[peer.name].append((answer.error_code, [e.batch_index for e in answer.record_errors]))
    assert answers["pylog"] == answers["kafka"]
    assert answers["kafka"] == [(ErrorCode.INVALID_TIMESTAMP, [1]), (ErrorCode.INVALID_TIMESTAMP, [1, 2])]


def test_log_append_time_topics_stamp_records_alike(peers):
    """message.timestamp.type=LogAppendTime: the broker's clock replaces the producer's
    timestamps, in the delivery report and for every record read back (type 1)."""
    records = [Sent(b"k0", b"v0", (), 1_000), Sent(None, b"v1", (), 2_000), Sent(b"k2", None, (), 3_000)]
    seen = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("log-append-time"),
                                  configs={"message.timestamp.type": "LogAppendTime"})
        started_ms = int(time.time() * 1000)
        stamps = produce_kafka_python_timestamps(peer.bootstrap, topic, records)
        read = consume_kafka_python(peer.bootstrap, topic, len(records))
        finished_ms = int(time.time() * 1000)
        assert all(started_ms <= stamp <= finished_ms for stamp in stamps), (peer, stamps)
        assert [r[-1] for r in read] == stamps, peer  # the record's time is its batch's stamp
        with BrokerConnection("127.0.0.1", peer.ports[0]) as conn:  # ListOffsets by the stamps
            found = [list_offsets_answer(conn, topic, t) for t in (-3, stamps[0], stamps[-1] + 1)]
        assert [timestamp for _, timestamp in found] == [stamps[-1], stamps[0], -1], peer
        seen[peer.name] = [r[:-1] for r in read], [offset for offset, _ in found]
    assert seen["pylog"] == seen["kafka"]
    assert {r[-1] for r in seen["kafka"][0]} == {1}  # LogAppendTime


def list_offsets_answer(conn: BrokerConnection, topic: str, timestamp: int) -> tuple[int, int]:
    response = conn.request(ApiKey.LIST_OFFSETS, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": timestamp}]}]}, api_version=7)
    answer = response.topics[0].partitions[0]
    assert answer.error_code == 0, answer
    return answer.offset, answer.timestamp


@pytest.mark.parametrize("compression", ["lz4"])  # one codec: each run starts four JVMs (~10 s)
def test_java_console_round_trip_matches_apache_kafka(peers, compression):
    """Kafka's console producer and consumer (the Java client, its own lz4 framing): text keys,
    values and headers, null keys, values and header values."""
    records = [
        Sent(b"k1", b"v1", (("h1", b"a"), ("h2", b"b"))),
        Sent(None, b"null key"),
        Sent(b"tombstone", None, (("h", None),)),
        Sent(b"k4", "gr\u00fc\u00dfe".encode() * 1000),
    ]
    seen = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic(f"console-{compression}"))
        started_ms = int(time.time() * 1000)
        produce_console(peer.bootstrap, topic, records, compression)
        read = consume_console(peer.bootstrap, topic, len(records))
        finished_ms = int(time.time() * 1000)
        assert all(started_ms <= r[-1] <= finished_ms for r in read), (peer, read)
        seen[peer.name] = [r[:-1] for r in read]  # producer-stamped times differ between runs
    assert seen["pylog"] == seen["kafka"]
    sent = [console_line(r).split("\t") for r in records]  # the scenario is sound on Apache Kafka
    assert seen["kafka"] == [(0, offset, key, value, headers.replace(NULL_MARKER, "NO_HEADERS")
                              if headers == NULL_MARKER else headers, "CreateTime")
                             for offset, (headers, key, value) in enumerate(sent)]
