"""The producer's accumulator: batching by size and linger, several batches in flight per
partition, strictly ordered resends after a retriable failure, exact byte accounting."""

from __future__ import annotations

import pytest

from broker.client.accumulator import (
    BATCH_OVERHEAD,
    IN_FLIGHT,
    QUEUED,
    RETRY,
    RecordAccumulator,
    record_size_max,
)
from broker.records import Record, decode_batch, encode_batch

TP = ("t", 0)
OTHER = ("t", 1)
NO_FORCE = -1


def fill(acc: RecordAccumulator, tp, count: int, now: float = 0.0, value: bytes = b"v"):
    batches = []
    size = record_size_max(None, value, ())
    for _ in range(count):
        batch, _ = acc.append_record(tp, None, value, 0, (), size, now)
        batches.append(batch)
    return batches


def unique(batches):
    return list({id(b): b for b in batches}.values())


@pytest.mark.parametrize("key, value, headers", [
    (None, None, ()),
    (b"k", b"v" * 100, ()),
    (b"", b"", (("h", b"x"), ("n", None))),
    (b"k" * 300, b"v" * 70000, (("h" * 200, b"y" * 300),)),
])
def test_record_size_max_is_an_upper_bound_of_the_encoded_size(key, value, headers):
    record = Record(0, 1_700_000_000_000, key, value, headers)
    encoded = encode_batch([record], base_offset=0)
    assert len(encoded) - BATCH_OVERHEAD <= record_size_max(key, value, headers)
    assert decode_batch(encoded).records[0].value == value


def test_records_share_a_batch_until_it_is_full_then_it_is_sealed():
    size = record_size_max(None, b"x" * 100, ())
    capacity = (1000 - BATCH_OVERHEAD) // size
    acc = RecordAccumulator(batch_bytes_max=1000, linger_ms=10_000)
    batches = fill(acc, TP, capacity + 1, value=b"x" * 100)
    assert all(b is batches[0] for b in batches[:capacity])
    assert batches[capacity] is not batches[0]
    assert batches[0].sealed and not batches[capacity].sealed
    assert batches[0].size_bytes <= 1000
    assert acc.records_buffered == capacity + 1


def test_append_reports_when_a_batch_got_sealed():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=10_000)
    size = record_size_max(None, b"x" * 40, ())
    sealed = [acc.append_record(TP, None, b"x" * 40, 0, (), size, 0.0)[1] for _ in range(6)]
    assert True in sealed  # the producer wakes its I/O thread exactly then


def test_an_oversize_record_gets_a_batch_of_its_own():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    small = fill(acc, TP, 1)[0]
    big = fill(acc, TP, 1, value=b"x" * 1000)[0]
    after = fill(acc, TP, 1)[0]
    assert big is not small and after is not big
    assert big.record_count == 1


def test_ready_by_linger_size_or_flush_serial():
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=50)
    (batch, *_) = fill(acc, TP, 3, now=100.0)
    assert acc.next_sendable(TP, 149.0, NO_FORCE) is None
    assert acc.next_wakeup_ms(149.0, NO_FORCE) == 150.0
    assert acc.next_sendable(TP, 150.0, NO_FORCE) is batch
    assert acc.next_sendable(TP, 101.0, force_serial=batch.serial) is batch  # flush
    assert acc.next_sendable(TP, 101.0, force_serial=batch.serial - 1) is None


def test_a_full_batch_is_ready_before_linger():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=10_000)
    batches = fill(acc, TP, 20, now=0.0)
    assert acc.next_sendable(TP, 1.0, NO_FORCE) is batches[0]
    assert acc.next_wakeup_ms(1.0, NO_FORCE) == 1.0


def test_batches_of_a_partition_go_out_in_order_and_several_may_be_in_flight():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    batches = unique(fill(acc, TP, 20))
    assert len(batches) >= 4
    sent = []
    for _ in range(3):
        batch = acc.next_sendable(TP, 0.0, NO_FORCE)
        acc.mark_in_flight(batch, 0.0)
        sent.append(batch)
    assert sent == batches[:3] and acc.in_flight_count(TP) == 3
    assert all(b.state == IN_FLIGHT and b.sealed for b in sent)
    assert acc.next_sendable(TP, 0.0, NO_FORCE) is batches[3]


def test_after_a_retriable_failure_the_partition_resends_from_the_first_batch_in_order():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    batches = unique(fill(acc, TP, 20))
    for batch in batches[:3]:
        acc.mark_in_flight(batch, 0.0)
    acc.mark_retry(batches[0], retry_at_ms=10.0)
    # batches 1 and 2 are still in flight: nothing goes out until they are back
    assert acc.next_sendable(TP, 100.0, NO_FORCE) is None
    acc.mark_retry(batches[1], retry_at_ms=10.0)  # OUT_OF_ORDER_SEQUENCE after the gap
    assert acc.next_sendable(TP, 100.0, NO_FORCE) is None
    acc.remove(batches[2])  # the last one was written after all (acknowledged)
    assert acc.next_sendable(TP, 5.0, NO_FORCE) is None  # backoff
    assert acc.next_wakeup_ms(5.0, NO_FORCE) == 10.0
    assert acc.next_sendable(TP, 10.0, NO_FORCE) is batches[0]
    acc.mark_in_flight(batches[0], 10.0)
    # While resending, one batch at a time (as Java does): the next waits for this answer.
    assert acc.next_sendable(TP, 10.0, NO_FORCE) is None
    acc.remove(batches[0])
    assert acc.next_sendable(TP, 10.0, NO_FORCE) is batches[1]
    acc.mark_in_flight(batches[1], 10.0)
    acc.remove(batches[1])
    assert acc.next_sendable(TP, 10.0, NO_FORCE) is batches[3]  # retries done: pipelining again
    assert batches[0].first_sent_ms == 0.0  # the first send is remembered


def test_other_partitions_are_not_held_back_by_a_retry():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    first = fill(acc, TP, 1)[0]
    other = fill(acc, OTHER, 1)[0]
    acc.mark_in_flight(first, 0.0)
    acc.mark_retry(first, retry_at_ms=1000.0)
    assert acc.next_sendable(OTHER, 0.0, NO_FORCE) is other


def test_encoded_batches_queue_behind_the_open_batch_and_seal_it():
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=10_000)
    open_batch = fill(acc, TP, 2)[0]
    payload = encode_batch([Record(0, 0, None, b"a"), Record(1, 0, None, b"b")], base_offset=0)
    encoded = acc.append_encoded(TP, payload, 2, object(), 0.0)
    assert open_batch.sealed and encoded.sealed
    assert list(acc.batches()) == [open_batch, encoded]
    assert acc.bytes_buffered == open_batch.size_bytes + len(payload)
    assert acc.records_buffered == 4
    after = fill(acc, TP, 1)[0]
    assert after is not open_batch and list(acc.batches())[-1] is after


def test_requeue_after_a_producer_id_reset():
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=0)
    batch = fill(acc, TP, 1)[0]
    acc.mark_in_flight(batch, 0.0)
    acc.mark_retry(batch, 50.0)
    assert batch.state == RETRY
    acc.requeue(batch)
    assert batch.state == QUEUED and acc.next_sendable(TP, 0.0, NO_FORCE) is batch


def test_remove_keeps_the_counters_exact_and_flush_serials_advance():
    acc = RecordAccumulator(batch_bytes_max=300, linger_ms=0)
    batches = unique(fill(acc, TP, 10) + fill(acc, OTHER, 3))
    # sealed batches are charged what they hold, open ones their whole reservation
    assert acc.bytes_buffered == sum(b.size_bytes if b.sealed else 300 for b in batches)
    assert any(not b.sealed for b in batches)
    assert acc.oldest_serial() == batches[0].serial
    acc.mark_in_flight(batches[0], 0.0)
    acc.remove(batches[1])  # an answer for a later batch does not move the oldest serial
    assert acc.oldest_serial() == batches[0].serial
    for batch in batches:
        if batch is not batches[1]:
            acc.remove(batch)
    assert acc.empty and acc.bytes_buffered == 0 and acc.records_buffered == 0
    assert acc.oldest_serial() == float("inf") and acc.last_serial == batches[-1].serial
    assert list(acc.batches()) == []
    assert acc.next_wakeup_ms(0.0, NO_FORCE) is None


def test_resize_charges_the_encoded_size():
    acc = RecordAccumulator(batch_bytes_max=300, linger_ms=0)
    batch = fill(acc, TP, 3)[0]
    acc.mark_in_flight(batch, 0.0)  # sealed: what it holds is charged, not its reservation
    assert acc.bytes_buffered == batch.size_bytes < 300
    acc.resize(batch, 100)
    assert acc.bytes_buffered == 100 == batch.size_bytes


def test_an_open_batch_is_charged_its_reservation_until_sealed():
    acc = RecordAccumulator(batch_bytes_max=1_000, linger_ms=10_000, reserve_bytes=700)
    assert acc.reserve_bytes == 700  # a buffer smaller than a batch caps the reservation
    batch = fill(acc, TP, 1)[0]
    assert acc.bytes_buffered == 700 == batch.limit and batch.size_bytes < 700
    big = record_size_max(None, b"x" * 2_000, ())
    lone, _ = acc.append_record(OTHER, None, b"x" * 2_000, 0, (), big, 0.0)
    assert lone.limit == BATCH_OVERHEAD + big and lone.sealed  # one over-size record: its own size
    assert acc.bytes_buffered == 700 + lone.size_bytes
    while not batch.sealed:  # fills up to its limit, then seals and releases the unused part
        fill(acc, TP, 1)
    assert batch.size_bytes <= 700
    assert acc.bytes_buffered == sum(b.size_bytes if b.sealed else 700 for b in acc.batches())


def test_would_open_batch():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    size = record_size_max(None, b"x" * 20, ())
    assert BATCH_OVERHEAD + 2 * size <= 200
    assert acc.would_open_batch(TP, size)
    fill(acc, TP, 1, value=b"x" * 20)
    assert not acc.would_open_batch(TP, size)
    assert acc.would_open_batch(TP, 10_000)
