"""The sparse time index of one segment: the ``<base offset>.timeindex`` file (KIP-33).

Format (Kafka ``TimeIndex``): a flat array of 12-byte big-endian entries, no header, no padding::

    off  size  field           notes
      0     8  timestamp       int64: the largest batch maxTimestamp seen so far in the segment
      8     4  relativeOffset  int32: last offset of the first batch that carried that timestamp,
                               minus the segment's base offset

At each offset-index point the segment offers (max timestamp so far, its offset); the entry is
added only when the timestamp is larger than the last entry's, so timestamps strictly increase and
offsets never decrease. An empty index behaves as if its last entry were (-1, base offset). When a
segment stops being the active one, a final entry records its exact largest timestamp if room is
left. Invariant used by ``lookup``: every batch at or before an entry's offset has a max timestamp
<= the entry's timestamp, and batches before it a smaller one. Nothing is checksummed; the file is
not preallocated; its length is 12 × entries and at most ``segment.index.bytes``.

New entries wait in memory (up to 4 KiB) until a flush, a roll, a truncation or close, like the
offset index's. After a crash the file may be short, torn, or name offsets past the log's end:
``check_quick`` (whole entries, within the limit) at open, the segment's check that the last
entry's offset is below its next offset, and ``load`` (monotonic entries) on first lookup detect
it; the segment then rebuilds the index from the log.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

import numpy as np

from broker.log.config import INT32_MAX
from broker.log.fileio import open_rw, pread_exact, pwrite_all, sync_data
from broker.log.offset_index import PENDING_BYTES_MAX, to_array

__all__ = ["TimeIndex", "TIME_ENTRY_SIZE", "NO_TIMESTAMP"]

_ENTRY = struct.Struct(">qi")
TIME_ENTRY_SIZE = _ENTRY.size
NO_TIMESTAMP = -1
_DTYPE = np.dtype([("timestamp", ">i8"), ("rel", ">i4")])


class TimeIndex:
    """The ``.timeindex`` file of one segment and its in-memory columns; owns one fd."""

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max_index_bytes // TIME_ENTRY_SIZE
        self._fd = open_rw(path)
        self._count = 0  # entries, written or pending
        self._written = 0  # entries in the file
        self._pending = bytearray()  # entries not yet written, in file order
        self._last_ts = NO_TIMESTAMP
        self._last_rel = 0
        self._ts: array | None = None
        self._rel: array | None = None

    @property
    def entries(self) -> int:
        return self._count

    @property
    def loaded(self) -> bool:
        return self._ts is not None

    @property
    def is_full(self) -> bool:
        return self._count >= self._max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base offset) when empty."""
        return self._last_ts, self.base_offset + self._last_rel

    def set_max_index_bytes(self, max_index_bytes: int) -> None:
        self._max_entries = max_index_bytes // TIME_ENTRY_SIZE

    def check_quick(self) -> bool:
        """O(1) sanity check at open: whole entries, within the limit, a sane last entry."""
        size = os.fstat(self._fd).st_size
        if size % TIME_ENTRY_SIZE or size // TIME_ENTRY_SIZE > self._max_entries:
            return False
        self._count = self._written = size // TIME_ENTRY_SIZE
        self._pending.clear()
        self._ts = self._rel = None
        if self._count == 0:
            self._last_ts, self._last_rel = NO_TIMESTAMP, 0
            return True
        raw = pread_exact(self._fd, TIME_ENTRY_SIZE, size - TIME_ENTRY_SIZE)
        self._last_ts, self._last_rel = _ENTRY.unpack(raw)
        return self._last_rel >= 0 and self._last_ts > NO_TIMESTAMP

    def load(self) -> bool:
        """Read every entry and check the monotonic order; False means rebuild the index."""
        self.write_pending()
        raw = pread_exact(self._fd, self._count * TIME_ENTRY_SIZE, 0)
        if len(raw) != self._count * TIME_ENTRY_SIZE:
            return False
        entries = np.frombuffer(raw, dtype=_DTYPE)
        ts, rel = entries["timestamp"], entries["rel"]
        if len(ts) and (rel[0] < 0 or ts[0] <= NO_TIMESTAMP):
            return False
        if not (np.all(ts[1:] > ts[:-1]) and np.all(rel[1:] >= rel[:-1])):
            return False
        self._ts = to_array("q", ts)
        self._rel = to_array("i", rel)
        return True

    def reset(self) -> None:
        os.ftruncate(self._fd, 0)
        self._count = self._written = 0
        self._pending.clear()
        self._last_ts, self._last_rel = NO_TIMESTAMP, 0
        self._ts, self._rel = array("q"), array("i")

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) if the timestamp is new and there is room; True if added."""
        if timestamp <= self._last_ts or self.is_full:
            return False
        rel = offset - self.base_offset
        assert 0 <= rel <= INT32_MAX and (self._count == 0 or rel >= self._last_rel)
        self._pending += _ENTRY.pack(timestamp, rel)
        self._count += 1
        if len(self._pending) >= PENDING_BYTES_MAX:
            self.write_pending()
        self._last_ts, self._last_rel = timestamp, rel
        if self._ts is not None:
            self._ts.append(timestamp)
            self._rel.append(rel)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= ``timestamp``.

        (-1, base offset) when there is none. Every batch before that offset has a smaller max
        timestamp, so a search for the first batch with max timestamp >= ``timestamp`` may start
        at the batch holding that offset.
        """
        assert self._ts is not None, "load() the index before lookups"
        i = bisect.bisect_right(self._ts, timestamp) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._ts[i], self.base_offset + self._rel[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        assert self._ts is not None, "load() the index before truncating"
        keep = bisect.bisect_left(self._rel, offset - self.base_offset)
        if keep == self._count:
            return
        self.write_pending()
        os.ftruncate(self._fd, keep * TIME_ENTRY_SIZE)
        del self._ts[keep:]
        del self._rel[keep:]
        self._count = self._written = keep
        self._last_ts = self._ts[-1] if keep else NO_TIMESTAMP
        self._last_rel = self._rel[-1] if keep else 0

    def write_pending(self) -> None:
        """Write the entries held in memory to the file (no fsync)."""
        if self._pending:
            pwrite_all(self._fd, self._pending, self._written * TIME_ENTRY_SIZE)
            self._written = self._count
            self._pending.clear()

    def flush(self) -> None:
        self.write_pending()
        sync_data(self._fd)

    def close(self) -> None:
        """Write pending entries (as the OS would have) and close the fd."""
        fd = self._fd
        try:
            if fd >= 0:
                self.write_pending()
        finally:
            self._fd = -1
            if fd >= 0:
                os.close(fd)

    def delete(self) -> None:
        self._pending.clear()
        self.close()
        self.path.unlink(missing_ok=True)
