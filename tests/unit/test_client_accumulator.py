"""The producer's accumulator: batching by size and linger, one batch in flight per partition."""

from __future__ import annotations

import pytest

from broker.client.accumulator import BATCH_OVERHEAD, PendingRecord, RecordAccumulator, record_size_max
from broker.records import Record, decode_batch, encode_batch

TP = ("t", 0)
OTHER = ("t", 1)


def rec(value: bytes = b"v", key: bytes | None = None) -> tuple[PendingRecord, int]:
    return PendingRecord(key, value, (), 0, object()), record_size_max(key, value, ())


def fill(acc: RecordAccumulator, tp, count: int, now: float = 0.0, value: bytes = b"v"):
    batches = []
    for _ in range(count):
        record, size = rec(value)
        batches.append(acc.append(tp, record, size, now))
    return batches


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


def test_records_share_a_batch_until_it_is_full():
    record, size = rec(b"x" * 100)
    capacity = (1000 - BATCH_OVERHEAD) // size
    acc = RecordAccumulator(batch_bytes_max=1000, linger_ms=10_000)
    batches = fill(acc, TP, capacity + 1, value=b"x" * 100)
    assert all(b is batches[0] for b in batches[:capacity])
    assert batches[capacity] is not batches[0]
    assert batches[0].size_bytes <= 1000
    assert acc.records_buffered == capacity + 1


def test_an_oversize_record_gets_a_batch_of_its_own():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    small = fill(acc, TP, 1)[0]
    big = fill(acc, TP, 1, value=b"x" * 1000)[0]
    after = fill(acc, TP, 1)[0]
    assert big is not small and after is not big
    assert big.record_count == 1


def test_ready_by_linger_size_or_force():
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=50)
    fill(acc, TP, 3, now=100.0)
    assert acc.ready(now_ms=149.0) == []
    assert acc.next_wakeup_ms(149.0) == 150.0
    assert [b.tp for b in acc.ready(now_ms=150.0)] == [TP]
    assert [b.tp for b in acc.ready(now_ms=101.0, force=True)] == [TP]


def test_a_full_batch_is_ready_before_linger():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=10_000)
    fill(acc, TP, 20, now=0.0)  # several batches: the head is full
    ready = acc.ready(now_ms=1.0)
    assert len(ready) == 1 and ready[0].tp == TP


def test_only_the_head_batch_and_never_two_in_flight_per_partition():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    batches = fill(acc, TP, 20)
    fill(acc, OTHER, 1)
    ready = acc.ready(now_ms=0.0, force=True)
    assert {b.tp for b in ready} == {TP, OTHER}
    head = next(b for b in ready if b.tp == TP)
    assert head is batches[0]
    head.in_flight = True
    assert all(b.tp != TP for b in acc.ready(now_ms=0.0, force=True))  # the next one waits
    acc.remove(head)
    assert next(b for b in acc.ready(now_ms=0.0, force=True) if b.tp == TP) is not head


def test_a_sent_batch_is_frozen_and_a_retry_waits_for_its_backoff():
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=0)
    head = fill(acc, TP, 1)[0]
    head.payload = b"encoded"
    assert fill(acc, TP, 1)[0] is not head  # no record joins bytes already sent
    head.attempts, head.retry_at_ms = 1, 500.0
    assert acc.ready(now_ms=499.0, force=True) == []
    assert acc.next_wakeup_ms(0.0, force=True) == 500.0
    assert acc.ready(now_ms=500.0) == [head]  # a retry does not wait for linger again


def test_remove_keeps_the_counters_exact():
    acc = RecordAccumulator(batch_bytes_max=300, linger_ms=0)
    batches = fill(acc, TP, 10) + fill(acc, OTHER, 3)
    assert acc.bytes_buffered == sum(b.size_bytes - BATCH_OVERHEAD for b in {id(b): b for b in batches}.values())
    for batch in {id(b): b for b in batches}.values():
        acc.remove(batch)
    assert acc.empty and acc.bytes_buffered == 0 and acc.records_buffered == 0
    assert list(acc.batches()) == []
    assert acc.next_wakeup_ms(0.0) is None


def test_would_open_batch():
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=0)
    record, size = rec(b"x" * 20)
    assert BATCH_OVERHEAD + 2 * size <= 200
    assert acc.would_open_batch(TP, size)
    acc.append(TP, record, size, 0.0)
    assert not acc.would_open_batch(TP, size)
    assert acc.would_open_batch(TP, 10_000)
