"""Offset and time indexes: lookups, sanity checks, and rebuilds of damaged index files."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from broker.log import Log, LogConfig, OffsetIndex, TimeIndex
from broker.records import Compression, Record, encode_batch, iter_batches

BASE = 100


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_index(
    tmp_path: Path, entries: list[tuple[int, int]], max_bytes: int = 1024
) -> OffsetIndex:
    index = OffsetIndex(tmp_path / "x.index", BASE, max_bytes)
    index.reset()
    for offset, position in entries:
        assert index.append(offset, position)
    index.flush()
    return index


def test_new_entries_reach_the_file_at_flush_and_close(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", BASE, 1 << 20)
    index.reset()
    index.append(110, 100)
    assert os.path.getsize(tmp_path / "x.index") == 0  # pending in memory
    index.flush()
    assert os.path.getsize(tmp_path / "x.index") == 8
    for i in range(1, 600):  # more than 4 KiB pending: written without a flush
        index.append(110 + i, 100 + i)
    assert os.path.getsize(tmp_path / "x.index") >= 4096
    index.close()
    assert os.path.getsize(tmp_path / "x.index") == 600 * 8
    reopened = OffsetIndex(tmp_path / "x.index", BASE, 1 << 20)
    assert reopened.check_quick(10**6) and reopened.load()
    assert reopened.lookup(10**6) == (709, 699)
    reopened.close()


ENTRIES = [(110, 100), (120, 250), (135, 400)]


@pytest.mark.parametrize(
    "target, expected",
    [
        (0, (BASE, 0)),  # below the base offset
        (BASE, (BASE, 0)),
        (109, (BASE, 0)),  # below the first entry
        (110, (110, 100)),
        (119, (110, 100)),
        (120, (120, 250)),
        (134, (120, 250)),
        (135, (135, 400)),
        (10**12, (135, 400)),  # far past the end: the last entry
    ],
)
def test_offset_index_lookup(tmp_path: Path, target: int, expected: tuple[int, int]) -> None:
    index = make_index(tmp_path, ENTRIES)
    assert index.lookup(target) == expected
    # the same answer after a reopen that loads the file
    reopened = OffsetIndex(tmp_path / "x.index", BASE, 1024)
    assert reopened.check_quick(log_size=1000)
    assert reopened.load()
    assert reopened.lookup(target) == expected


@pytest.mark.parametrize(
    "offset, expected",
    [
        (105, 250),  # first entry with key >= 105 is 110 -> bound is the next entry's position
        (110, 250),
        (111, 400),
        (120, 400),
        (121, None),  # first key >= 121 is the last entry: no bound
        (135, None),
        (500, None),
    ],
)
def test_offset_index_position_after(tmp_path: Path, offset: int, expected: int | None) -> None:
    assert make_index(tmp_path, ENTRIES).position_after(offset) == expected


def test_offset_index_full_refuses_and_writes_nothing(tmp_path: Path) -> None:
    index = make_index(tmp_path, ENTRIES[:2], max_bytes=16)
    assert index.is_full
    assert not index.append(200, 900)
    assert os.path.getsize(tmp_path / "x.index") == 16
    assert index.lookup(10**6) == (120, 250)


@pytest.mark.parametrize(
    "truncate_at, remaining",
    [(200, 3), (135, 2), (121, 2), (120, 1), (110, 0), (0, 0)],
)
def test_offset_index_truncate(tmp_path: Path, truncate_at: int, remaining: int) -> None:
    index = make_index(tmp_path, ENTRIES)
    index.truncate_to(truncate_at)
    assert index.entries == remaining
    assert os.path.getsize(tmp_path / "x.index") == 8 * remaining
    assert index.last_entry == (ENTRIES[remaining - 1] if remaining else None)


def _raw_index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


@pytest.mark.parametrize(
    "raw, log_size, quick_ok, load_ok",
    [
        (_raw_index([(10, 100), (20, 250)]), 1000, True, True),
        (_raw_index([(10, 100), (20, 250)])[:-3], 1000, False, None),  # torn entry
        (_raw_index([(10, 100), (20, 250)]), 250, False, None),  # points at/after the log end
        (_raw_index([(10, 100), (20, 250)]), 200, False, None),
        (_raw_index([(-1, 100)]), 1000, False, None),  # negative relative offset
        (_raw_index([(i, i * 10) for i in range(1, 200)]), 10**6, False, None),  # over 1 KiB
        (_raw_index([(20, 100), (10, 250)]), 1000, True, False),  # offsets go down
        (_raw_index([(10, 250), (20, 100), (30, 300)]), 1000, True, False),  # positions go down
        (_raw_index([(10, 100), (10, 250)]), 1000, True, False),  # repeated offset
        (_raw_index([(10, -5), (20, 250)]), 1000, True, False),  # negative position
    ],
)
def test_offset_index_sanity_checks(
    tmp_path: Path, raw: bytes, log_size: int, quick_ok: bool, load_ok: bool | None
) -> None:
    (tmp_path / "x.index").write_bytes(raw)
    index = OffsetIndex(tmp_path / "x.index", BASE, 1024)
    assert index.check_quick(log_size) is quick_ok
    if load_ok is not None:
        assert index.load() is load_ok


def test_time_index_appends_only_increasing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", BASE, 1024)
    index.reset()
    assert index.last_entry == (-1, BASE)
    assert index.maybe_append(1000, 105)
    assert not index.maybe_append(1000, 107)  # not larger
    assert not index.maybe_append(900, 108)
    assert index.maybe_append(1500, 110)
    assert index.entries == 2
    index.flush()
    assert os.path.getsize(tmp_path / "x.timeindex") == 24


@pytest.mark.parametrize(
    "target, expected",
    [(0, (-1, BASE)), (999, (-1, BASE)), (1000, (1000, 105)), (1499, (1000, 105)),
     (1500, (1500, 110)), (2000, (2000, 130)), (10**15, (2000, 130))],
)
def test_time_index_lookup(tmp_path: Path, target: int, expected: tuple[int, int]) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", BASE, 1024)
    index.reset()
    for ts, offset in [(1000, 105), (1500, 110), (2000, 130)]:
        index.maybe_append(ts, offset)
    assert index.lookup(target) == expected
    index.flush()
    reopened = TimeIndex(tmp_path / "x.timeindex", BASE, 1024)
    assert reopened.check_quick() and reopened.load()
    assert reopened.lookup(target) == expected


@pytest.mark.parametrize(
    "entries, quick_ok, load_ok",
    [
        ([(1000, 5), (1500, 10)], True, True),
        ([(1500, 5), (1000, 10)], True, False),  # timestamps go down
        ([(1000, 5), (1000, 10)], True, False),  # repeated timestamp
        ([(1000, 10), (1500, 5)], True, False),  # offsets go down
        ([(1000, -3)], False, None),
        ([(-1, 5)], False, None),  # -1 is "no timestamp", never an entry
    ],
)
def test_time_index_sanity_checks(tmp_path: Path, entries, quick_ok, load_ok) -> None:
    (tmp_path / "x.timeindex").write_bytes(b"".join(struct.pack(">qi", *e) for e in entries))
    index = TimeIndex(tmp_path / "x.timeindex", BASE, 1024)
    assert index.check_quick() is quick_ok
    if load_ok is not None:
        assert index.load() is load_ok


def test_time_index_torn_file_fails_quick_check(tmp_path: Path) -> None:
    (tmp_path / "x.timeindex").write_bytes(struct.pack(">qi", 1000, 5) + b"\x00" * 7)
    assert not TimeIndex(tmp_path / "x.timeindex", BASE, 1024).check_quick()


# ------------------------------------------------------------- damaged index files of a real log

CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=200)


def build_log(directory: Path, clock: Clock, batches: int = 120) -> list[tuple[int, int, int]]:
    """A log of several segments; returns (base offset, last offset, max timestamp) per batch."""
    rng = random.Random(7)
    log = Log.open(directory, CONFIG, clock)
    layout = []
    for i in range(batches):
        count = rng.randint(1, 4)
        records = [
            Record(j, 1_000_000 + i * 10 + rng.randint(-15, 15), b"k",
                   rng.randbytes(rng.randint(5, 90)))
            for j in range(count)
        ]
        raw = encode_batch(records, compression=rng.choice(COMPRESSIONS))
        info = log.append_as_leader(raw, 3)
        layout.append((info.first_offset, info.last_offset, info.max_timestamp))
        clock.now += 1
    assert len(log.segments) >= 4
    log.close()
    return layout


COMPRESSIONS = (Compression.NONE, Compression.GZIP, Compression.LZ4)


def check_every_offset_reads(log: Log, layout: list[tuple[int, int, int]]) -> None:
    for base, last, _ in layout:
        for offset in (base, last):
            data = log.read(offset, 1)  # min_one_batch: exactly the batch holding offset
            assert data.first_offset_found == base
            assert data.next_offset == last + 1
            assert [h.base_offset for _, h in iter_batches(data.records)] == [base]


def expected_offset_for_timestamp(log: Log, target: int) -> tuple[int, int] | None:
    """Brute force over every record: the first (offset, ts) with ts >= target."""
    from broker.records import decode_batch

    data = log.read(0, 1 << 30)
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)
        for pos, _ in iter_batches(data.records):
            for record in decode_batch(data.records, pos).records:
                if record.timestamp >= target:
                    return record.offset, record.timestamp
        offset = data.next_offset
    return None


def index_files(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("damage", ["delete", "garble", "torn", "empty", "oversize"])
def test_damaged_index_is_rebuilt_on_open(tmp_path: Path, suffix: str, damage: str) -> None:
    clock = Clock()
    directory = tmp_path / "t-0"
    layout = build_log(directory, clock)
    originals = {p.name: p.read_bytes() for p in index_files(directory, ".index")}
    rng = random.Random(damage)
    for path in index_files(directory, suffix):
        raw = path.read_bytes()
        if damage == "delete":
            path.unlink()
        elif damage == "garble":
            path.write_bytes(rng.randbytes(len(raw)) if raw else b"\xff" * 8)
        elif damage == "torn":
            path.write_bytes(raw + b"\x01\x02\x03")
        elif damage == "empty":
            path.write_bytes(b"")
        else:
            path.write_bytes(raw + b"\x00" * (CONFIG.segment_index_bytes + 24))
    log = Log.open(directory, CONFIG, clock, clean_shutdown=True, recovery_point=10**9)
    try:
        check_every_offset_reads(log, layout)
        for target in (0, 1_000_000, 1_000_400, 1_000_777, 1_001_190, 1_001_300):
            assert log.offset_for_timestamp(target) == expected_offset_for_timestamp(log, target)
        assert log.log_end_offset == layout[-1][1] + 1
    finally:
        log.close()
    # the rebuilt offset indexes are byte for byte what appending wrote (same interval rule);
    # an "empty" file is a valid (if useless) index and is kept as it is
    rebuilt = {p.name: p.read_bytes() for p in index_files(directory, ".index")}
    if suffix == ".index" and damage == "empty":
        assert all(raw == b"" for raw in rebuilt.values())
    else:
        assert rebuilt == originals


def test_index_entry_pointing_inside_a_batch_is_caught_on_lookup(tmp_path: Path) -> None:
    """Entries that pass every file check (increasing, inside the log) but point into the middle
    of a batch are caught when the header found there does not carry the entry's offset."""
    clock = Clock()
    directory = tmp_path / "t-0"
    layout = build_log(directory, clock)
    first_index = index_files(directory, ".index")[0]
    raw = bytearray(first_index.read_bytes())
    entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
    assert len(entries) >= 3
    rel, pos = entries[1]
    mid = (pos + entries[2][1]) // 2  # still increasing, but not a batch boundary
    struct.pack_into(">ii", raw, 8, rel, mid)
    first_index.write_bytes(bytes(raw))
    log = Log.open(directory, CONFIG, clock, clean_shutdown=True, recovery_point=10**9)
    try:
        check_every_offset_reads(log, layout)
    finally:
        log.close()
    assert struct.unpack_from(">ii", first_index.read_bytes(), 8) == entries[1]
