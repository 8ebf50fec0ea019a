"""The broker's cleaner service over real logs (the replica layer is a small stand-in): it
cleans the dirtiest compacted log, skips delete-only logs, and a log whose pass fails (a
corrupt segment, a full disk while writing the cleaned copy) becomes uncleanable with its
segments untouched while the other logs are still cleaned."""

from __future__ import annotations

import asyncio
import errno
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import broker.log.segment as segment_module
from broker.log import Log, LogConfig
from broker.log.checkpoint import read_checkpoint
from broker.log.cleaner.cleaning_pass import CleanerSettings
from broker.server.log_cleaner import CLEANER_CHECKPOINT, LogCleanerService
from test_log_cleaner import Clock, model, random_writes, read_all, write

COMPACT = LogConfig(segment_bytes=1200, index_interval_bytes=128, cleanup_policy=frozenset({"compact"}),
                    min_cleanable_dirty_ratio=0.1)
DELETE = LogConfig(segment_bytes=1200, index_interval_bytes=128)


@dataclass
class StubPartition:
    topic: str
    partition: int
    log: Log

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    last_stable_offset = high_watermark

    @dataclass
    class _States:
        def entries(self):
            return iter(())

    producer_state: _States = field(default_factory=_States)


class StubReplicas:
    def __init__(self, log_dir: Path, partitions: list[StubPartition]) -> None:
        self._partitions = {(p.topic, p.partition): p for p in partitions}
        self.log_manager = self
        self._log_dir = log_dir

    def partitions(self):
        return list(self._partitions.values())

    def get(self, topic, partition):
        return self._partitions.get((topic, partition))

    def log_dir_of(self, topic, partition):
        return self._log_dir if (topic, partition) in self._partitions else None


def make_log(root: Path, name: str, config: LogConfig, clock: Clock, seed: int):
    log = Log.open(root / f"{name}-0", config, clock, clean_shutdown=True)
    writes = random_writes(random.Random(seed), 300, keys=15)
    write(log, writes)
    log.roll()
    return StubPartition(name, 0, log), writes


def service(replicas, worker_process: bool = False) -> LogCleanerService:
    """The service with its passes on a thread (monkeypatching reaches them there), or in a
    worker process as in the broker."""
    return LogCleanerService(replicas, CleanerSettings(io_buffer_bytes=700), threads=1, backoff_ms=10,
                             now_ms=Clock(), rng=random.Random(1), worker_process=worker_process)


def run_pass(cleaner: LogCleanerService):
    partition = cleaner._next_partition()
    return None if partition is None else asyncio.run(cleaner.clean(partition))


def test_compacted_logs_are_cleaned_and_checkpointed_delete_logs_are_not(tmp_path):
    clock = Clock()
    table, table_writes = make_log(tmp_path, "table", COMPACT, clock, 1)
    plain, plain_writes = make_log(tmp_path, "plain", DELETE, clock, 2)
    cleaner = service(StubReplicas(tmp_path, [table, plain]))
    assert run_pass(cleaner) == table.log.log_end_offset
    assert run_pass(cleaner) is None  # nothing left: the plain log is never a candidate
    assert read_all(table.log) == model(table_writes, drop_tombstones=False)
    assert len(read_all(plain.log)) == len(plain_writes)
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT) == {("table", 0): 300}
    assert cleaner.stats.passes == 1 and cleaner.stats.uncleanable == {}


def test_a_corrupt_segment_makes_its_log_uncleanable_and_the_others_go_on(tmp_path):
    clock = Clock()
    bad, bad_writes = make_log(tmp_path, "bad", COMPACT, clock, 3)
    good, good_writes = make_log(tmp_path, "good", COMPACT, clock, 4)
    first = bad.log.segments[0]
    with open(first.log_path, "r+b") as f:  # a flipped bit inside a record: the CRC no longer matches
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x40]))
    before = first.log_path.read_bytes()
    cleaner = service(StubReplicas(tmp_path, [bad, good]))
    for _ in range(3):
        run_pass(cleaner)
    assert set(cleaner.stats.uncleanable) == {("bad", 0)} and "CRC" in cleaner.stats.uncleanable[("bad", 0)]
    assert first.log_path.read_bytes() == before and bad.log.segments[0] is first
    assert read_all(good.log) == model(good_writes, drop_tombstones=False)


def test_a_full_disk_while_writing_the_cleaned_copy_leaves_the_segments_intact(tmp_path, monkeypatch):
    clock = Clock()
    table, writes = make_log(tmp_path, "table", COMPACT, clock, 5)
    before = read_all(table.log)
    segments = list(table.log.segments)

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module, "pwritev_all", no_space)
    cleaner = service(StubReplicas(tmp_path, [table]))
    assert run_pass(cleaner) is None
    assert "No space left" in cleaner.stats.uncleanable[("table", 0)]
    assert list(table.log.segments) == segments and read_all(table.log) == before
    assert not [p for p in (tmp_path / "table-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]


@dataclass
class LaggingPartition(StubPartition):
    """A partition whose high watermark the test sets (a follower behind, or a leader waiting)."""

    hw: int = 0

    @property
    def high_watermark(self) -> int:
        return self.hw

    last_stable_offset = high_watermark


def test_a_log_whose_dirty_range_is_empty_is_not_copied_again_every_backoff(tmp_path):
    """The checkpoint inside a segment, and the high watermark there too: nothing is dirty. That
    segment used to count as dirty, and a pass that mapped nothing rewrote the clean section
    again at every backoff."""
    clock = Clock()
    table, writes = make_log(tmp_path, "table", COMPACT, clock, 9)
    partition = LaggingPartition("table", 0, table.log, hw=table.log.log_end_offset)
    cleaner = service(StubReplicas(tmp_path, [partition]))
    assert run_pass(cleaner) == 300
    write(table.log, [(b"key-%d" % (i % 4), b"new%d" % i) for i in range(60)])
    table.log.roll()
    segment = next(s for s in table.log.segments if s.base_offset >= 300 and s.next_offset - s.base_offset > 2)
    inside = segment.base_offset + 2
    partition.hw = inside
    cleaner._write_checkpoint(("table", 0), inside)  # as a pass whose offset map filled there leaves it
    files = {s.base_offset: s.log_path.stat().st_mtime_ns for s in table.log.segments}
    for _ in range(3):
        assert cleaner._next_partition() is None
    assert cleaner.stats.passes == 1
    assert {s.base_offset: s.log_path.stat().st_mtime_ns for s in table.log.segments} == files
    partition.hw = table.log.log_end_offset  # the range grows: cleaned again, from there on
    assert run_pass(cleaner) == table.log.log_end_offset and cleaner.stats.passes == 2
    assert read_all(table.log) == model(writes + [(b"key-%d" % (i % 4), b"new%d" % i) for i in range(60)],
                                        drop_tombstones=False)


# -- the pass in a worker process (the broker's way) -------------------------------------------------

def _segment_bytes(log) -> list[bytes]:
    return [s.log_path.read_bytes() for s in log.segments]


def test_a_worker_process_writes_exactly_what_the_thread_writes(tmp_path):
    clock = Clock()
    threaded, writes = make_log(tmp_path / "a", "table", COMPACT, clock, 11)
    remote, _ = make_log(tmp_path / "b", "table", COMPACT, clock, 11)
    by_thread = service(StubReplicas(tmp_path / "a", [threaded]))
    by_worker = service(StubReplicas(tmp_path / "b", [remote]), worker_process=True)
    try:
        for _ in range(2):  # the second pass reuses the worker
            assert run_pass(by_thread) == run_pass(by_worker)
            assert _segment_bytes(threaded.log) == _segment_bytes(remote.log)
            write(threaded.log, writes[:90])
            write(remote.log, writes[:90])
            threaded.log.roll()
            remote.log.roll()
        assert read_all(remote.log) == read_all(threaded.log)
        assert by_worker.stats.bytes_written == by_thread.stats.bytes_written > 0
        assert read_checkpoint(tmp_path / "b" / CLEANER_CHECKPOINT) == read_checkpoint(tmp_path / "a" / CLEANER_CHECKPOINT)
    finally:
        by_worker.close()


def test_an_error_in_the_worker_makes_the_log_uncleanable_as_on_a_thread(tmp_path):
    clock = Clock()
    bad, _ = make_log(tmp_path, "bad", COMPACT, clock, 3)
    first = bad.log.segments[0]
    with open(first.log_path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x40]))
    before = first.log_path.read_bytes()
    cleaner = service(StubReplicas(tmp_path, [bad]), worker_process=True)
    try:
        assert run_pass(cleaner) is None
        assert "CorruptRecordError" in cleaner.stats.uncleanable[("bad", 0)]
        assert "CRC" in cleaner.stats.uncleanable[("bad", 0)]
        assert first.log_path.read_bytes() == before and bad.log.segments[0] is first
    finally:
        cleaner.close()


def test_a_worker_killed_during_a_pass_leaves_the_log_whole_and_the_next_pass_starts_a_new_one(tmp_path, monkeypatch):
    from broker.server.cleaner_worker import CleanerWorker

    clock = Clock()
    killed, _ = make_log(tmp_path, "killed", COMPACT, clock, 5)
    other, other_writes = make_log(tmp_path, "other", COMPACT, clock, 6)
    before = read_all(killed.log)
    segments = list(killed.log.segments)
    send = CleanerWorker._send

    def send_then_kill(worker, message):
        send(worker, message)
        if message == "clean":
            worker._process.kill()

    monkeypatch.setattr(CleanerWorker, "_send", send_then_kill)
    cleaner = service(StubReplicas(tmp_path, [killed]), worker_process=True)
    try:
        assert asyncio.run(cleaner.clean(killed)) is None
        assert "cleaner process died" in cleaner.stats.uncleanable[("killed", 0)]
        assert list(killed.log.segments) == segments and read_all(killed.log) == before
        assert not [p for p in (tmp_path / "killed-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]
        monkeypatch.setattr(CleanerWorker, "_send", send)
        assert asyncio.run(cleaner.clean(other)) == 300
        assert read_all(other.log) == model(other_writes, drop_tombstones=False)
    finally:
        cleaner.close()
