"""The aborted-transaction index of a log: ``<base>.txnindex`` beside each segment (Kafka
``TransactionIndex``).

An entry is written when an ABORT marker is appended (by the leader, a follower, or the replay
of the log on recovery) into the file of the segment holding the marker. Read_committed Fetch
answers with the entries overlapping the range it returns, so the consumer can drop the aborted
batches; the log cleaner drops the aborted records.

Format (Kafka's layout, big-endian, no file header, entries back to back, 34 bytes each)::

    version            int16   0
    producer_id        int64
    first_offset       int64   the transaction's first offset in this partition
    last_offset        int64   the offset of its ABORT marker
    last_stable_offset int64   the LSO once this transaction completed

Entries of one file are in marker order. Not checksummed: the index is derived from the log.
After a crash a file may end inside an entry (the partial entry is cut) or hold entries whose
markers were lost with the log tail: the producer-state recovery calls ``truncate_from`` at the
offset it replays the log from and rewrites every entry of the markers it replays, so the index
matches the log again (Kafka rebuilds it in ``LogSegment.recover``). ``LogSegment.delete``
(retention, truncation) removes the file with its segment; after a cleaner swap the entries of
segments that no longer exist move into the file of the segment now holding their marker.
The file is fsynced by ``flush`` before a producer-state snapshot is written, so no snapshot
ever stands above an abort whose entry could be lost.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple, Sequence

from broker.log.fileio import open_rw, pwrite_all, sync_data

__all__ = ["AbortedTxn", "TransactionIndex", "TXN_INDEX_SUFFIX", "ENTRY_SIZE", "encode_entry",
           "decode_entries", "txn_index_path"]

logger = logging.getLogger(__name__)

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry (Kafka ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entry(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(_VERSION, *entry)


def decode_entries(data: bytes) -> tuple[list[AbortedTxn], int]:
    """The whole entries of ``data`` and how many bytes they cover; stops at a partial entry or
    one whose version is not 0 (what follows it cannot be trusted either)."""
    entries: list[AbortedTxn] = []
    pos = 0
    while len(data) - pos >= ENTRY_SIZE:
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != _VERSION:
            break
        entries.append(AbortedTxn(*fields))
        pos += ENTRY_SIZE
    return entries, pos


def txn_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


class TransactionIndex:
    """Every ``.txnindex`` file of one log directory, mirrored in memory (base -> entries)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory  # None: an in-memory log (the simulator), nothing on disk
        self._entries: dict[int, list[AbortedTxn]] = {}
        self._bases: list[int] = []  # sorted keys of _entries
        self._unflushed: set[int] = set()
        if directory is not None:
            self._load()

    def _load(self) -> None:
        for name in os.listdir(self.directory):
            stem = name[: -len(TXN_INDEX_SUFFIX)]
            if not (name.endswith(TXN_INDEX_SUFFIX) and len(stem) == 20 and stem.isdigit()):
                continue
            path = self.directory / name
            data = path.read_bytes()
            entries, used = decode_entries(data)
            if used != len(data):
                logger.warning("%s: cutting %d bytes after the last whole entry", path, len(data) - used)
                os.truncate(path, used)
            if entries:
                self._put(int(stem), entries)
            else:
                path.unlink(missing_ok=True)

    def _put(self, base: int, entries: list[AbortedTxn]) -> None:
        if base not in self._entries:
            bisect.insort(self._bases, base)
        self._entries[base] = entries

    def _drop(self, base: int) -> None:
        if self._entries.pop(base, None) is not None:
            self._bases.remove(base)
        self._unflushed.discard(base)
        if self.directory is not None:
            txn_index_path(self.directory, base).unlink(missing_ok=True)

    def entries(self) -> list[AbortedTxn]:
        return [e for base in self._bases for e in self._entries[base]]

    def append(self, segment_base: int, entry: AbortedTxn) -> None:
        """Record an abort whose marker lies in the segment based at ``segment_base``."""
        assert entry.first_offset <= entry.last_offset, entry
        existing = self._entries.get(segment_base)
        if existing is None:
            existing = []
            self._put(segment_base, existing)
        assert not existing or existing[-1].last_offset < entry.last_offset, "markers come in order"
        existing.append(entry)
        if self.directory is not None:
            path = txn_index_path(self.directory, segment_base)
            fd = open_rw(path)
            try:
                pwrite_all(fd, encode_entry(entry), (len(existing) - 1) * ENTRY_SIZE)
            finally:
                os.close(fd)
            self._unflushed.add(segment_base)

    def truncate_from(self, offset: int) -> None:
        """Forget the entries whose marker is at or after ``offset`` (log truncation, recovery)."""
        for base in list(self._bases):
            entries = self._entries[base]
            kept = [e for e in entries if e.last_offset < offset]
            if len(kept) == len(entries):
                continue
            if not kept:
                self._drop(base)
                continue
            self._entries[base] = kept
            if self.directory is not None:
                os.truncate(txn_index_path(self.directory, base), len(kept) * ENTRY_SIZE)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Entries of transactions overlapping [fetch_offset, upper_bound_offset): their marker
        is at or after ``fetch_offset`` and they began before the bound (Kafka
        ``LocalLog.collectAbortedTransactions``)."""
        found = []
        # a file holds the entries of markers at or after its base: earlier files cannot match
        start = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        for base in self._bases[start:]:
            for entry in self._entries[base]:
                if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                    found.append(entry)
                if entry.last_stable_offset >= upper_bound_offset:
                    # every transaction that began before the bound had ended when this one did
                    return found
        return found

    def reconcile(self, segment_bases: Sequence[int], log_start_offset: int) -> None:
        """Match the log's segments: entries of a file whose segment is gone (a cleaner swap
        merged it) move to the segment now holding their marker; entries whose marker is below
        the log start offset go (their data is gone)."""
        if self._bases == list(segment_bases):
            return
        for base in [b for b in self._bases if b not in set(segment_bases)]:
            entries = self._entries[base]
            self._drop(base)
            for entry in entries:
                holder = bisect.bisect_right(segment_bases, entry.last_offset) - 1
                if holder >= 0 and entry.last_offset >= log_start_offset:
                    self._insert(segment_bases[holder], entry)

    def _insert(self, base: int, entry: AbortedTxn) -> None:
        merged = sorted(self._entries.get(base, []) + [entry], key=lambda e: e.last_offset)
        self._put(base, merged)
        if self.directory is not None:
            path = txn_index_path(self.directory, base)
            fd = open_rw(path)
            try:
                os.ftruncate(fd, 0)
                pwrite_all(fd, b"".join(encode_entry(e) for e in merged), 0)
            finally:
                os.close(fd)
            self._unflushed.add(base)

    def flush(self) -> None:
        """fsync every file written since the last flush."""
        for base in sorted(self._unflushed):
            path = txn_index_path(self.directory, base)
            if path.exists():
                fd = open_rw(path)
                try:
                    sync_data(fd)
                finally:
                    os.close(fd)
        self._unflushed.clear()

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())
