"""The log cleaner on real segment files: whole passes, several passes, stale output, and a crash
between every two steps of the swap (the log reads as before or as after, never a mixture)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.log import Log, LogConfig
from broker.log.cleaner.cleaning_pass import CleanerSettings, begin_pass, clean_once
from broker.log.cleaner.segment_cleaner import CLEANED_FILE_SUFFIX
from broker.log.cleaner.swap import swap_steps
from broker.records import Compression, Record, decode_batch, encode_batch, iter_batches

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=128, delete_retention_ms=1000)
SETTINGS = CleanerSettings(hash_keys=(1, 2, 3, 4), io_buffer_bytes=700)


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(directory: Path, clock: Clock, clean_shutdown: bool = True) -> Log:
    return Log.open(directory, CONFIG, clock, clean_shutdown=clean_shutdown)


def write(log: Log, writes: list[tuple[bytes | None, bytes | None]], batch: int = 3, producer_id: int = -1,
          codec: int = Compression.NONE) -> None:
    """Append ``writes`` (key, value) in batches of ``batch``; offsets come from the log."""
    for i in range(0, len(writes), batch):
        chunk = writes[i:i + batch]
        records = [Record(j, T0 + i + j, k, v) for j, (k, v) in enumerate(chunk)]
        seq = -1 if producer_id < 0 else i
        log.append_as_leader(encode_batch(records, compression=codec, producer_id=producer_id,
                                          producer_epoch=0 if producer_id >= 0 else -1, base_sequence=seq), 0)


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        fetched = log.read(offset, 1 << 20)
        if not fetched.batches:
            break
        for _, header in iter_batches(fetched.records):
            pass
        pos = 0
        while pos < len(fetched.records):
            batch = decode_batch(fetched.records, pos)
            out.extend((r.offset, r.key, r.value) for r in batch.records if r.offset >= offset)
            pos += batch.header.size
        offset = fetched.next_offset
    return out


def model(writes, drop_tombstones: bool) -> list[tuple[int, bytes | None, bytes | None]]:
    last = {}
    for offset, (key, value) in enumerate(writes):
        last[key] = (offset, key, value)
    return sorted(v for v in last.values() if not (drop_tombstones and v[2] is None))


def clean(log: Log, clock: Clock, checkpoint=None, settings=SETTINGS, **kw):
    end = log.log_end_offset
    return clean_once(log, checkpoint=checkpoint, high_watermark=end, last_stable_offset=end, now_ms=clock(),
                      settings=settings, **kw)


def random_writes(rng: random.Random, n: int, keys: int, tombstones: float = 0.1):
    return [(b"key-%d" % rng.randrange(keys), None if rng.random() < tombstones else b"v%d" % i * 3)
            for i in range(n)]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4, Compression.GZIP])
def test_a_pass_keeps_the_last_value_of_each_key_at_its_offset(tmp_path, codec):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    writes = random_writes(random.Random(1), 400, keys=30)
    write(log, writes, codec=codec)
    log.roll()  # everything inactive: the active segment is never cleaned
    before = len(log.segments)
    checkpoint, stats = clean(log, clock)
    assert checkpoint == log.log_end_offset == 400
    assert read_all(log) == model(writes, drop_tombstones=False)
    assert stats.swapped_groups == before - 1 and stats.bytes_written < stats.bytes_read / 3
    # Groups are planned by the segments' sizes before cleaning (as Kafka's): the next pass
    # merges the small cleaned segments.
    write(log, [(b"key-0", b"newest")])
    log.roll()
    clean(log, clock, checkpoint=checkpoint)
    assert len(log.segments) < before / 3
    writes.append((b"key-0", b"newest"))
    # The same log, reopened after a clean shutdown and after a crash, reads the same.
    log.close()
    for clean_shutdown in (True, False):
        log = open_log(tmp_path / "t-0", clock, clean_shutdown=clean_shutdown)
        assert read_all(log) == model(writes, drop_tombstones=False)
        log.close()


def test_tombstones_go_on_a_pass_after_the_delete_horizon(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    writes = random_writes(random.Random(2), 200, keys=20, tombstones=0.3)
    write(log, writes)
    log.roll()
    checkpoint, _ = clean(log, clock)
    clock.now += CONFIG.delete_retention_ms
    write(log, [(b"other", b"x")])  # something dirty, so the log is cleaned again
    log.roll()
    clean(log, clock, checkpoint=checkpoint)
    assert read_all(log) == model(writes, drop_tombstones=True) + [(200, b"other", b"x")]


def test_a_small_dedupe_buffer_cleans_in_several_passes(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    writes = random_writes(random.Random(3), 300, keys=40, tombstones=0)
    write(log, writes)
    log.roll()
    settings = SETTINGS._replace(dedupe_buffer_bytes=24 * 8)  # 6 keys per pass
    checkpoint, passes = None, 0
    while checkpoint != log.log_end_offset:
        checkpoint, _ = clean(log, clock, checkpoint=checkpoint, settings=settings)
        passes += 1
        assert passes < 50
    assert passes >= 40 // 6
    assert read_all(log) == model(writes, drop_tombstones=False)


def test_the_last_batch_of_each_producer_survives_empty(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    write(log, [(b"a", b"1"), (b"b", b"1")], batch=2, producer_id=5)
    write(log, [(b"a", b"2"), (b"b", b"2")], batch=2)
    log.roll()
    clean(log, clock, producer_last_offsets={5: 1})
    headers = []
    for segment in log.segments:
        data = log.read(segment.base_offset, 1 << 20).records if segment.size else b""
        headers += [h for _, h in iter_batches(data)]
    producer_batch = next(h for h in headers if h.producer_id == 5)
    assert (producer_batch.base_offset, producer_batch.last_offset, producer_batch.records_count) == (0, 1, 0)
    assert read_all(log) == [(2, b"a", b"2"), (3, b"b", b"2")]


def test_output_of_a_log_that_changed_during_the_pass_is_thrown_away(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    writes = random_writes(random.Random(4), 200, keys=10)
    write(log, writes)
    log.roll()
    end = log.log_end_offset
    cleaning = begin_pass(log, checkpoint=None, high_watermark=end, last_stable_offset=end, now_ms=clock(),
                          settings=SETTINGS)
    cleaning.build_map()
    group = cleaning.groups[0]
    cleaned = cleaning.clean(group)
    log.truncate_to(99)  # a follower truncates while the pass runs (99 starts a batch)
    assert cleaning.swap(group, cleaned) is False
    cleaning.close()
    assert not list((tmp_path / "t-0").glob("*" + CLEANED_FILE_SUFFIX))
    assert [r[0] for r in read_all(log)] == list(range(99))


def _crash_after(tmp_path: Path, steps_run: int):
    """Clean one group, run the first ``steps_run`` swap steps, then crash (no close)."""
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    writes = random_writes(random.Random(5), 150, keys=12)
    write(log, writes)
    log.roll()
    before = read_all(log)
    end = log.log_end_offset
    cleaning = begin_pass(log, checkpoint=None, high_watermark=end, last_stable_offset=end, now_ms=clock(),
                          settings=SETTINGS)
    cleaning.build_map()
    group = cleaning.groups[0]
    cleaned = cleaning.clean(group)
    cleaned.flush()
    paths = cleaned.file_paths
    cleaned.close()
    group_end = group[-1].next_offset
    data = paths[0].read_bytes()
    cleaned_records, pos = [], 0
    while pos < len(data):
        batch = decode_batch(data, pos)
        cleaned_records += [(r.offset, r.key, r.value) for r in batch.records]
        pos += batch.header.size
    expected_after = cleaned_records + [r for r in before if r[0] >= group_end]
    steps = swap_steps(directory, paths, CLEANED_FILE_SUFFIX, [s.file_paths for s in group])
    for _, step in steps[:steps_run]:
        step()
    cleaning.close()
    log.close_handles()  # the crash: nothing flushed, nothing cleaned up
    return directory, clock, before, expected_after, len(steps)


@pytest.mark.parametrize("steps_run", range(6))
def test_a_crash_between_any_two_swap_steps_leaves_the_old_or_the_cleaned_log(tmp_path, steps_run):
    directory, clock, before, expected_after, total = _crash_after(tmp_path, steps_run)
    assert total == 5 and expected_after != before
    log = open_log(directory, clock, clean_shutdown=False)
    after = read_all(log)
    log.close()
    # Before step 2 (the cleaned log renamed to .swap) the old segments stay; from it on, the
    # swap is completed. Records are exactly the old log's or the cleaned one's.
    assert after == (before if steps_run < 2 else expected_after)
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]


def test_a_read_at_an_offset_cleaned_away_returns_the_next_batch(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    writes = [(b"a", b"%d" % i) for i in range(30)] + [(b"b", b"last")]
    write(log, writes, batch=1)
    log.roll()
    clean(log, clock)
    assert read_all(log) == [(29, b"a", b"29"), (30, b"b", b"last")]
    for offset in (0, 5, 17, 28):  # cleaned away: the fetch continues at the next surviving batch
        fetched = log.read(offset, 1 << 20)
        assert next(iter_batches(fetched.records))[1].last_offset >= offset  # nothing wholly below it
        records, position = [], offset
        while not records:  # a read serves one segment: continue where it says, as consumers do
            fetched = log.read(position, 1 << 20)
            records = [r.offset for pos, _ in iter_batches(fetched.records)
                       for r in decode_batch(fetched.records, pos).records if r.offset >= position]
            position = fetched.next_offset
        assert records[0] == 29  # empty batches, kept for their span, carry no record
