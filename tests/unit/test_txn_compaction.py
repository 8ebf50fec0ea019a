"""Compaction of transactional data (issue 15): the cleaner service, given a partition's
``.txnindex``, drops the records of aborted transactions, keeps a marker while data of its
transaction remains (an abort marker without data is stamped with a delete horizon and kept
until it passes), and never cleans at or past the first unstable offset (an open transaction)."""

from __future__ import annotations

import asyncio
import random

from test_txn_partition import Clock, make

from broker.log import Log, LogConfig
from broker.log.cleaner.cleaning_pass import CleanerSettings
from broker.records import DEFAULT_LIMITS, Record, decode_batch, encode_batch, iter_batches
from broker.server.log_cleaner import LogCleanerService

COMPACT = LogConfig(segment_bytes=100_000, cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=0.01)


class Replicas:
    def __init__(self, directory, partition) -> None:
        self._partition = partition
        self.log_manager = self
        self._directory = directory

    def partitions(self):
        return [self._partition]

    def get(self, topic, index):
        return self._partition

    def log_dir_of(self, topic, index):
        return self._directory


def keyed(pairs, pid=-1, epoch=-1, sequence=-1, transactional=False) -> memoryview:
    return memoryview(encode_batch([Record(i, 1_000, k.encode(), v.encode()) for i, (k, v) in enumerate(pairs)],
                                   producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                   transactional=transactional))


def batches(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 24, None, True)
        for position, header in iter_batches(read.records):
            records = decode_batch(read.records, position).records
            out.append((header.base_offset, header.is_control, header.producer_id,
                        [(r.key.decode(), r.value.decode()) for r in records if not header.is_control]))
        offset = read.next_offset
    return out


def clean(cleaner: LogCleanerService, partition) -> int | None:
    """One pass; a pass that returns None says why in the assertion: the service turns any error
    of a pass (EMFILE after earlier tests leaked descriptors, say) into "uncleanable" and a None,
    which an ``== 7`` alone would not show (this test once failed in a combined run, cause unknown)."""
    first_dirty = asyncio.run(cleaner.clean(partition))
    assert first_dirty is not None, (cleaner.stats.uncleanable, cleaner.stats)
    return first_dirty


def test_aborted_records_go_markers_stay_and_the_open_transaction_is_not_cleaned(tmp_path):
    clock = Clock()
    log = Log.open(tmp_path / "t-0", COMPACT, clock, clean_shutdown=True)
    p = make(1, clock, log)
    append = lambda records, **kw: p.append_as_leader(records, -1, DEFAULT_LIMITS, **kw)  # noqa: E731
    assert append(keyed([("a", "1"), ("b", "1")])).error_code == 0                        # 0-1
    assert append(keyed([("a", "aborted"), ("c", "aborted")], 7, 0, 0, True), txn_verified=True).error_code == 0  # 2-3
    assert append(keyed([("b", "committed")], 8, 0, 0, True), txn_verified=True).error_code == 0     # 4
    assert p.append_txn_marker(7, 0, 0, committed=False).error_code == 0                  # 5
    assert p.append_txn_marker(8, 0, 0, committed=True).error_code == 0                   # 6
    log.roll()  # the cleaner cleans whole segments below the one holding the LSO
    assert append(keyed([("d", "open")], 9, 0, 0, True), txn_verified=True).error_code == 0          # 7
    assert append(keyed([("a", "after-open")])).error_code == 0                           # 8
    log.roll()
    assert p.last_stable_offset == 7
    cleaner = LogCleanerService(Replicas(tmp_path, p), CleanerSettings(io_buffer_bytes=4096), threads=1,
                                backoff_ms=10, now_ms=clock, rng=random.Random(1), worker_process=False)
    assert clean(cleaner, p) == 7  # the pass ends at the first unstable offset
    after = batches(log)
    data = [(offset, records) for offset, control, _, records in after if not control]
    markers = [(offset, pid) for offset, control, pid, _ in after if control]
    # producer 7's aborted batch is emptied (kept as its last batch, for deduplication)
    assert (2, []) in data and all(v != "aborted" for _, records in data for _, v in records)
    assert (4, [("b", "committed")]) in data and (0, [("a", "1")]) in data  # "b"=1 superseded by 4
    assert (7, [("d", "open")]) in data and (8, [("a", "after-open")]) in data  # not cleaned
    # the abort marker stays: producer 7's emptied batch would reopen its transaction on replay
    assert markers == [(5, 7), (6, 8)]

    # Past delete.retention.ms, with the open transaction committed, producer 7 writing again
    # (its emptied aborted batch is no longer its last, and its next transaction's marker closes
    # it on replay) and more data: the abort marker goes like a tombstone, in two passes; the
    # commit markers stay with their data.
    assert p.append_txn_marker(9, 0, 0, committed=True).error_code == 0                   # 9
    assert append(keyed([("f", "7-again")], 7, 0, 2, True), txn_verified=True).error_code == 0     # 10
    assert p.append_txn_marker(7, 0, 0, committed=True).error_code == 0                   # 11
    assert append(keyed([("e", "1")])).error_code == 0                                     # 12
    log.roll()
    clock.now += COMPACT.delete_retention_ms + 1
    assert clean(cleaner, p) == 13
    after = batches(log)
    assert (2, False, 7, []) in after  # emptied in the first pass (an empty batch stays as it is)
    # the marker is now stamped with its delete horizon (a tombstone's two steps) ...
    assert [(offset, pid) for offset, control, pid, _ in after if control] == [(5, 7), (6, 8), (9, 9), (11, 7)]
    assert append(keyed([("g", "1")])).error_code == 0                                     # 13
    log.roll()
    clock.now += COMPACT.delete_retention_ms + 1
    assert clean(cleaner, p) == 14
    # ... and dropped by the next pass past it
    assert [(offset, pid) for offset, control, pid, _ in batches(log) if control] == [(6, 8), (9, 9), (11, 7)]
    log.close()
