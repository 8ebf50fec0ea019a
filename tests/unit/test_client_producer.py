"""Producer against the in-memory cluster: partitioning, batching, idempotent retries that the
broker deduplicates, typed failures that are never swallowed."""

from __future__ import annotations

import time

import pytest

from broker.client.errors import DeliveryFailed, KafkaError, KafkaTimeoutError
from broker.client.partitioner import partition_for_key
from broker.client.producer import Producer, parse_acks
from fake_kafka import Fault
from broker.records import Compression, read_header
from broker.wire import ApiKey, ErrorCode

from client_helpers import in_memory_cluster, produce_requests, producer, values, wait_until


@pytest.fixture
def kafka():
    with in_memory_cluster(partitions=4) as cluster:
        yield cluster


def test_keyed_records_go_to_the_murmur2_partition_in_order(kafka):
    with producer(kafka) as p:
        deliveries = [p.send("t", f"v{i}".encode(), key=f"key{i % 5}".encode()) for i in range(40)]
        p.flush()
    assert all(d.succeeded for d in deliveries)
    by_partition: dict[int, list] = {}
    for i, d in enumerate(deliveries):
        assert d.partition == partition_for_key(f"key{i % 5}".encode(), 4)
        by_partition.setdefault(d.partition, []).append(d)
    for partition, ds in by_partition.items():
        assert [d.offset for d in ds] == list(range(len(ds)))  # per-partition offsets, in send order
        assert values(kafka, partition) == [f"v{deliveries.index(d)}".encode() for d in ds]


def test_idempotent_batches_carry_producer_id_and_consecutive_sequences(kafka):
    with producer(kafka, batch_bytes_max=200) as p:
        for i in range(30):
            p.send("t", b"x" * 20, partition=1)
        p.flush()
        pid = p.producer_id
    headers = kafka.batch_headers("t", 1)
    assert len(headers) > 2  # several batches, so sequences had to continue across them
    assert {h.producer_id for h in headers} == {pid} and pid >= 0
    assert {h.producer_epoch for h in headers} == {0}
    expected = 0
    for h in headers:
        assert h.base_sequence == expected
        expected += h.records_count
    assert expected == 30


def test_a_retry_after_a_lost_response_is_deduplicated_by_the_broker(kafka):
    # The broker appends, then the connection drops before the answer: the client cannot know.
    kafka.inject(Fault(ApiKey.PRODUCE, kind="close_after"))
    with producer(kafka, linger_ms=60_000) as p:
        deliveries = [p.send("t", f"v{i}".encode(), partition=0) for i in range(3)]
        p.flush()
        assert p.statistics()["retries"] == 1
    assert values(kafka, 0) == [b"v0", b"v1", b"v2"]  # exactly once
    assert [d.offset for d in deliveries] == [0, 1, 2]  # the original offsets
    first, second = produce_requests(kafka)
    sent = [bytes(r.topic_data[0].partition_data[0].records) for r in (first, second)]
    assert sent[0] == sent[1]  # the very same batch: same producer id, epoch, base sequence


def test_a_dropped_request_is_retried(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, kind="close"))
    with producer(kafka) as p:
        d = p.send("t", b"v", partition=2)
        assert d.get().offset == 0
    assert values(kafka, 2) == [b"v"]


def test_not_leader_refreshes_metadata_and_sends_to_the_new_leader(kafka):
    with producer(kafka) as p:
        p.send("t", b"before", partition=0).get()
        kafka.set_leader("t", 0, 1)  # the producer's metadata still says broker 0
        d = p.send("t", b"after", partition=0)
        p.flush()
    assert d.offset == 1
    assert values(kafka, 0) == [b"before", b"after"]
    assert kafka.brokers[1].requests_for(ApiKey.PRODUCE)


def test_a_final_error_fails_the_records_and_is_raised_once(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.INVALID_RECORD))
    p = producer(kafka, linger_ms=60_000)
    bad = [p.send("t", b"bad", partition=0) for _ in range(2)]
    with pytest.raises(DeliveryFailed) as info:
        p.flush()
    assert info.value.code == ErrorCode.INVALID_RECORD
    assert info.value.failures == bad
    assert all(d.done and d.error.code == ErrorCode.INVALID_RECORD for d in bad)
    with pytest.raises(KafkaError):
        bad[0].get()
    p.flush()  # already reported: not raised again
    # Whether the failed batch was written is unknown, so the next one starts a fresh producer id.
    good = p.send("t", b"good", partition=0)
    p.close()
    assert good.succeeded and values(kafka, 0) == [b"good"]
    (header,) = kafka.batch_headers("t", 0)
    assert header.base_sequence == 0 and header.producer_id == p.producer_id
    assert len([1 for b in kafka.brokers for _ in b.requests_for(ApiKey.INIT_PRODUCER_ID)]) == 2


def test_retriable_errors_give_up_after_retries(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.NOT_ENOUGH_REPLICAS, times=10))
    p = producer(kafka, retries=2)
    d = p.send("t", b"v", partition=0)
    with pytest.raises(DeliveryFailed):
        p.flush()
    assert d.error.code == ErrorCode.NOT_ENOUGH_REPLICAS and d.error.retriable
    assert len(produce_requests(kafka)) == 3  # the first try and two retries
    p.close()


def test_records_expire_after_the_delivery_timeout_while_no_leader_exists(kafka):
    kafka.set_leader("t", 3, -1)
    p = producer(kafka, delivery_timeout_ms=300, max_block_ms=50)
    d = p.send("t", b"v", partition=3)
    with pytest.raises(DeliveryFailed) as info:
        p.flush()
    assert isinstance(d.error, KafkaTimeoutError)
    assert "delivery_timeout_ms" in str(info.value) and "LEADER_NOT_AVAILABLE" in str(info.value)
    p.close()


def test_acks_zero_gets_no_response_and_no_offsets(kafka):
    with producer(kafka, acks=0, enable_idempotence=False) as p:
        deliveries = [p.send("t", b"v", partition=0) for _ in range(3)]
        p.flush()
    assert all(d.succeeded and d.offset == -1 for d in deliveries)
    deadline = time.monotonic() + 5  # nothing tells the producer when the broker got them
    while len(values(kafka, 0)) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert produce_requests(kafka)[0].acks == 0
    assert values(kafka, 0) == [b"v"] * 3
    assert {h.producer_id for h in kafka.batch_headers("t", 0)} == {-1}


def test_idempotence_requires_acks_all(kafka):
    with pytest.raises(ValueError, match="acks"):
        Producer(kafka.bootstrap, acks=1, enable_idempotence=True)
    # KIP-679: idempotence is on by default, but only implicitly, so acks 0/1 turn it off.
    assert Producer(kafka.bootstrap).idempotent
    p = Producer(kafka.bootstrap, acks=1, linger_ms=0)
    assert not p.idempotent
    p.send("t", b"v", partition=0)
    p.close()
    assert kafka.batch_headers("t", 0)[0].producer_id == -1
    assert not any(b.requests_for(ApiKey.INIT_PRODUCER_ID) for b in kafka.brokers)


@pytest.mark.parametrize("acks, expected", [("all", -1), ("-1", -1), (-1, -1), ("1", 1), (0, 0)])
def test_parse_acks(acks, expected):
    assert parse_acks(acks) == expected


@pytest.mark.parametrize("acks", ["2", "some", None, 5])
def test_parse_acks_refuses(acks):
    with pytest.raises(ValueError):
        parse_acks(acks)


@pytest.mark.parametrize("compression", ["gzip", "lz4"])
def test_compressed_batches(kafka, compression):
    with producer(kafka, compression=compression) as p:
        for i in range(10):
            p.send("t", f"value-{i}".encode() * 10, partition=0)
    assert {h.compression for h in kafka.batch_headers("t", 0)} == {Compression.from_name(compression)}
    assert values(kafka, 0) == [f"value-{i}".encode() * 10 for i in range(10)]


@pytest.mark.parametrize("compression", ["snappy", "zstd", "brotli"])
def test_unsupported_compression_is_a_config_error(kafka, compression):
    with pytest.raises(ValueError):
        Producer(kafka.bootstrap, compression=compression)


def test_linger_holds_records_until_flush(kafka):
    p = producer(kafka, linger_ms=60_000)
    for i in range(5):
        p.send("t", b"v", partition=0)
    assert produce_requests(kafka) == []
    p.flush()
    (request,) = produce_requests(kafka)
    header = read_header(bytes(request.topic_data[0].partition_data[0].records))
    assert header.records_count == 5  # one batch
    p.close()


def test_full_batches_go_out_without_waiting_for_linger(kafka):
    p = producer(kafka, linger_ms=60_000, batch_bytes_max=300)
    for _ in range(20):
        p.send("t", b"x" * 30, partition=0)
    # The I/O thread sends full batches on its own, long before linger or any flush.
    assert wait_until(lambda: len(produce_requests(kafka)) >= 2)
    p.close()
    assert len(values(kafka, 0)) == 20


def test_keyless_records_stick_to_a_partition_until_its_batch_is_full(kafka):
    p = producer(kafka, linger_ms=60_000, batch_bytes_max=1000)
    deliveries = [p.send("t", b"x" * 50) for _ in range(40)]
    p.close()
    partitions = [d.partition for d in deliveries]
    runs = [partitions[0]]
    for part in partitions[1:]:
        if part != runs[-1]:
            runs.append(part)
    assert len(runs) >= 3  # moved on several times ...
    assert all(partitions.count(r) >= 5 for r in set(runs))  # ... but in runs that fill batches
    assert all((runs[i] + 1) % 4 == runs[i + 1] for i in range(len(runs) - 1))


def test_buffer_limit_applies_back_pressure(kafka):
    p = producer(kafka, linger_ms=60_000, buffer_bytes_max=500, batch_bytes_max=100_000)
    for _ in range(20):
        p.send("t", b"x" * 50, partition=0)
    assert produce_requests(kafka)  # the buffer drained inside send()
    assert p.statistics()["bytes_buffered"] <= 500
    p.close()


def test_headers_timestamps_and_null_values(kafka):
    with producer(kafka) as p:
        d = p.send("t", None, key=b"k", partition=0, headers=[("h", b"1"), ("n", None)], timestamp_ms=1234)
    (record,) = kafka.records("t", 0)
    assert record.value is None and record.key == b"k" and record.timestamp == 1234
    assert record.headers == (("h", b"1"), ("n", None))
    assert d.timestamp_ms == 1234


def test_mistakes_raise_at_send(kafka):
    with producer(kafka, request_bytes_max=1000) as p:
        with pytest.raises(KafkaError) as info:
            p.send("t", b"x" * 2000)
        assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
        with pytest.raises(KafkaError) as info:
            p.send("missing", b"v")
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(KafkaError) as info:
            p.send("t", b"v", partition=4)
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(TypeError):
            p.send("t", "text is not bytes")
        with pytest.raises(TypeError):
            p.send("t", b"v", headers=[(b"key-must-be-str", b"v")])


def test_init_producer_id_failure_fails_the_records(kafka):
    kafka.inject(Fault(ApiKey.INIT_PRODUCER_ID, code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    p = producer(kafka)
    d = p.send("t", b"v", partition=0)
    with pytest.raises(DeliveryFailed) as info:
        p.close()
    assert info.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and d.error is not None


def test_close_without_flush_drops_buffered_records_with_an_error(kafka):
    p = producer(kafka, linger_ms=60_000)
    d = p.send("t", b"v", partition=0)
    p.close(flush=False)
    assert d.done and d.error is not None and values(kafka, 0) == []


# ------------------------------------------------------------------ the send fast path


@pytest.mark.parametrize("batch_records", [5, 100])  # the reference encoder and the vectorized one
def test_keys_mixed_with_null_keys_in_one_batch_keep_their_places(kafka, batch_records):
    keys = [None, None, b"k2", None, b"k4"] * (batch_records // 5)
    with producer(kafka, linger_ms=60_000) as p:
        deliveries = [p.send("t", b"v%d" % i, key=k, partition=2) for i, k in enumerate(keys)]
        assert p.statistics()["records_buffered"] == len(keys)
        assert len(produce_requests(kafka)) == 0  # all in one open batch, joined on the fast path
        p.flush()
    records = kafka.records("t", 2)
    assert [r.key for r in records] == keys
    assert [r.value for r in records] == [b"v%d" % i for i in range(len(keys))]
    assert [d.offset for d in deliveries] == list(range(len(keys)))
    assert kafka.batch_headers("t", 2)[0].records_count == len(keys)


def test_all_null_keys_are_sent_as_null_keys(kafka):
    with producer(kafka, linger_ms=60_000) as p:
        for i in range(70):
            p.send("t", b"v", partition=0)
    assert [r.key for r in kafka.records("t", 0)] == [None] * 70


def test_the_fast_path_keeps_timestamps_and_the_buffer_bound(kafka):
    p = producer(kafka, linger_ms=60_000, buffer_bytes_max=1000, batch_bytes_max=100_000, max_block_ms=200)
    stamps = [p.send("t", b"x" * 50, partition=0, timestamp_ms=1000 + i).timestamp_ms for i in range(3)]
    assert stamps == [1000, 1001, 1002]
    for _ in range(30):  # 30 x 86 bytes is over the bound: send() waits for the buffer to drain
        p.send("t", b"x" * 50, partition=0)
        assert p.statistics()["bytes_buffered"] <= 1000
    assert produce_requests(kafka)  # drained by sending, long before linger_ms
    p.close()
    assert [r.timestamp for r in kafka.records("t", 0)[:3]] == [1000, 1001, 1002]
    assert len(kafka.records("t", 0)) == 33


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_send_raises_once_the_io_thread_died(kafka, monkeypatch):
    p = producer(kafka, linger_ms=60_000)
    first = p.send("t", b"v", partition=0)

    def broken_turn(*args, **kwargs):
        raise RuntimeError("bug in a turn")

    monkeypatch.setattr(p._sender, "_turn", broken_turn)
    with p._state.lock:
        p._state.wake()
    assert wait_until(lambda: p._state.fatal is not None)
    assert first.done and first.error is not None  # the open batch was failed ...
    with pytest.raises(KafkaError) as info:
        p.send("t", b"v", partition=0)  # ... so this one takes the slow path, which checks
    assert "I/O thread failed" in str(info.value)
    with pytest.raises(KafkaError):
        p.close()
