"""The cleaner's key -> latest offset map, bounded by ``log.cleaner.dedupe.buffer.size``.

Kafka's ``SkimpyOffsetMap`` is an open-addressed table of (MD5 of key, offset) slots. Here the map
is two sorted arrays, built a chunk of records at a time with numpy (per record, only compiled or
vectorized code runs): ``hi``/``lo``, the 128-bit keyed hash of each key (``key_hash``), and
``offsets``, the offset of that key's newest record in the mapped range.

Memory: an entry is 24 bytes (two uint64 halves and an int64 offset), so ``capacity =
dedupe_buffer_bytes // 24`` entries. Merging a chunk in needs the map, the chunk, and one sorted
copy of both: peak memory is about 2 x (map + chunk); the shell reads chunks of at most
``chunk_records_max`` records, so the bound is 2 x dedupe buffer + 2 x 24 x chunk size.

When a chunk brings more new keys than the map has room for, only the prefix of the chunk that
fits is taken (``add`` says how many records), and the map ends there: ``end_offset`` is the first
offset not mapped. Records at or past it are kept by this pass whatever their key, and the next
pass maps them (Kafka cleans a log whose dirty section does not fit in several passes the same way).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ENTRY_BYTES", "OffsetMap", "OffsetMapBuilder", "capacity_for"]

ENTRY_BYTES = 24


def capacity_for(dedupe_buffer_bytes: int) -> int:
    """Entries that fit ``dedupe_buffer_bytes`` (at least one, so every pass makes progress)."""
    return max(1, dedupe_buffer_bytes // ENTRY_BYTES)


class OffsetMap:
    """Sorted (hi, lo) -> offset; ``start_offset``/``end_offset`` bound what was mapped."""

    __slots__ = ("hi", "lo", "offsets", "start_offset", "end_offset")

    def __init__(self, hi: np.ndarray, lo: np.ndarray, offsets: np.ndarray, start_offset: int,
                 end_offset: int) -> None:
        self.hi, self.lo, self.offsets = hi, lo, offsets
        self.start_offset, self.end_offset = start_offset, end_offset

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def latest_offsets(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The mapped offset of each queried key, -1 where the key is not in the map."""
        return _lookup(self.hi, self.lo, self.offsets, hi, lo)


class OffsetMapBuilder:
    """Feed chunks of records in offset order with ``add``; ``build`` returns the map."""

    def __init__(self, capacity: int, start_offset: int) -> None:
        assert capacity >= 1
        self.capacity = capacity
        self.start_offset = start_offset
        self.full = False
        self._hi = np.empty(0, np.uint64)
        self._lo = np.empty(0, np.uint64)
        self._offsets = np.empty(0, np.int64)

    def __len__(self) -> int:
        return int(self._offsets.shape[0])

    def add(self, offsets: np.ndarray, hi: np.ndarray, lo: np.ndarray, mapped: np.ndarray) -> int:
        """Map the records of one chunk (offsets increasing); ``mapped`` masks the records that
        take part (keyed data of committed or non-transactional batches). Returns how many records
        of the chunk were consumed: all of them, or the prefix that fit, after which ``full``."""
        assert not self.full, "a full map takes no more records"
        n = int(offsets.shape[0])
        if n == 0:
            return 0
        new_key = self._new_key_flags(hi, lo, mapped)
        room = self.capacity - len(self)
        consumed = n
        if int(new_key.sum()) > room:
            # The record that would bring key number room+1 is the first one left out.
            consumed = int(np.searchsorted(np.cumsum(new_key), room + 1))
            self.full = True
        take = mapped[:consumed]
        self._merge(hi[:consumed][take], lo[:consumed][take], offsets[:consumed][take])
        return consumed

    def _new_key_flags(self, hi: np.ndarray, lo: np.ndarray, mapped: np.ndarray) -> np.ndarray:
        """True at the first mapped occurrence, within the chunk, of a key not yet in the map."""
        flags = np.zeros(hi.shape[0], dtype=np.int64)
        idx = np.flatnonzero(mapped)
        if idx.size == 0:
            return flags
        pairs = np.empty(idx.size, dtype=[("hi", np.uint64), ("lo", np.uint64)])
        pairs["hi"], pairs["lo"] = hi[idx], lo[idx]
        _, first = np.unique(pairs, return_index=True)
        first_idx = idx[first]
        known = _lookup(self._hi, self._lo, self._offsets, hi[first_idx], lo[first_idx]) >= 0
        flags[first_idx[~known]] = 1
        return flags

    def _merge(self, hi: np.ndarray, lo: np.ndarray, offsets: np.ndarray) -> None:
        """Union with the map, keeping the largest offset per key (later records win)."""
        all_hi = np.concatenate([self._hi, hi])
        all_lo = np.concatenate([self._lo, lo])
        all_offsets = np.concatenate([self._offsets, offsets])
        # Sort by key, then by offset: the last entry of each run of equal keys is the newest.
        order = np.lexsort((all_offsets, all_lo, all_hi))
        all_hi, all_lo, all_offsets = all_hi[order], all_lo[order], all_offsets[order]
        last = np.ones(all_hi.shape[0], dtype=bool)
        last[:-1] = (all_hi[1:] != all_hi[:-1]) | (all_lo[1:] != all_lo[:-1])
        self._hi, self._lo, self._offsets = all_hi[last], all_lo[last], all_offsets[last]

    def build(self, end_offset: int) -> OffsetMap:
        """The map of everything added; ``end_offset`` is the first offset it does not cover."""
        assert end_offset >= self.start_offset
        return OffsetMap(self._hi, self._lo, self._offsets, self.start_offset, end_offset)


def _lookup(map_hi: np.ndarray, map_lo: np.ndarray, map_offsets: np.ndarray, hi: np.ndarray,
            lo: np.ndarray) -> np.ndarray:
    """Vectorized search of (hi, lo) in arrays sorted by (hi, lo); -1 where absent."""
    result = np.full(hi.shape[0], -1, dtype=np.int64)
    if map_hi.shape[0] == 0 or hi.shape[0] == 0:
        return result
    left = np.searchsorted(map_hi, hi, side="left")
    right = np.searchsorted(map_hi, hi, side="right")
    # Within the run of equal hi (almost always of length 0 or 1), find lo.
    single = (right - left) == 1
    hit = single & (map_lo[np.minimum(left, map_hi.shape[0] - 1)] == lo)
    result[hit] = map_offsets[left[hit]]
    for i in np.flatnonzero((right - left) > 1):  # two keys sharing a 64-bit half: ~never
        run = slice(left[i], right[i])
        j = np.searchsorted(map_lo[run], lo[i])
        if j < right[i] - left[i] and map_lo[run][j] == lo[i]:
            result[i] = map_offsets[run][j]
    return result
