"""Rebuild a partition's producer state when its log is opened, and keep its snapshots.

After a clean shutdown the newest snapshot sits at the log end offset and nothing is scanned.
After a crash the newest usable snapshot is older (or, if recovery cut the log below it, unusable):
the batch headers from its offset to the log end are replayed through the header view only, never
decoding a record (Kafka ``ProducerStateManager.truncateAndReload`` + ``loadProducersFromRecords``).
Snapshots above the log end (their data was lost) or below the log start offset are deleted.

The aborted-transaction index is rebuilt with the state: its entries for markers at or after the
offset the replay starts from are dropped, and every ABORT marker replayed writes its entry again
(``broker.replica.transactions.record_batches``), so after a crash, a lost log tail or a
follower's truncation the index holds exactly the aborts the log holds. Open transactions come
back from the snapshot (``current_txn_first_offset``) or from the replayed batches, so the last
stable offset stays at an open transaction until its marker arrives.
"""

from __future__ import annotations

import logging
from pathlib import Path

from broker.log import Log
from broker.log.txn_index import TransactionIndex
from broker.replica.producer_snapshot import (
    SnapshotError,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from broker.replica.producer_state import ProducerStateManager
from broker.replica.transactions import record_batches, segment_bases

__all__ = ["load_producer_state", "take_snapshot", "SNAPSHOTS_RETAINED", "SCAN_READ_BYTES"]

logger = logging.getLogger(__name__)

SNAPSHOTS_RETAINED = 2  # the newest, and one older in case the newest is lost with the log tail
SCAN_READ_BYTES = 4 << 20


def load_producer_state(log: Log, state: ProducerStateManager, now_ms: int,
                        txn_index: TransactionIndex | None = None) -> int:
    """Fill ``state`` from the newest usable snapshot plus the log after it, and bring
    ``txn_index`` (if given) in line; returns the number of batches replayed from the log. A
    log without a directory (the simulator's in-memory log) has no snapshots: everything is
    replayed."""
    directory = log.directory
    if txn_index is None:
        txn_index = TransactionIndex(None)  # the replay needs one; nothing is kept
    txn_index.reconcile(segment_bases(log), log.log_start_offset)
    if directory is None:
        state.expire(now_ms)
        txn_index.truncate_from(log.log_start_offset)
        return replay_log(log, state, log.log_start_offset, now_ms, txn_index)
    _remove_temporary_files(directory)
    start, end = log.log_start_offset, log.log_end_offset
    scan_from = start
    for offset, path in reversed(list_snapshots(directory)):
        if offset > end or offset < start:
            logger.info("%s: deleting snapshot %s outside [%d, %d]", directory.name, path.name, start, end)
            path.unlink(missing_ok=True)
            continue
        try:
            state.load(read_snapshot(path))
        except (SnapshotError, OSError) as exc:
            logger.warning("%s: deleting unreadable snapshot %s: %s", directory.name, path.name, exc)
            path.unlink(missing_ok=True)
            continue
        scan_from = offset
        break
    state.expire(now_ms)
    txn_index.truncate_from(scan_from)
    return replay_log(log, state, scan_from, now_ms, txn_index)


def replay_log(log: Log, state: ProducerStateManager, from_offset: int, now_ms: int,
               txn_index: TransactionIndex) -> int:
    """Record every batch from ``from_offset`` to the log end offset, as appended now (headers
    only, except a marker's one record)."""
    offset, end, replayed = from_offset, log.log_end_offset, 0
    while offset < end:
        data = log.read(offset, SCAN_READ_BYTES, max_offset=None, min_one_batch=True)
        if not data.batches:
            break
        replayed += record_batches(log, state, txn_index, data.records, now_ms, offset)
        assert data.next_offset > offset, "reads always make progress"
        offset = data.next_offset
    return replayed


def take_snapshot(log: Log, state: ProducerStateManager, txn_index: TransactionIndex | None = None) -> Path:
    """Snapshot ``state`` at the log end offset; keep the newest ``SNAPSHOTS_RETAINED``. The
    aborted-transaction index is fsynced first: a snapshot above an abort marker means that
    abort's entry is never replayed again."""
    if txn_index is not None:
        txn_index.flush()
    path = write_snapshot(log.directory, log.log_end_offset, state.entries())
    snapshots = list_snapshots(log.directory)
    for _, old in snapshots[:-SNAPSHOTS_RETAINED]:
        old.unlink(missing_ok=True)
    return path


def _remove_temporary_files(directory: Path) -> None:
    for path in directory.glob("*.snapshot.tmp"):
        path.unlink(missing_ok=True)
