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
import struct
from array import array
from pathlib import Path

import numpy as np

from broker.log.config import INT32_MAX
from broker.log.index_file import IndexFile
from broker.log.offset_index import to_array

__all__ = ["TimeIndex", "TIME_ENTRY_SIZE", "NO_TIMESTAMP"]

_ENTRY = struct.Struct(">qi")
TIME_ENTRY_SIZE = _ENTRY.size
NO_TIMESTAMP = -1
_DTYPE = np.dtype([("timestamp", ">i8"), ("rel", ">i4")])


class TimeIndex(IndexFile):
    """The ``.timeindex`` file of one segment and its in-memory columns; owns one fd."""

    entry_size = TIME_ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self._last_ts = NO_TIMESTAMP
        self._last_rel = 0
        self._ts: array | None = None
        self._rel: array | None = None

    @property
    def loaded(self) -> bool:
        return self._ts is not None

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base offset) when empty."""
        return self._last_ts, self.base_offset + self._last_rel

    def check_quick(self) -> bool:
        """O(1) sanity check at open: whole entries, within the limit, a sane last entry."""
        size = self._check_size()
        if size is None:
            return False
        self._ts = self._rel = None
        if self._count == 0:
            self._last_ts, self._last_rel = NO_TIMESTAMP, 0
            return True
        self._last_ts, self._last_rel = _ENTRY.unpack(self._read_last_entry(size))
        return self._last_rel >= 0 and self._last_ts > NO_TIMESTAMP

    def load(self) -> bool:
        """Read every entry and check the monotonic order; False means rebuild the index."""
        raw = self._read_all()
        if raw is None:
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
        self._clear_file()
        self._last_ts, self._last_rel = NO_TIMESTAMP, 0
        self._ts, self._rel = array("q"), array("i")

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Add (timestamp, offset) if the timestamp is new and there is room; True if added."""
        if timestamp <= self._last_ts or self.is_full:
            return False
        rel = offset - self.base_offset
        assert 0 <= rel <= INT32_MAX and (self._count == 0 or rel >= self._last_rel)
        self._add_entry(_ENTRY.pack(timestamp, rel))
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
        self._keep_entries(keep)
        del self._ts[keep:]
        del self._rel[keep:]
        self._last_ts = self._ts[-1] if keep else NO_TIMESTAMP
        self._last_rel = self._rel[-1] if keep else 0
