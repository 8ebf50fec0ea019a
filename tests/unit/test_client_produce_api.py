"""``Producer.produce``: confluent-kafka's shape (no handle per record), the same records and
partitions as ``send``, ``on_delivery`` callbacks in order on the I/O thread, and failures that
reach the callback or the next ``flush`` -- never neither."""

from __future__ import annotations

import threading
import time

import pytest

from broker.client.errors import DeliveryFailed, KafkaError
from broker.client.partitioner import partition_for_key
from fake_kafka import Fault
from broker.records import read_header
from broker.wire import ApiKey, ErrorCode

from client_helpers import in_memory_cluster, produce_requests
from client_helpers import producer as make_producer


@pytest.fixture
def kafka():
    with in_memory_cluster(partitions=4) as cluster:
        yield cluster


def test_produce_writes_the_same_records_and_partitions_as_send(kafka):
    with make_producer(kafka, linger_ms=5) as p:
        for i in range(500):
            p.produce("t", f"v{i}".encode(), key=f"k{i % 7}".encode())
        p.produce("t", b"explicit", partition=3, timestamp_ms=1_234)
        p.produce("t", bytearray(b"from-bytearray"), partition=2)
        p.produce("t", None, key=b"tombstone")
        p.flush()
    for k in range(7):  # each key in its murmur2 partition, in produce order
        key = f"k{k}".encode()
        records = kafka.records("t", partition_for_key(key, 4))
        assert [r.value for r in records if r.key == key] == \
            [f"v{i}".encode() for i in range(500) if i % 7 == k]
    (explicit,) = [r for r in kafka.records("t", 3) if r.value == b"explicit"]
    assert explicit.timestamp == 1_234
    assert [r.value for r in kafka.records("t", 2) if r.key is None] == [b"from-bytearray"]
    (tombstone,) = [r for r in kafka.records("t", partition_for_key(b"tombstone", 4))
                    if r.key == b"tombstone"]
    assert tombstone.value is None


def test_produce_keyless_records_stick_to_one_partition_per_batch(kafka):
    with make_producer(kafka, linger_ms=50) as p:
        for i in range(100):
            p.produce("t", b"%d" % i, partition=None if i % 2 else -1)  # -1: confluent's "any"
        p.flush()
    counts = [len(kafka.records("t", partition)) for partition in range(4)]
    assert sum(counts) == 100
    assert max(counts) == 100  # one open batch took them all (KIP-480 sticky partitioner)


def test_on_delivery_gets_offsets_in_send_order_on_the_io_thread(kafka):
    seen = []
    threads = set()

    def on_delivery(error, delivery):
        threads.add(threading.current_thread().name)
        seen.append((error, delivery.topic, delivery.partition, delivery.offset, delivery.timestamp_ms))

    with make_producer(kafka, linger_ms=2) as p:
        for i in range(200):
            p.produce("t", b"v%d" % i, partition=1, on_delivery=on_delivery, timestamp_ms=10 + i)
        p.flush()
        assert len(seen) == 200  # flush returns after the callbacks of what it flushed ran
    assert [s[0] for s in seen] == [None] * 200
    assert [s[3] for s in seen] == list(range(200))
    assert [s[4] for s in seen] == [10 + i for i in range(200)]
    assert {s[1:3] for s in seen} == {("t", 1)}
    assert threads == {"pylog-producer-sender"}
    assert [r.value for r in kafka.records("t", 1)] == [b"v%d" % i for i in range(200)]


def test_a_failure_goes_to_the_callback_and_is_not_raised_again_by_flush(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.INVALID_RECORD))  # not retriable
    errors = []
    with make_producer(kafka) as p:
        p.produce("t", b"bad", partition=0, on_delivery=lambda e, d: errors.append((e, d.offset)))
        p.flush()  # the callback had it: nothing to raise
        assert len(errors) == 1
        error, offset = errors[0]
        assert isinstance(error, KafkaError) and error.code == ErrorCode.INVALID_RECORD
        assert offset == -1


def test_a_failure_without_callback_is_raised_by_the_next_flush(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.INVALID_RECORD))
    with make_producer(kafka) as p:
        p.produce("t", b"bad", partition=0)
        with pytest.raises(DeliveryFailed) as failed:
            p.flush()
        assert [d.error.code for d in failed.value.failures] == [ErrorCode.INVALID_RECORD]
        p.produce("t", b"good", partition=0)
        p.flush()  # reported once, not again
    assert [r.value for r in kafka.records("t", 0)] == [b"good"]


def test_a_callback_that_raises_is_logged_and_the_producer_goes_on(kafka, caplog):
    calls = []

    def explode(error, delivery):
        calls.append(delivery.offset)
        raise RuntimeError("user bug")

    with make_producer(kafka) as p:
        p.produce("t", b"a", partition=0, on_delivery=explode)
        p.flush()
        p.produce("t", b"b", partition=0, on_delivery=explode)
        p.flush()
    assert calls == [0, 1]
    assert sum("user bug" in r.exc_text for r in caplog.records if r.exc_text) == 2


def test_a_callback_may_produce_but_not_flush(kafka):
    outcome = {}

    def chain(error, delivery):
        p.produce("t", b"follow-up", partition=2)
        try:
            p.flush()
        except KafkaError as exc:
            outcome["flush"] = str(exc)

    p = make_producer(kafka)
    with p:
        p.produce("t", b"first", partition=2, on_delivery=chain)
        p.flush()
        p.flush()  # the follow-up the callback queued
    assert "delivery callback" in outcome["flush"]
    assert [r.value for r in kafka.records("t", 2)] == [b"first", b"follow-up"]


def test_close_without_flush_fails_unsent_records_through_their_callbacks(kafka):
    errors = []
    p = make_producer(kafka, linger_ms=60_000)
    p.produce("t", b"never", partition=0, on_delivery=lambda e, d: errors.append(e))
    p.close(flush=False)
    assert len(errors) == 1 and isinstance(errors[0], KafkaError)
    assert kafka.records("t", 0) == []


def test_produce_refuses_what_can_never_succeed(kafka):
    with make_producer(kafka, request_bytes_max=1_000) as p:
        with pytest.raises(TypeError, match="value must be bytes"):
            p.produce("t", "text")
        with pytest.raises(TypeError, match="key must be bytes"):
            p.produce("t", b"v", key=5)
        with pytest.raises(TypeError, match="on_delivery must be callable"):
            p.produce("t", b"v", on_delivery="print")
        with pytest.raises(KafkaError) as too_large:
            p.produce("t", b"x" * 2_000)
        assert too_large.value.code == ErrorCode.MESSAGE_TOO_LARGE
        with pytest.raises(KafkaError) as no_partition:
            p.produce("t", b"v", partition=9)
        assert no_partition.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError, match="closed"):
        p.produce("t", b"v")


def test_timestamps_are_checked_and_floored_like_java(kafka):
    with make_producer(kafka, linger_ms=5) as p:
        p.produce("t", b"warm", partition=0)  # opens the batch: the next ones take the fast path
        for bad in (-1, 1 << 62, "soon"):
            with pytest.raises(ValueError):
                p.produce("t", b"bad", partition=0, timestamp_ms=bad)
            with pytest.raises(ValueError):
                p.send("t", b"bad", partition=0, timestamp_ms=bad)
        sent = p.send("t", b"given", partition=0, timestamp_ms=1_700_000_000_123)
        before = time.time_ns() // 1_000_000
        now = p.send("t", b"now", partition=0)
        after = time.time_ns() // 1_000_000
        p.flush()
    assert sent.timestamp_ms == 1_700_000_000_123 and before <= now.timestamp_ms <= after
    records = kafka.records("t", 0)
    assert [r.value for r in records] == [b"warm", b"given", b"now"]  # nothing half-queued
    assert records[1].timestamp == 1_700_000_000_123 and records[2].timestamp == now.timestamp_ms


def test_produce_with_headers_keeps_them(kafka):
    with make_producer(kafka) as p:
        p.produce("t", b"v", partition=0, headers={"trace": b"abc", "empty": None})
        p.flush()
    (record,) = kafka.records("t", 0)
    assert list(record.headers) == [("trace", b"abc"), ("empty", None)]


def test_batch_bytes_max_above_request_bytes_max_is_capped_so_batches_fit_a_request(kafka):
    with make_producer(kafka, linger_ms=60_000, batch_bytes_max=1 << 20, request_bytes_max=10_000) as p:
        for i in range(1_000):
            p.produce("t", b"%04d" % i + b"x" * 96, partition=0)
        p.flush()
    assert [r.value[:4] for r in kafka.records("t", 0)] == [b"%04d" % i for i in range(1_000)]
    batches = [bytes(pd.records) for request in produce_requests(kafka)
               for topic in request.topic_data for pd in topic.partition_data]
    assert len(batches) >= 10 and max(map(len, batches)) <= 10_000
    assert sum(read_header(b).records_count for b in batches) == 1_000


def test_a_callback_that_fills_the_buffer_fails_at_once_instead_of_blocking_the_io_thread(kafka):
    errors = []

    def flood(error, delivery):
        try:
            for _ in range(100):
                p.produce("t", b"x" * 400, partition=1)
        except KafkaError as exc:  # KafkaTimeoutError
            errors.append(str(exc))

    p = make_producer(kafka, linger_ms=60_000, buffer_bytes_max=2_000, max_block_ms=30_000)
    with p:
        p.produce("t", b"first", partition=0, on_delivery=flood)
        started = time.monotonic()
        p.flush()
        assert time.monotonic() - started < 10  # not max_block_ms
        p.flush()
    assert len(errors) == 1 and "delivery callback" in errors[0]
    assert 0 < len(kafka.records("t", 1)) < 100  # what fitted before the buffer filled was sent
