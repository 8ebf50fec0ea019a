"""LogSegment and Log reads, truncation, rolling and flushing, table-driven."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import BatchInfo, Log, LogConfig, LogSegment, OffsetOutOfRangeError
from broker.records import Record, decode_batch, encode_batch, iter_batches, read_header

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch_at(base: int, count: int, value_size: int = 40, ts: int = T0) -> bytes:
    records = [
        Record(base + i, ts + i, b"key", bytes([i % 256]) * value_size) for i in range(count)
    ]
    return encode_batch(records)


# Five batches of three records: offsets 0-2, 3-5, 6-8, 9-11, 12-14.
BASES = [0, 3, 6, 9, 12]


@pytest.fixture
def segment(tmp_path: Path):
    config = LogConfig(index_interval_bytes=100)  # every batch after the first gets an entry
    seg = LogSegment.create(tmp_path, 0, config, Clock())
    for base in BASES:
        raw = batch_at(base, 3)
        seg.append([raw], [BatchInfo(base, base + 2, T0 + 2, len(raw))])
    yield seg
    seg.close()


SIZE = len(batch_at(0, 3))  # every batch of the fixture has this size
BIG = 1 << 20


def bases_of(records: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_batches(records)]


@pytest.mark.parametrize(
    "offset, max_bytes, max_offset, min_one, expected",
    [
        (0, BIG, None, True, [0, 3, 6, 9, 12]),
        (4, BIG, None, True, [3, 6, 9, 12]),  # starts with the batch holding the offset
        (5, BIG, None, True, [3, 6, 9, 12]),
        (6, BIG, None, True, [6, 9, 12]),
        (14, BIG, None, True, [12]),
        (4, 2 * SIZE, None, True, [3, 6]),  # exactly two batches fit
        (4, 2 * SIZE - 1, None, True, [3]),  # whole batches only
        (4, 10, None, True, [3]),  # min one batch: the first comes whole anyway
        (4, 0, None, True, [3]),
        (4, 10, None, False, []),  # ... but not without min_one_batch
        (4, SIZE, None, False, [3]),
        (4, BIG, 9, True, [3, 6]),  # high watermark 9: batch 9-11 excluded
        (4, BIG, 10, True, [3, 6, 9]),  # base 9 < 10: included whole
        (4, BIG, 4, True, [3]),
        (4, BIG, 3, True, []),  # the first batch itself starts at the bound
        (0, BIG, 15, True, [0, 3, 6, 9, 12]),
        (7, 3 * SIZE, 12, True, [6, 9]),
    ],
)
def test_segment_read(segment, offset, max_bytes, max_offset, min_one, expected) -> None:
    result = segment.read(offset, max_bytes, max_offset, min_one)
    assert result is not None
    assert bases_of(result.records) == expected
    assert len(result.records) == SIZE * len(expected)
    assert result.batches == len(expected)
    if expected:
        assert result.first_offset == expected[0]
        assert result.next_offset == expected[-1] + 3
        for pos, _ in iter_batches(result.records):
            decode_batch(result.records, pos)  # whole and CRC-valid


def test_segment_read_past_the_end_is_none(segment) -> None:
    assert segment.read(15, BIG) is None
    assert segment.translate_offset(15) is None


@pytest.mark.parametrize(
    "truncate_to, next_offset, remaining",
    [(15, 15, 5), (12, 12, 4), (13, 12, 4), (14, 12, 4), (4, 3, 1), (3, 3, 1), (1, 0, 0),
     (0, 0, 0)],
)
def test_segment_truncate(segment, truncate_to, next_offset, remaining) -> None:
    removed = segment.truncate_to(truncate_to)
    assert removed == SIZE * (5 - remaining)
    assert segment.size == SIZE * remaining
    assert os.path.getsize(segment.log_path) == SIZE * remaining
    assert segment.next_offset == next_offset
    if remaining:
        assert bases_of(segment.read(0, BIG).records) == BASES[:remaining]
    assert segment.index_entries[0] == max(0, remaining - 1)


def test_segment_reopen_restores_state(segment, tmp_path: Path) -> None:
    segment.flush()
    reopened = LogSegment.open(tmp_path, 0, segment._config, Clock())
    try:
        assert not reopened.needs_recovery
        assert reopened.next_offset == 15
        assert reopened.max_timestamp == T0 + 2
        assert reopened.offset_of_max_timestamp == 2
        assert bases_of(reopened.read(7, BIG).records) == [6, 9, 12]
    finally:
        reopened.close()


@pytest.mark.parametrize(
    "size, age_ms, max_ts, last_offset, expected",
    [
        (0, 0, T0, 0, False),
        (None, 0, T0, 15, False),
        (2000 - SIZE, 0, T0, 15, False),  # the append would just fit
        (2000 - SIZE + 1, 0, T0, 15, True),  # the append would pass segment_bytes
        (None, 10_001, T0, 15, True),  # older than segment_ms by the clock
        (None, 10_000, T0, 15, False),
        (None, 0, T0 + 2 + 10_001, 15, True),  # by record time (KIP-33)
        (None, 0, T0 + 2 + 10_000, 15, False),
        (None, 0, T0, 2**31, True),  # relative offset would overflow int32
    ],
)
def test_should_roll(tmp_path, size, age_ms, max_ts, last_offset, expected) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=2000, segment_ms=10_000)
    seg = LogSegment.create(tmp_path, 0, config, clock)
    try:
        if size != 0:
            for base in BASES:
                raw = batch_at(base, 3)
                seg.append([raw], [BatchInfo(base, base + 2, T0 + 2, len(raw))])
        if size not in (0, None):
            seg._size = size  # pretend: only the size matters for this row
        assert seg.should_roll(SIZE, max_ts, last_offset, clock.now + age_ms) is expected
    finally:
        seg.close()


def test_full_index_rolls(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(index_interval_bytes=0, segment_index_bytes=24)  # 3 offset entries
    log = Log.open(tmp_path / "t-0", config, clock)
    for _ in range(9):
        log.append_as_leader(batch_at(0, 1), 0)
    # a segment takes 4 batches (first unindexed + 3 indexed), then the index is full
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert [s.index_entries[0] for s in log.segments] == [3, 3, 0]
    log.close()


# ------------------------------------------------------------------------------ Log.read


@pytest.fixture
def log(tmp_path: Path):
    clock = Clock()
    config = LogConfig(segment_bytes=3 * SIZE, index_interval_bytes=100)
    log = Log.open(tmp_path / "orders-0", config, clock)
    for base in BASES:
        info = log.append_as_leader(batch_at(99, 3), leader_epoch=7)
        assert info.first_offset == base
    yield log
    log.close()


def test_log_segments_and_reads_across_them(log: Log) -> None:
    assert [s.base_offset for s in log.segments] == [0, 9]
    # one read returns data of one segment only
    assert bases_of(log.read(0, BIG).records) == [0, 3, 6]
    assert bases_of(log.read(9, BIG).records) == [9, 12]
    data = log.read(4, BIG)
    assert (data.first_offset_found, data.next_offset, data.batches) == (3, 9, 2)
    for pos, header in iter_batches(data.records):
        assert header.partition_leader_epoch == 7
        batch = decode_batch(data.records, pos)
        assert [r.offset for r in batch.records] == [header.base_offset + i for i in range(3)]


@pytest.mark.parametrize("offset", [-1, 16, 100])
def test_log_read_out_of_range(log: Log, offset: int) -> None:
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(offset, BIG)
    assert info.value.kafka_error_code == 1


def test_log_read_at_log_end_is_empty(log: Log) -> None:
    data = log.read(15, BIG)
    assert (data.records, data.batches, data.next_offset, data.log_end_offset) == (b"", 0, 15, 15)


def test_log_read_below_log_start_after_delete_records(log: Log) -> None:
    assert log.delete_records_before(10) == 10
    assert [s.base_offset for s in log.segments] == [9]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, BIG)
    assert bases_of(log.read(10, BIG).records) == [9, 12]  # the batch holding 10 starts at 9


def test_log_read_skips_an_empty_rolled_segment(log: Log) -> None:
    log.roll()
    assert log.active_segment.size == 0
    assert bases_of(log.read(12, BIG).records) == [12]
    log.append_as_leader(batch_at(0, 2), 7)
    assert bases_of(log.read(15, BIG).records) == [15]


def test_log_flush_advances_recovery_point(log: Log) -> None:
    assert log.recovery_point == 0
    log.flush(4)
    assert log.recovery_point == 4
    log.flush(2)  # never backwards
    assert log.recovery_point == 4
    log.flush()
    assert log.recovery_point == 15
    assert not any(s.is_dirty for s in log.segments)


def test_flush_policy_by_messages_and_time(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(flush_messages=5, flush_ms=1000), clock)
    log.append_as_leader(batch_at(0, 3), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch_at(0, 3), 0)  # 6 unflushed >= 5
    assert log.recovery_point == 6
    log.append_as_leader(batch_at(0, 1), 0)
    assert log.recovery_point == 6 and not log.maybe_flush()
    clock.now += 1000
    assert log.maybe_flush()
    assert log.recovery_point == 7
    log.close()


def test_maybe_flush_flushes_rolled_segments(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(), clock)
    log.append_as_leader(batch_at(0, 3), 0)
    log.roll()
    log.append_as_leader(batch_at(0, 3), 0)
    assert log.maybe_flush()
    assert log.recovery_point == 3  # up to the active segment, like Kafka's flush after a roll
    assert not log.maybe_flush()
    log.close()


def test_time_index_final_entry_on_roll(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(index_interval_bytes=1 << 20), clock)
    log.append_as_leader(batch_at(0, 2, ts=T0 + 50), 0)
    log.append_as_leader(batch_at(0, 2, ts=T0 + 10), 0)
    first = log.active_segment
    assert first.index_entries == (0, 0)
    log.roll()
    assert first.index_entries == (0, 1)
    raw = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    assert raw == (T0 + 51).to_bytes(8, "big") + (1).to_bytes(4, "big")
    log.close()


def test_offset_for_timestamp_table(tmp_path: Path) -> None:
    clock = Clock()
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200, index_interval_bytes=50), clock)
    timestamps = [[10, 30, 20], [25, 26], [5], [40, 45, 41], [44]]
    for tss in timestamps:
        records = [Record(i, T0 + t, None, b"v") for i, t in enumerate(tss)]
        log.append_as_leader(encode_batch(records), 0)
    assert len(log.segments) > 1
    flat = [(o, T0 + t) for o, t in enumerate(t for tss in timestamps for t in tss)]
    for target in range(0, 50):
        expected = next(((o, t) for o, t in flat if t >= T0 + target), None)
        assert log.offset_for_timestamp(T0 + target) == expected, target
    assert log.offset_for_timestamp(-1) == (10, -1)  # latest
    assert log.offset_for_timestamp(-2) == (0, -1)  # earliest
    assert log.offset_for_timestamp(-3) == (7, T0 + 45)  # max timestamp
    log.delete_records_before(4)
    assert log.offset_for_timestamp(T0) == (4, T0 + 26)  # never below the log start
    assert log.offset_for_timestamp(-2) == (4, -1)
    log.close()


def test_truncate_to_across_segments(log: Log) -> None:
    assert log.truncate_to(5)  # drops batch 3-5 whole and the second segment
    assert log.log_end_offset == 3
    assert [s.base_offset for s in log.segments] == [0]
    assert bases_of(log.read(0, BIG).records) == [0]
    assert not log.truncate_to(3)
    info = log.append_as_leader(batch_at(0, 2), 8)
    assert info.first_offset == 3
    assert read_header(log.read(3, BIG).records).partition_leader_epoch == 8


def test_truncate_below_first_segment_starts_over(log: Log) -> None:
    log.delete_records_before(9)
    assert log.segments[0].base_offset == 9
    assert log.truncate_to(4)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (4, 4, 4)
    assert log.append_as_leader(batch_at(0, 1), 1).first_offset == 4


def test_truncate_fully_and_start_at(log: Log) -> None:
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    assert sorted(p.name for p in log.directory.iterdir()) == [
        "00000000000000000100.index", "00000000000000000100.log", "00000000000000000100.timeindex"
    ]
    assert log.append_as_leader(batch_at(0, 1), 1).first_offset == 100


@pytest.mark.parametrize("interval", [4096, 1 << 30])  # the default; one so big it never indexes
def test_reads_of_recent_small_batches_match_a_scan(tmp_path: Path, interval: int) -> None:
    """A consumer at the tail reads batches appended since the last index entry; the segment
    answers those from memory (kept for at most 256 batches) and must agree, at every offset,
    with a fresh segment that only has its index and the file, also after a truncation."""
    config = LogConfig(index_interval_bytes=interval)
    seg = LogSegment.create(tmp_path, 0, config, Clock())
    raws = []
    for base in range(300):  # more than the 256 kept: older ones fall back to the index
        raw = batch_at(base, 1, value_size=100)
        seg.append([raw], [BatchInfo(base, base, T0, len(raw))])
        raws.append(raw)
    seg.flush()

    def check(seg: LogSegment, end: int) -> None:
        for offset in range(end):
            found = seg.read(offset, len(raws[0]))
            assert bases_of(found.records) == [offset]
        assert seg.read(end, BIG) is None

    check(seg, 300)
    reopened = LogSegment.open(tmp_path, 0, config, Clock())
    check(reopened, 300)
    reopened.close()
    seg.truncate_to(290)
    check(seg, 290)
    raw = batch_at(290, 1, value_size=100)
    seg.append([raw], [BatchInfo(290, 290, T0, len(raw))])
    check(seg, 291)
    seg.close()


def test_log_append_time_restamps_each_batch_and_keeps_its_records(tmp_path: Path) -> None:
    """message.timestamp.type=LogAppendTime: the leader's clock becomes each batch's max
    timestamp with the timestamp type bit set and a fresh CRC; records and their own timestamps
    are stored as sent; the time index and ListOffsets use the stamp."""
    clock = Clock(T0 + 50_000)
    log = Log.open(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), clock)
    sent = batch_at(0, 3, ts=T0)
    info = log.append_as_leader(sent, 4)
    clock.now += 10
    second = log.append_as_leader(batch_at(0, 2, ts=T0 + 99_000), 4)
    assert (info.log_append_time, info.max_timestamp, second.log_append_time) == (T0 + 50_000,) * 2 + (T0 + 50_010,)
    stored = log.read(0, BIG).records
    headers = [header for _, header in iter_batches(stored)]
    assert [(h.timestamp_type, h.max_timestamp, h.base_timestamp) for h in headers] == [
        (1, T0 + 50_000, T0), (1, T0 + 50_010, T0 + 99_000)]
    batch = decode_batch(stored, 0)  # the CRC was recomputed (decode checks it)
    assert batch.records == decode_batch(sent, 0).records
    assert log.offset_for_timestamp(T0 + 50_001) == (3, T0 + 50_010)
    assert log.offset_for_timestamp(-3) == (3, T0 + 50_010)
    log.close()
