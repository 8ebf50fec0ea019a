"""Producer bounds and pipelining against the in-memory cluster: buffer_bytes_max blocks then
raises, linger and batch size, several requests in flight per connection (never more than
max_in_flight_requests), retries resent in sequence order without duplicates, delivery errors
that are raised and never swallowed, and the Arrow path choosing the same partitions as send."""

from __future__ import annotations

import random
import time

import pyarrow as pa
import pytest

from broker.client.config import ClientConfig
from broker.client.errors import DeliveryFailed, KafkaError, KafkaTimeoutError
from broker.client.partitioner import partition_for_key
from broker.client.producer import Producer
from fake_kafka import Fault, InMemoryKafka
from broker.records import read_header
from broker.wire import ApiKey, ErrorCode

import client_helpers
from client_helpers import in_memory_cluster, produce_requests, values, wait_until

# Answers are held back here (produce_delay_ms, up to 1.5 s) behind pipelined requests, so
# requests get more time than client_helpers.FAST gives them.
PATIENT = ClientConfig(request_timeout_ms=5000, connect_timeout_ms=1000, retry_backoff_ms=5)


@pytest.fixture
def kafka():
    with in_memory_cluster(partitions=4) as cluster:
        yield cluster


def producer(kafka, **options) -> Producer:
    return client_helpers.producer(kafka, config=PATIENT, **options)


def sent_batches(kafka, node: int = 0) -> list:
    """(base_sequence, records) of every batch the broker received, in arrival order."""
    out = []
    for request in produce_requests(kafka, node):
        for topic in request.topic_data:
            for data in topic.partition_data:
                header = read_header(bytes(data.records))
                out.append((header.base_sequence, header.records_count))
    return out


# ------------------------------------------------------------------------ accumulator bounds


def test_send_blocks_while_the_buffer_is_full_then_continues(kafka):
    kafka.produce_delay_ms = 150  # the buffer drains only when answers come back
    with producer(kafka, linger_ms=0, batch_bytes_max=200, buffer_bytes_max=600,
                  max_block_ms=5000) as p:
        started = time.monotonic()
        deliveries = [p.send("t", b"x" * 60, partition=0) for _ in range(12)]
        blocked_s = time.monotonic() - started
        assert p.statistics()["bytes_buffered"] <= 600
        p.flush()
    assert blocked_s >= 0.1  # some sends waited for acknowledgements to free the buffer
    assert all(d.succeeded for d in deliveries)
    assert values(kafka, 0) == [b"x" * 60] * 12


def test_send_raises_after_max_block_ms_and_does_not_queue_the_record(kafka):
    kafka.produce_delay_ms = 1500
    p = producer(kafka, linger_ms=0, batch_bytes_max=200, buffer_bytes_max=300, max_block_ms=100)
    first = p.send("t", b"x" * 150, partition=0)
    queued = p.statistics()["records_buffered"]
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="buffer_bytes_max"):
        p.send("t", b"y" * 150, partition=0)
    assert 0.09 <= time.monotonic() - started < 1.0
    assert p.statistics()["records_buffered"] == queued  # not queued
    assert p.statistics()["buffer_full_timeouts"] == 1
    p.close()
    assert first.succeeded and values(kafka, 0) == [b"x" * 150]


def test_a_record_larger_than_the_buffer_is_refused_at_once(kafka):
    with producer(kafka, buffer_bytes_max=500) as p:
        with pytest.raises(KafkaError) as info:
            p.send("t", b"x" * 600, partition=0)
    assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_linger_sends_a_partial_batch_when_it_expires_without_flush(kafka):
    p = producer(kafka, linger_ms=250)
    p.send("t", b"a", partition=0)
    p.send("t", b"b", partition=0)
    time.sleep(0.1)
    assert produce_requests(kafka, node=0) == []  # still lingering
    assert wait_until(lambda: len(produce_requests(kafka, node=0)) == 1, 3.0)  # the I/O thread's timer
    (request,) = produce_requests(kafka, node=0)
    assert read_header(bytes(request.topic_data[0].partition_data[0].records)).records_count == 2
    p.close()


def test_batches_never_exceed_batch_bytes_max(kafka):
    with producer(kafka, linger_ms=60_000, batch_bytes_max=400) as p:
        for i in range(50):
            p.send("t", b"%03d" % i + b"x" * 40, partition=0)
    sizes = [read_header(bytes(d.records)).size for r in produce_requests(kafka, node=0)
             for t in r.topic_data for d in t.partition_data]
    assert len(sizes) >= 5 and max(sizes) <= 400
    assert values(kafka, 0) == [b"%03d" % i + b"x" * 40 for i in range(50)]


# ------------------------------------------------------------------------ pipelining


@pytest.mark.parametrize("in_flight", [1, 3, 5])
def test_requests_are_pipelined_up_to_max_in_flight(kafka, in_flight):
    kafka.produce_delay_ms = 40
    with producer(kafka, linger_ms=0, batch_bytes_max=150, max_in_flight_requests=in_flight) as p:
        for i in range(40):
            p.send("t", b"%02d" % i + b"x" * 50, partition=0)
        p.flush()
        stats = p.statistics()
    assert stats["inflight_requests_peak"] == in_flight
    assert values(kafka, 0) == [b"%02d" % i + b"x" * 50 for i in range(40)]
    sequences = [seq for seq, _ in sent_batches(kafka)]
    assert sequences == sorted(sequences)  # sent strictly in sequence order


def test_idempotence_caps_max_in_flight_at_five(kafka):
    with pytest.raises(ValueError, match="max_in_flight"):
        Producer(kafka.bootstrap, max_in_flight_requests=6)
    Producer(kafka.bootstrap, acks=1, max_in_flight_requests=10).close()  # fine without idempotence


def test_a_retriable_error_mid_pipeline_resends_in_order_without_duplicates(kafka):
    kafka.produce_delay_ms = 30
    # The 2nd request fails; the 3rd.. come back OUT_OF_ORDER_SEQUENCE_NUMBER (a gap): all of
    # them are resent, in sequence order, and the broker writes each record exactly once.
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.NOT_ENOUGH_REPLICAS, skip=1))
    with producer(kafka, linger_ms=0, batch_bytes_max=150) as p:
        deliveries = [p.send("t", b"%02d" % i + b"x" * 50, partition=0) for i in range(30)]
        p.flush()
        stats = p.statistics()
    assert all(d.succeeded for d in deliveries)
    assert values(kafka, 0) == [b"%02d" % i + b"x" * 50 for i in range(30)]
    assert [d.offset for d in deliveries] == list(range(30))
    assert stats["retries"] >= 2 and stats["inflight_requests_peak"] > 1
    batches = sent_batches(kafka)
    failed_at = batches[1][0]
    resent = [seq for seq, _ in batches[2:] if seq <= failed_at]
    assert failed_at in resent  # the failed batch went again ...
    retried = [seq for seq, _ in batches if seq >= failed_at]
    first_retry = retried.index(failed_at, 1)
    assert retried[first_retry:] == sorted(retried[first_retry:])  # ... and from it on, in order


def test_a_partition_pipelines_only_after_its_first_batch_is_acknowledged(kafka):
    # A broker with no state for a producer on a partition takes any first sequence (Kafka's
    # rule; the fake's too). The first Produce is refused retriably (a leader still loading):
    # had batches been pipelined behind it, the next one would be written first and the first
    # one's resend refused OUT_OF_ORDER_SEQUENCE_NUMBER for good (seen against Apache Kafka).
    kafka.produce_delay_ms = 30
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.NOT_LEADER_OR_FOLLOWER))
    with producer(kafka, linger_ms=0, batch_bytes_max=150) as p:
        deliveries = [p.send("t", b"%02d" % i + b"x" * 50, partition=2) for i in range(30)]
        p.flush()
        stats = p.statistics()
    assert all(d.succeeded for d in deliveries)
    assert values(kafka, 2) == [b"%02d" % i + b"x" * 50 for i in range(30)]
    assert stats["retries"] == 1 and stats["inflight_requests_peak"] > 1  # pipelined after the first ack
    first, second = sent_batches(kafka)[:2]
    assert first[0] == second[0] == 0  # the first batch alone, twice: sent, refused, resent


def test_a_connection_dropped_mid_flight_is_retried_with_the_same_bytes_exactly_once(kafka):
    kafka.produce_delay_ms = 20
    # The broker appends the 2nd request and hangs up: the client cannot know it was written,
    # nor what happened to the requests pipelined behind it.
    kafka.inject(Fault(ApiKey.PRODUCE, kind="close_after", skip=1))
    with producer(kafka, linger_ms=0, batch_bytes_max=150) as p:
        deliveries = [p.send("t", b"%02d" % i + b"x" * 50, partition=1) for i in range(30)]
        p.flush()
        assert p.statistics()["retries"] >= 1
    assert values(kafka, 1) == [b"%02d" % i + b"x" * 50 for i in range(30)]  # exactly once
    assert [d.offset for d in deliveries] == list(range(30))


# ------------------------------------------------------------------------ errors surfaced


def test_a_final_error_mid_pipeline_fails_only_that_batch_and_the_rest_is_written_once(kafka):
    kafka.produce_delay_ms = 20
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.CORRUPT_MESSAGE, skip=1))
    p = producer(kafka, linger_ms=0, batch_bytes_max=150)
    deliveries = [p.send("t", b"%02d" % i + b"x" * 50, partition=2) for i in range(30)]
    with pytest.raises(DeliveryFailed) as info:
        p.flush()
    failed = [d for d in deliveries if d.error is not None]
    assert failed and set(info.value.failures) == set(failed)
    assert all(d.error.code == ErrorCode.CORRUPT_MESSAGE for d in failed)
    written = values(kafka, 2)
    expected = [b"%02d" % i + b"x" * 50 for i in range(30) if deliveries[i].error is None]
    assert written == expected  # everything else exactly once, in order
    p.flush()  # reported once only
    p.close()


def test_errors_are_raised_by_close_when_nobody_flushed(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.INVALID_RECORD))
    p = producer(kafka)
    d = p.send("t", b"v", partition=0)
    with pytest.raises(DeliveryFailed):
        p.close()
    assert d.error.code == ErrorCode.INVALID_RECORD


def test_arrow_delivery_errors_are_raised(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.INVALID_RECORD))
    p = producer(kafka)
    result = p.send_arrow("t", pa.table({"value": [b"a", b"b"]}), partition=0)
    with pytest.raises(DeliveryFailed) as info:
        result.get()
    assert info.value.failures == list(result) and result[0].error.code == ErrorCode.INVALID_RECORD
    p.flush()  # already reported by get()
    p.close()


def test_delivery_get_waits_and_reports_offsets_and_completion_time(kafka):
    with producer(kafka, linger_ms=60_000) as p:
        before = time.monotonic() * 1000
        d = p.send("t", b"v", partition=3)
        assert d.get(timeout_ms=5000).offset == 0  # get() does not wait for the linger
        assert d.completed_ms >= before and d.done and d.succeeded


# ------------------------------------------------------------------------ Arrow


def random_keys(n: int, seed: int = 3) -> list:
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 24))) for _ in range(n)]


def test_send_arrow_puts_each_key_on_the_partition_send_would(kafka):
    kafka.create_topic("keys", 7)
    kafka.create_topic("keys2", 7)
    keys = random_keys(500)
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": [b"%d" % i for i in range(500)]})
    with producer(kafka) as p:
        result = p.send_arrow("keys", table)
        singles = [p.send("keys2", b"%d" % i, key=k) for i, k in enumerate(keys)]
        p.flush()
    arrow_partition = {}
    for delivery in result:
        for row in delivery.rows:
            arrow_partition[int(row)] = delivery.partition
    assert sorted(arrow_partition) == list(range(500))
    for i, key in enumerate(keys):
        assert arrow_partition[i] == singles[i].partition == partition_for_key(key, 7)
    for partition in range(7):  # same records on the same partitions, in table order
        assert values(kafka, partition, "keys") == values(kafka, partition, "keys2")


def test_send_arrow_null_partitions_are_the_partitioners_and_keep_table_order(kafka):
    """Spark's sink hands rows whose ``partition`` is null (the partitioner picks) mixed with rows
    that name one. Both kinds are resolved in one pass, so each partition's records are in table
    order even where the two kinds meet (sending them as two groups would put all the given ones
    first)."""
    keys = random_keys(200, seed=11)
    given = [None if i % 3 else i % 4 for i in range(200)]
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": [b"%d" % i for i in range(200)],
                      "partition": pa.array(given, pa.int32())})
    with producer(kafka) as p:
        result = p.send_arrow("t", table)
        p.flush()
    placed = {int(row): d.partition for d in result for row in d.rows}
    assert sorted(placed) == list(range(200))
    for i in range(200):
        assert placed[i] == (given[i] if given[i] is not None else partition_for_key(keys[i], 4))
    for partition in range(4):
        expected = [b"%d" % i for i in range(200) if placed[i] == partition]
        assert len(expected) > 10 and values(kafka, partition) == expected
    with producer(kafka) as p, pytest.raises(TypeError, match="must hold integers"):
        p.send_arrow("t", pa.table({"value": [b"x"], "partition": pa.array(["1"])}))


def test_send_arrow_partition_column_explicit_partition_and_null_keys(kafka):
    table = pa.table({"key": pa.array([None, None, b"k"], pa.binary()), "value": [b"a", b"b", b"c"],
                      "partition": pa.array([3, 1, 3], pa.int32())})
    with producer(kafka) as p:
        by_column = p.send_arrow("t", table)
        explicit = p.send_arrow("t", table.drop_columns(["partition"]), partition=2)
        nulls = p.send_arrow("t", pa.table({"value": [b"n1", b"n2", b"n3"]}))
        p.flush()
    assert {(d.partition, tuple(int(r) for r in d.rows)) for d in by_column} == {(1, (1,)), (3, (0, 2))}
    assert [(d.partition, list(d.rows)) for d in explicit] == [(2, [0, 1, 2])]
    assert len({d.partition for d in nulls}) == 1  # keyless rows stick to one partition
    assert values(kafka, 3)[:2] == [b"a", b"c"]


def test_send_arrow_offsets_headers_timestamps_and_compression(kafka):
    headers = pa.array([[{"key": "h", "value": b"1"}], []],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    table = pa.table({"value": [b"a", b"b"], "ts": pa.array([1000, 2000], pa.timestamp("ms")),
                      "hs": headers})
    with producer(kafka, compression="lz4") as p:
        p.send("t", b"first", partition=0)
        result = p.send_arrow("t", table, partition=0, headers_column="hs", timestamp_column="ts")
        p.flush()
    assert [d.offset for d in result] == [1] and result.record_count == 2
    records = kafka.records("t", 0)
    assert [r.value for r in records] == [b"first", b"a", b"b"]
    assert [r.timestamp for r in records[1:]] == [1000, 2000]
    assert records[1].headers == (("h", b"1"),) and records[2].headers == ()
    assert {h.compression for h in kafka.batch_headers("t", 0)} == {3}


def test_send_arrow_splits_big_tables_into_batches_within_batch_bytes_max(kafka):
    table = pa.table({"value": [b"%04d" % i + b"x" * 96 for i in range(300)]})
    with producer(kafka, batch_bytes_max=4096) as p:
        result = p.send_arrow("t", table, partition=1)
        p.flush()
    assert len(result) > 5 and all(h.size <= 4096 for h in kafka.batch_headers("t", 1))
    assert values(kafka, 1) == table.column("value").to_pylist()
    sequences = [h.base_sequence for h in kafka.batch_headers("t", 1)]
    counts = [h.records_count for h in kafka.batch_headers("t", 1)]
    assert sequences == [sum(counts[:i]) for i in range(len(counts))]  # idempotent, consecutive


# ------------------------------------------------------------------ waking the I/O thread


def _sleeping_state(wakes_at_ms: float):
    import socket

    from broker.client.accumulator import RecordAccumulator
    from broker.client.sender import ProducerState

    state = ProducerState(RecordAccumulator(1000, 5))
    state.wake_w, reader = socket.socketpair()
    reader.setblocking(False)
    state.sender_sleeping, state.sender_wakes_at_ms = True, wakes_at_ms
    return state, reader


def _woken(reader) -> bool:
    try:
        return bool(reader.recv(16))
    except BlockingIOError:
        return False


def test_the_io_thread_is_not_woken_for_a_deadline_it_wakes_up_for_anyway():
    state, reader = _sleeping_state(wakes_at_ms=100.0)
    state.wake(unless_awake_by_ms=150.0)  # its alarm (100) comes first: no wake-up
    assert not _woken(reader) and state.sender_sleeping and state.stats["sender_wakeups"] == 0
    state.wake(unless_awake_by_ms=50.0)  # sooner than its alarm: wake it, once
    assert _woken(reader) and not state.sender_sleeping and state.stats["sender_wakeups"] == 1
    state.wake()  # already awake: nothing more is written
    assert not _woken(reader) and state.stats["sender_wakeups"] == 1


def test_sending_from_the_callers_thread_does_not_wake_the_sleeping_io_thread():
    with InMemoryKafka(brokers=1) as kafka:
        kafka.create_topic("t", 1)
        with Producer(kafka.bootstrap, acks=1, linger_ms=0, config=PATIENT) as p:
            p.send("t", b"v", partition=0).get()  # connected, metadata known
            for _ in range(10):
                time.sleep(0.03)  # the I/O thread is asleep in select (its alarm <= 200 ms away)
                before = p.statistics()
                d = p.send("t", b"v", partition=0)  # sent by this thread's turn (``help``)
                assert p.statistics()["requests_sent"] == before["requests_sent"] + 1
                assert p.statistics()["sender_wakeups"] == before["sender_wakeups"]
                assert wait_until(lambda: d.done) and d.succeeded  # the answer woke it by itself


def test_a_record_queued_while_the_io_thread_is_past_collecting_is_sent_without_waiting():
    """``help`` found the I/O thread mid-turn (after it collected): that turn must be followed
    by another at once, not by a sleep until an answer, ``retry_backoff_ms`` (2 s here) or the
    idle cap (200 ms)."""
    import threading

    slow = ClientConfig(request_timeout_ms=5000, connect_timeout_ms=1000, retry_backoff_ms=2000)
    with InMemoryKafka(brokers=1) as kafka:
        kafka.create_topic("t", 1)
        with Producer(kafka.bootstrap, acks=1, linger_ms=0, config=slow) as p:
            p.send("t", b"first", partition=0).get()  # producer id, metadata, connection
            sender = p._sender
            entered, release = threading.Event(), threading.Event()
            original = sender._expire_requests

            def held_after_collect(now):
                if threading.current_thread().name == "pylog-producer-sender" and not release.is_set():
                    entered.set()
                    release.wait(5)
                original(now)

            sender._expire_requests = held_after_collect
            assert entered.wait(5)  # the I/O thread is in a turn, past collecting
            d = p.send("t", b"second", partition=0)  # help(): the I/O lock is taken
            release.set()
            started = time.monotonic()
            assert wait_until(lambda: d.done, timeout_s=1.5) and d.succeeded
            assert time.monotonic() - started < 0.1


def test_at_linger_zero_a_batch_opened_behind_two_in_flight_waits_for_the_next_answer(kafka):
    """The caller sends an opened batch itself only while its partition has fewer than two in
    flight; behind them the batch gathers the records that follow and the next answer's turn
    sends it (no flush, no linger: liveness comes from the answers alone)."""
    kafka.produce_delay_ms = 100
    with producer(kafka, linger_ms=0) as p:
        p.send("t", b"warm", partition=0).get()  # producer id, metadata, connection
        before = p.statistics()
        deliveries = []
        for i in range(2):  # each opens a batch and is sent at once
            deliveries.append(p.send("t", b"%d" % i, partition=0))
            assert wait_until(lambda: p._acc.in_flight_count(("t", 0)) == i + 1)
        for i in range(2, 6):  # two in flight: one batch takes all four
            deliveries.append(p.send("t", b"%d" % i, partition=0))
        assert wait_until(lambda: all(d.done for d in deliveries), timeout_s=3)
        stats = p.statistics()
    assert stats["requests_sent"] - before["requests_sent"] == 3  # not one per record
    assert all(d.succeeded for d in deliveries)
    assert stats["batches_left_to_answers"] - before["batches_left_to_answers"] == 1
    assert values(kafka, 0) == [b"warm"] + [b"%d" % i for i in range(6)]
