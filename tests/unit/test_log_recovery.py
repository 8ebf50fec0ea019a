"""Crash recovery: torn tails, appended garbage, flipped bytes, recovery points, temp files."""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import Log, LogConfig, segment_file_name
from broker.records import Compression, Record, decode_batch, encode_batch, iter_batches

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=256)


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass(frozen=True)
class StoredBatch:
    segment: int  # base offset of the segment holding it
    position: int
    base: int
    last: int
    raw: bytes


@dataclass(frozen=True)
class Layout:
    batches: list[StoredBatch]
    segments: list[int]

    def in_segment(self, base: int) -> list[StoredBatch]:
        return [b for b in self.batches if b.segment == base]

    @property
    def active(self) -> int:
        return self.segments[-1]


def random_batch(rng: random.Random) -> bytes:
    count = rng.randint(1, 5)
    records = [
        Record(
            i,
            T0 + rng.randint(0, 10_000),
            rng.choice([None, rng.randbytes(rng.randint(0, 8))]),
            rng.choice([None, rng.randbytes(rng.randint(0, 150))]),
            tuple((f"h{j}", rng.randbytes(3)) for j in range(rng.randint(0, 2))),
        )
        for i in range(count)
    ]
    compression = rng.choice([Compression.NONE, Compression.GZIP, Compression.LZ4])
    return encode_batch(records, compression=compression)


def scan_layout(directory: Path) -> Layout:
    """Read the segment files directly (not through Log) to learn where every batch lies."""
    batches, segments = [], []
    for path in sorted(directory.glob("*.log")):
        base = int(path.name[:20])
        segments.append(base)
        data = path.read_bytes()
        for pos, header in iter_batches(data):
            raw = data[pos : pos + header.size]
            batches.append(StoredBatch(base, pos, header.base_offset, header.last_offset, raw))
    return Layout(batches, segments)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, Layout]:
    directory = tmp_path_factory.mktemp("template") / "events-0"
    rng = random.Random(2024)
    log = Log.open(directory, CONFIG, Clock())
    for _ in range(90):
        log.append_as_leader(random_batch(rng), leader_epoch=rng.randint(0, 3))
    log.close()
    layout = scan_layout(directory)
    assert len(layout.segments) >= 5 and len(layout.in_segment(layout.active)) >= 5
    return directory, layout


@contextmanager
def copy_of(template_dir: Path) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="pylog-recovery-") as tmp:
        target = Path(tmp) / template_dir.name
        shutil.copytree(template_dir, target)
        yield target


def seg_path(directory: Path, base: int, suffix: str = ".log") -> Path:
    return directory / (segment_file_name(base) + suffix)


def read_all(log: Log) -> list[bytes]:
    """Every batch from the log start to the end, through Log.read, as raw bytes."""
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data.batches > 0
        out += [data.records[p : p + h.size] for p, h in iter_batches(data.records)]
        offset = data.next_offset
    return out


def check_recovered(log: Log, expected: list[StoredBatch], expected_end: int) -> None:
    """Exactly the expected prefix remains, offsets are monotonic, and the log works on."""
    assert log.log_end_offset == expected_end
    stored = read_all(log)
    assert stored == [b.raw for b in expected]
    bases = [struct.unpack_from(">q", raw)[0] for raw in stored]
    assert bases == sorted(set(bases))
    assert log.recovery_point <= log.log_end_offset
    info = log.append_as_leader(
        encode_batch([Record(0, T0, b"new", b"after recovery"), Record(1, T0, None, b"x")]), 9
    )
    assert info.first_offset == expected_end
    data = log.read(expected_end, 1 << 20)
    [record, _] = decode_batch(data.records).records
    assert (record.offset, record.value) == (expected_end, b"after recovery")


def expected_end_of(expected: list[StoredBatch], active: int) -> int:
    return expected[-1].last + 1 if expected else active


# ---------------------------------------------------------------------------- (a) torn tail


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_cut_active_segment_anywhere(template, data) -> None:
    template_dir, layout = template
    active_size = seg_path(template_dir, layout.active).stat().st_size
    cut = data.draw(st.integers(0, active_size), label="cut")
    recovery_point = data.draw(st.sampled_from([0, layout.segments[-2], layout.active]), label="rp")
    expected = [
        b for b in layout.batches
        if b.segment != layout.active or b.position + len(b.raw) <= cut
    ]
    with copy_of(template_dir) as directory:
        os.truncate(seg_path(directory, layout.active), cut)
        log = Log.open(directory, CONFIG, Clock(), recovery_point=recovery_point)
        try:
            kept = sum(len(b.raw) for b in expected if b.segment == layout.active)
            assert seg_path(directory, layout.active).stat().st_size == kept
            check_recovered(log, expected, expected_end_of(expected, layout.active))
        finally:
            log.close()


def test_cut_at_every_batch_boundary(template) -> None:
    template_dir, layout = template
    for batch in layout.in_segment(layout.active):
        for cut in (batch.position, batch.position + 1, batch.position + len(batch.raw) - 1):
            expected = [b for b in layout.batches if b.base < batch.base]
            with copy_of(template_dir) as directory:
                os.truncate(seg_path(directory, layout.active), cut)
                log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.active)
                try:
                    check_recovered(log, expected, batch.base)
                finally:
                    log.close()


# ----------------------------------------------------------------------- (b) appended garbage


def _append_garbage(directory: Path, layout: Layout, garbage: bytes) -> None:
    with open(seg_path(directory, layout.active), "ab") as f:
        f.write(garbage)


@settings(max_examples=60, deadline=None)
@given(garbage=st.binary(min_size=1, max_size=4000))
def test_random_garbage_after_the_tail_is_removed(template, garbage: bytes) -> None:
    template_dir, layout = template
    with copy_of(template_dir) as directory:
        size = seg_path(directory, layout.active).stat().st_size
        _append_garbage(directory, layout, garbage)
        log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.active)
        try:
            assert seg_path(directory, layout.active).stat().st_size == size
            check_recovered(log, layout.batches, layout.batches[-1].last + 1)
        finally:
            log.close()


@pytest.mark.parametrize("kind", ["zeros", "header-shaped", "replayed batch", "old offsets"])
def test_plausible_garbage_is_removed(template, kind: str) -> None:
    """Garbage that looks like data: zero-filled blocks, a header with a sane length, a
    byte-exact copy of the previous batch (valid CRC, offsets going backwards)."""
    template_dir, layout = template
    last = layout.batches[-1]
    if kind == "zeros":
        garbage = b"\x00" * 4096
    elif kind == "header-shaped":
        garbage = bytearray(last.raw)
        struct.pack_into(">q", garbage, 0, last.last + 1)
        garbage[-1] ^= 0xFF  # CRC no longer matches
    elif kind == "replayed batch":
        garbage = last.raw
    else:
        garbage = layout.batches[0].raw  # offset 0 again
    with copy_of(template_dir) as directory:
        _append_garbage(directory, layout, bytes(garbage))
        log = Log.open(directory, CONFIG, Clock(), recovery_point=0)
        try:
            check_recovered(log, layout.batches, last.last + 1)
        finally:
            log.close()


# ------------------------------------------------------------------------ (c) flipped bytes

# Bytes a flip must be detected in: batchLength [8, 12) and magic/CRC/attributes.. [16, end).
# baseOffset [0, 8) and partitionLeaderEpoch [12, 16) lie outside the CRC in Kafka's format.


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_flipped_byte_drops_that_batch_and_everything_after(template, data) -> None:
    template_dir, layout = template
    victims = layout.in_segment(layout.active)
    victim = data.draw(st.sampled_from([victims[-1], victims[-1], *victims]), label="victim")
    offset_in_batch = data.draw(
        st.one_of(st.integers(8, 11), st.integers(16, len(victim.raw) - 1)), label="byte"
    )
    flip = data.draw(st.integers(1, 255), label="xor")
    expected = [b for b in layout.batches if b.base < victim.base]
    with copy_of(template_dir) as directory:
        with open(seg_path(directory, layout.active), "r+b") as f:
            f.seek(victim.position + offset_in_batch)
            byte = f.read(1)[0]
            f.seek(victim.position + offset_in_batch)
            f.write(bytes([byte ^ flip]))
        log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.active)
        try:
            check_recovered(log, expected, victim.base)
        finally:
            log.close()


def test_base_offset_going_backwards_is_caught(template) -> None:
    """baseOffset is outside the CRC; the monotonic-offset check catches it going backwards."""
    template_dir, layout = template
    victim = layout.in_segment(layout.active)[3]
    with copy_of(template_dir) as directory:
        with open(seg_path(directory, layout.active), "r+b") as f:
            f.seek(victim.position)
            f.write(struct.pack(">q", victim.base - 1))
        log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.active)
        try:
            check_recovered(log, [b for b in layout.batches if b.base < victim.base], victim.base)
        finally:
            log.close()


def test_first_batch_of_a_segment_below_the_previous_segment_is_caught(template) -> None:
    template_dir, layout = template
    second = layout.segments[2]
    victim = layout.in_segment(second)[0]
    with copy_of(template_dir) as directory:
        with open(seg_path(directory, second), "r+b") as f:
            f.write(struct.pack(">q", victim.base - 2))  # overlaps the previous segment
        log = Log.open(directory, CONFIG, Clock(), recovery_point=0)
        try:
            assert [s.base_offset for s in log.segments] == layout.segments[:3]
            check_recovered(log, [b for b in layout.batches if b.base < second], second)
        finally:
            log.close()


# --------------------------------------------------------------------- (d) recovery points


@pytest.mark.parametrize("corrupt_index, recovery_index", [(1, 0), (2, 1), (2, 2), (3, 1)])
def test_recovery_from_an_earlier_segment(template, corrupt_index, recovery_index) -> None:
    """From the segment holding the recovery point on, every batch is checked; at the first bad
    one the log is truncated and every later segment deleted."""
    template_dir, layout = template
    corrupt_segment = layout.segments[corrupt_index]
    victim = layout.in_segment(corrupt_segment)[1]
    recovery_point = layout.in_segment(layout.segments[recovery_index])[0].base + 1
    with copy_of(template_dir) as directory:
        with open(seg_path(directory, corrupt_segment), "r+b") as f:
            f.seek(victim.position + len(victim.raw) - 3)
            f.write(b"\xde\xad\xbe")
        log = Log.open(directory, CONFIG, Clock(), recovery_point=recovery_point)
        try:
            assert [s.base_offset for s in log.segments] == layout.segments[: corrupt_index + 1]
            for later in layout.segments[corrupt_index + 1 :]:
                assert not seg_path(directory, later).exists()
                assert not seg_path(directory, later, ".index").exists()
            check_recovered(log, [b for b in layout.batches if b.base < victim.base], victim.base)
        finally:
            log.close()


def test_segments_below_the_recovery_point_are_not_rescanned(template) -> None:
    """Kafka's contract: data below the recovery point was fsynced and is trusted, so a
    damaged CRC there is not even read at open (it would be caught when a reader decodes)."""
    template_dir, layout = template
    victim = layout.in_segment(layout.segments[0])[1]
    with copy_of(template_dir) as directory:
        with open(seg_path(directory, layout.segments[0]), "r+b") as f:
            f.seek(victim.position + len(victim.raw) - 1)
            f.write(b"\x00" if victim.raw[-1] else b"\x01")
        log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.active)
        try:
            assert log.log_end_offset == layout.batches[-1].last + 1
            assert len(log.segments) == len(layout.segments)
        finally:
            log.close()


def test_recovery_point_is_capped_and_kept_after_unclean_open(template) -> None:
    template_dir, layout = template
    with copy_of(template_dir) as directory:
        os.truncate(seg_path(directory, layout.active), 0)
        log = Log.open(directory, CONFIG, Clock(), recovery_point=10**9)
        try:
            assert log.recovery_point == layout.active == log.log_end_offset
        finally:
            log.close()
        log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.segments[1])
        try:
            assert log.recovery_point == layout.segments[1]  # only a flush moves it forward
        finally:
            log.close()


def test_clean_open_still_catches_a_cut_tail(template) -> None:
    template_dir, layout = template
    victim = layout.in_segment(layout.active)[-2]
    with copy_of(template_dir) as directory:
        os.truncate(seg_path(directory, layout.active), victim.position + 10)
        log = Log.open(directory, CONFIG, Clock(), recovery_point=10**9, clean_shutdown=True)
        try:
            check_recovered(log, [b for b in layout.batches if b.base < victim.base], victim.base)
        finally:
            log.close()


def test_log_end_below_log_start_starts_over(template) -> None:
    template_dir, layout = template
    end = layout.batches[-1].last + 1
    with copy_of(template_dir) as directory:
        os.truncate(seg_path(directory, layout.active), 0)
        log = Log.open(directory, CONFIG, Clock(), recovery_point=0, log_start_offset=end)
        try:
            assert (log.log_start_offset, log.log_end_offset) == (end, end)
            assert [s.base_offset for s in log.segments] == [end]
            logs = sorted(p.name for p in directory.glob("*.log"))
            assert logs == [segment_file_name(end) + ".log"]
        finally:
            log.close()


def test_unclean_open_rebuilds_stale_indexes(template) -> None:
    """Index entries that outlived their log bytes (the OS wrote the index first)."""
    template_dir, layout = template
    batches = layout.in_segment(layout.active)
    with copy_of(template_dir) as directory:
        index = seg_path(directory, layout.active, ".index")
        assert index.stat().st_size >= 16
        os.truncate(seg_path(directory, layout.active), batches[2].position)
        log = Log.open(directory, CONFIG, Clock(), recovery_point=layout.active)
        try:
            check_recovered(log, [b for b in layout.batches if b.base < batches[2].base],
                            batches[2].base)
        finally:
            log.close()
        assert all(pos < batches[2].position
                   for _, pos in struct.iter_unpack(">ii", index.read_bytes()))


# ------------------------------------------------------------------------- (e) temp files


def test_leftover_deleted_cleaned_and_orphan_files_are_removed(template) -> None:
    template_dir, layout = template
    with copy_of(template_dir) as directory:
        fake = segment_file_name(layout.batches[-1].last + 100)
        for name in (fake + ".log.deleted", fake + ".index.deleted", fake + ".timeindex.deleted",
                     fake + ".log.cleaned", fake + ".index", fake + ".timeindex"):
            (directory / name).write_bytes(b"junk")
        (directory / "leader-epoch-checkpoint").write_text("0\n0\n")
        log = Log.open(directory, CONFIG, Clock(), clean_shutdown=True, recovery_point=10**9)
        try:
            assert not [p for p in directory.iterdir() if p.name.startswith(fake)]
            assert (directory / "leader-epoch-checkpoint").exists()  # not ours: left alone
            check_recovered(log, layout.batches, layout.batches[-1].last + 1)
        finally:
            log.close()


def test_finished_swap_replaces_the_segments_it_covers(template) -> None:
    """A compaction output (.swap) covering segments 1 and 2, left by a crash before the swap."""
    template_dir, layout = template
    first, second, third = layout.segments[1:4]
    merged = [b for b in layout.batches if first <= b.segment < third]
    merged = merged[::2]  # "compacted": every other batch survives
    with copy_of(template_dir) as directory:
        swap = seg_path(directory, first, ".log.swap")
        swap.write_bytes(b"".join(b.raw for b in merged))
        seg_path(directory, first, ".index.swap").write_bytes(b"stale")
        log = Log.open(directory, CONFIG, Clock(), clean_shutdown=True, recovery_point=10**9)
        try:
            assert not swap.exists() and not seg_path(directory, first, ".index.swap").exists()
            assert not seg_path(directory, second).exists()
            bases = [s.base_offset for s in log.segments]
            assert bases == [layout.segments[0], first, *layout.segments[3:]]
            expected = [b for b in layout.batches if b.segment < first] + merged + [
                b for b in layout.batches if b.segment >= third
            ]
            check_recovered(log, expected, layout.batches[-1].last + 1)
        finally:
            log.close()


def test_unfinished_swap_is_discarded(template) -> None:
    template_dir, layout = template
    first = layout.segments[1]
    with copy_of(template_dir) as directory:
        seg_path(directory, first, ".log.swap").write_bytes(layout.in_segment(first)[0].raw)
        seg_path(directory, first, ".log.cleaned").write_bytes(b"partial")
        log = Log.open(directory, CONFIG, Clock(), clean_shutdown=True, recovery_point=10**9)
        try:
            assert not list(directory.glob("*.swap")) and not list(directory.glob("*.cleaned"))
            check_recovered(log, layout.batches, layout.batches[-1].last + 1)
        finally:
            log.close()
