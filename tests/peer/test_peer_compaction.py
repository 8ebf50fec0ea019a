"""Compaction on Apache Kafka and on pylog, compared: the same keyed workload (values unique per
send, tombstones, one partition, an idempotent librdkafka producer) goes to a compacted topic on
each; both clean it; read from the beginning, the surviving (offset, key, value) records must be
the same set.

Cleaning is forced alike on both: ``segment.ms`` of 400 ms and a record written after a pause
longer than that rolls the active segment (Kafka 4 refuses a ``segment.bytes`` below 1 MiB), so
everything before that record is cleanable; ``min.cleanable.dirty.ratio`` 0.01; both brokers run
the cleaner every 100 ms (``log.cleaner.backoff.ms`` in ``COMMON_BROKER_SETTINGS``). Each side is
waited for (a deadline, not a sleep) until its log below the roll holds one record per key.

- ``delete.retention.ms`` one hour: tombstones survive the pass and are compared like values.
- Spark reads the compacted topics from the earliest offset with failOnDataLoss=true: its own
  Kafka connector (on Apache Kafka and on pylog) and ``format("pylog")`` (on pylog) return the
  same rows, the surviving records; none calls the gaps data loss.
- ``delete.retention.ms`` 0: the first pass keeps each tombstone and stamps its delete horizon
  (KIP-534), a second pass (more data, another roll) drops it; both must end without them.

Named as intended (not seen in this workload, whose groups end in a batch with records): pylog
writes each cleaned group's last batch even when it is left empty (a cleaned segment spans
exactly its group's offsets), where Kafka keeps an empty batch only as a producer's last; a raw
Fetch would see such a record-less batch, consumers never do.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from peer_support import unique_topic

from broker.client import ClientConfig, Consumer
from broker.client.connection import BrokerConnection
from broker.records import decode_batch, validate_batch
from broker.records.header import BatchLimits
from broker.wire import ApiKey, ErrorCode, FetchRequest

SEGMENT_MS = 400
KEYS = 25
SENDS = 500
TOMBSTONE_EVERY = 11
CLIENT = ClientConfig(request_timeout_ms=10_000, retry_backoff_ms=50)
_SCAN_LIMITS = BatchLimits(batch_bytes_max=2**31 - 1)


def topic_config(delete_retention_ms: int) -> dict[str, str]:
    return {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": str(delete_retention_ms)}


def workload() -> list[tuple[bytes, bytes | None]]:
    """Keyed sends: values unique, every ``TOMBSTONE_EVERY``-th a tombstone, and k0, k1 end deleted."""
    sends = [(b"k%d" % (n % KEYS), None if n % TOMBSTONE_EVERY == TOMBSTONE_EVERY - 1 else b"v%d" % n)
             for n in range(SENDS)]
    return sends + [(b"k0", None), (b"k1", None)]


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "batch.size": 600})  # ~20 records a batch: many batches to clean
    errors = []
    for key, value in records:
        producer.produce(topic, value, key, partition=0, on_delivery=lambda err, _: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors


def produce_in_segments(peer, topic: str, records, segments: int = 3) -> None:
    """``records`` in ``segments`` parts with a pause past ``segment.ms`` before each but the
    first: each part starts a segment, so a pass cleans several segments in one group."""
    size = -(-len(records) // segments)
    for n in range(segments):
        if n:
            time.sleep(SEGMENT_MS * 1.5 / 1000)
        produce(peer.bootstrap, topic, records[n * size:(n + 1) * size])


def roll(peer, topic: str, key: bytes) -> int:
    """Wait past ``segment.ms``, then write one record: the segment before it rolls on append,
    so everything earlier is cleanable. Returns the record's offset (the log end before it)."""
    start = end_offset(peer, topic)
    time.sleep(SEGMENT_MS * 1.5 / 1000)  # segment.ms is a time since the segment began: wall time
    produce(peer.bootstrap, topic, [(key, b"roll")])
    return start


def end_offset(peer, topic: str) -> int:
    with Consumer(peer.bootstrap, config=CLIENT) as consumer:
        return consumer.end_offsets([(topic, 0)])[(topic, 0)]


def read_all(peer, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    tp = (topic, 0)
    with Consumer(peer.bootstrap, config=CLIENT, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out, deadline = [], time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"{peer}: read stopped at {consumer.position(tp)} of {end}"
            out.extend((r.offset, r.key, r.value) for r in consumer.poll(timeout_ms=300, max_records=5000))
    return out


def raw_batches(peer, topic: str) -> list[tuple[int, int, int]]:
    """``(base offset, last offset, record count)`` of every batch a Fetch from 0 returns."""
    out, offset = [], 0
    with BrokerConnection("127.0.0.1", peer.ports[0], client_id="peer-compaction") as conn:
        while True:
            request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
                FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])], forgotten_topics_data=[])
            [answer] = conn.request(ApiKey.FETCH, request, 11).responses
            [partition] = answer.partitions
            assert partition.error_code == ErrorCode.NONE, (peer.name, ErrorCode(partition.error_code).name)
            data, pos = bytes(partition.records or b""), 0
            if not data:
                return out
            while pos < len(data):
                header = validate_batch(data, pos, _SCAN_LIMITS)
                batch = decode_batch(data, pos, _SCAN_LIMITS)
                out.append((header.base_offset, header.last_offset, len(batch.records)))
                offset, pos = header.last_offset + 1, pos + header.size


def compacted_below(peer, topic: str, limit: int, *, tombstones: bool, timeout_s: float = 15):
    """The records below ``limit`` once every key appears there at most once (and, when
    ``tombstones`` is False, no tombstone is left); fails at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = [r for r in read_all(peer, topic) if r[0] < limit]
        keys = [key for _, key, _ in records]
        if len(keys) == len(set(keys)) and (tombstones or all(v is not None for _, _, v in records)):
            return records
        assert time.monotonic() < deadline, (f"{peer}: not compacted below {limit} in {timeout_s} s: {len(records)} records, "
                                             f"tombstones at {[o for o, _, v in records if v is None]}")
        time.sleep(0.2)


def last_per_key(records: list[tuple[bytes, bytes | None]], start: int = 0) -> dict[bytes, tuple[int, bytes | None]]:
    last = {}
    for offset, (key, value) in enumerate(records, start):
        last[key] = (offset, value)
    return last


def on_both(peers, scenario) -> dict:
    """``scenario(peer)`` on both peers at once, by name: each side's own topic and waits (wall
    time past ``segment.ms``, the cleaner) overlap instead of adding up; a failure on either
    side is raised here."""
    with ThreadPoolExecutor(len(peers)) as pool:
        futures = {peer.name: pool.submit(scenario, peer) for peer in peers}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture(scope="module")
def tombstones_kept(peers):
    """Per side: the topic, the roll offset, the compacted records below it, all records."""
    topic = unique_topic("compact")

    def scenario(peer):
        peer.create_topic(topic, configs=topic_config(3_600_000))
        produce_in_segments(peer, topic, workload())
        rolled = roll(peer, topic, b"roll")
        return rolled, compacted_below(peer, topic, rolled, tombstones=True), read_all(peer, topic)

    return topic, on_both(peers, scenario)


def test_surviving_records_are_the_same_with_tombstones_kept(tombstones_kept):
    _, seen = tombstones_kept
    (k_roll, kafka, kafka_all), (p_roll, pylog, pylog_all) = seen["kafka"], seen["pylog"]
    assert k_roll == p_roll == SENDS + 2
    assert pylog == kafka
    expected = last_per_key(workload())
    assert {key: (offset, value) for offset, key, value in kafka} == expected
    assert {b"k0", b"k1"} <= {key for _, key, value in kafka if value is None}
    assert pylog_all == kafka_all  # the roll record too, at the same offset


def test_both_keep_the_same_batches_and_each_producers_last_batch_empty(peers, tombstones_kept):
    """Batches as a raw Fetch returns them: the ones with records are at the same offsets with
    the same records on both (a cleaned batch keeps its base offset and span); the last batch of
    each producer (one per part here: a producer per part) stays, emptied, on both, so its
    sequence state survives; any extra pylog batch holds no record (the module docstring)."""
    topic, _ = tombstones_kept
    kafka, pylog = (raw_batches(peer, topic) for peer in peers)
    assert [b for b in pylog if b[2]] == [b for b in kafka if b[2]]
    emptied = [b for b in kafka if b[2] == 0]
    assert len(emptied) >= 2 and set(emptied) <= set(pylog), (kafka, pylog)
    assert all(count == 0 for _, _, count in set(pylog) - set(kafka))


def test_tombstones_are_dropped_alike_after_delete_retention(peers):
    topic = unique_topic("compact-drop")

    def scenario(peer):
        peer.create_topic(topic, configs=topic_config(0))
        produce(peer.bootstrap, topic, workload())
        first = roll(peer, topic, b"roll")
        kept = compacted_below(peer, topic, first, tombstones=True)  # first pass: stamped, kept
        # More dirty data, no tombstone in it (one would only be stamped by the second pass).
        produce(peer.bootstrap, topic, [(b"k%d" % n, b"r1-v%d" % n) for n in range(2, 14)])
        second = roll(peer, topic, b"roll2")
        return kept, compacted_below(peer, topic, second, tombstones=False), read_all(peer, topic)

    seen = on_both(peers, scenario)
    assert seen["pylog"] == seen["kafka"]
    kept, dropped, _ = seen["kafka"]
    assert any(v is None for _, _, v in kept)  # tombstones were there after the first pass ...
    assert b"k0" not in {key for _, key, _ in dropped}  # ... and gone after the second


@pytest.mark.parametrize("connector, broker", [("kafka", "kafka"), ("kafka", "pylog"), ("pylog", "pylog")])
def test_spark_reads_the_survivors_without_data_loss(spark, peers, tombstones_kept, connector, broker):
    """Spark's Kafka source skips an offset that holds no record when it is not below the log
    start offset (KafkaDataConsumer: "invisible", not lost); ``format("pylog")`` does the same."""
    session_helpers = sys.modules["pylog_spark_session"]  # tests/spark/spark_session.py, loaded by conftest.py
    if connector == "kafka" and not session_helpers.has_kafka_connector(spark):
        pytest.fail(f"Spark's Kafka connector is not on the session's classpath: {session_helpers.INSTALL_HINT}")
    topic, seen = tombstones_kept
    peer = next(p for p in peers if p.name == broker)
    df = (spark.read.format(connector).option("kafka.bootstrap.servers", peer.bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest")
          .option("failOnDataLoss", "true").load())
    rows = sorted((r.offset, bytes(r.key), None if r.value is None else bytes(r.value))
                  for r in df.select("offset", "key", "value").collect())
    assert rows == seen[broker][2] == seen["kafka"][2]
