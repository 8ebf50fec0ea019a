"""The cleaner's key -> latest offset map, bounded by ``log.cleaner.dedupe.buffer.size``.

Like Kafka's ``SkimpyOffsetMap``: an open-addressed hash table of fixed size, allocated once,
whose slots hold a key's 128-bit keyed hash (``key_hash``) and the offset of its newest record.
A slot is 24 bytes (two hash halves and an int64 offset, -1 when empty), so ``slots =
dedupe_buffer_bytes // 24`` and the map's memory is exactly that, whatever the keys. The three
fields of a slot sit side by side (one int64 row of 3, the halves' bits as int64): a probe of a
map far larger than the caches costs one cache miss, where three separate arrays cost three. The map is
full at ``LOAD_FACTOR`` of its slots (linear probing from the hash's high half; the probes stay
short at that load). Inserting and looking up are compiled loops (numba): about 20-50 ns a record.

When a chunk brings more new keys than the map has room for, only the prefix of the chunk that
fits is taken (``add`` says how many records), and the map ends there: ``end_offset`` is the first
offset not mapped. Records at or past it are kept by this pass whatever their key, and the next
pass maps them (Kafka cleans a log whose dirty section does not fit in several passes the same way).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["ENTRY_BYTES", "LOAD_FACTOR", "OffsetMap", "OffsetMapBuilder", "capacity_for"]

ENTRY_BYTES = 24
LOAD_FACTOR = 0.75
_EMPTY = -1


def capacity_for(dedupe_buffer_bytes: int) -> int:
    """Keys a map in ``dedupe_buffer_bytes`` holds before it is full (at least one, so every
    pass makes progress)."""
    return max(1, int(dedupe_buffer_bytes // ENTRY_BYTES * LOAD_FACTOR))


@njit(cache=True, nogil=True)  # array work only: the broker's event loop runs meanwhile
def _insert(table, hi, lo, offsets, mapped, entries, entries_max):
    """Map records in order; stop before the record that would need entry entries_max + 1.
    Returns (records consumed, entries now). ``table`` is int64 [slots, 3]: hi, lo, offset."""
    slots = np.uint64(table.shape[0])
    for i in range(offsets.shape[0]):
        if not mapped[i]:
            continue
        h, l = hi[i], lo[i]
        s = np.int64(np.uint64(h) % slots)
        while True:
            if table[s, 2] == _EMPTY:
                if entries == entries_max:
                    return i, entries
                table[s, 0] = h
                table[s, 1] = l
                table[s, 2] = offsets[i]
                entries += 1
                break
            if table[s, 0] == h and table[s, 1] == l:
                if offsets[i] > table[s, 2]:
                    table[s, 2] = offsets[i]
                break
            s += 1
            if s == table.shape[0]:
                s = 0
    return offsets.shape[0], entries


@njit(cache=True, nogil=True)  # array work only: the broker's event loop runs meanwhile
def _lookup(table, hi, lo, out):
    slots = np.uint64(table.shape[0])
    for i in range(hi.shape[0]):
        h, l = hi[i], lo[i]
        s = np.int64(np.uint64(h) % slots)
        out[i] = _EMPTY
        while True:
            if table[s, 2] == _EMPTY:
                break
            if table[s, 0] == h and table[s, 1] == l:
                out[i] = table[s, 2]
                break
            s += 1
            if s == table.shape[0]:
                s = 0


def _bits(values: np.ndarray) -> np.ndarray:
    """uint64 hash halves as int64 bits (the table's type), without a copy when possible."""
    return np.ascontiguousarray(values, np.uint64).view(np.int64)


class OffsetMap:
    """The built map; ``start_offset``/``end_offset`` bound what was mapped."""

    __slots__ = ("_table", "entries", "start_offset", "end_offset")

    def __init__(self, table, entries: int, start_offset: int, end_offset: int) -> None:
        self._table = table
        self.entries, self.start_offset, self.end_offset = entries, start_offset, end_offset

    def __len__(self) -> int:
        return self.entries

    def latest_offsets(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The mapped offset of each queried key, -1 where the key is not in the map."""
        out = np.empty(hi.shape[0], dtype=np.int64)
        _lookup(self._table, _bits(hi), _bits(lo), out)
        return out


class OffsetMapBuilder:
    """Feed chunks of records in offset order with ``add``; ``build`` returns the map."""

    def __init__(self, capacity: int, start_offset: int) -> None:
        assert capacity >= 1
        self.capacity = capacity
        self.start_offset = start_offset
        self.full = False
        slots = max(capacity + 1, int(capacity / LOAD_FACTOR))  # never 100 % full: probes end
        self._table = np.full((slots, 3), _EMPTY, np.int64)
        self._entries = 0

    def __len__(self) -> int:
        return self._entries

    def add(self, offsets: np.ndarray, hi: np.ndarray, lo: np.ndarray, mapped: np.ndarray) -> int:
        """Map the records of one chunk (offsets increasing); ``mapped`` masks the records that
        take part (keyed data of committed or non-transactional batches). Returns how many records
        of the chunk were consumed: all of them, or the prefix that fit, after which ``full``."""
        assert not self.full, "a full map takes no more records"
        consumed, self._entries = _insert(
            self._table, _bits(hi), _bits(lo), np.ascontiguousarray(offsets, np.int64),
            np.ascontiguousarray(mapped, np.bool_), self._entries, self.capacity)
        if consumed < offsets.shape[0]:
            self.full = True
        return int(consumed)

    def build(self, end_offset: int) -> OffsetMap:
        """The map of everything added; ``end_offset`` is the first offset it does not cover."""
        assert end_offset >= self.start_offset
        return OffsetMap(self._table, self._entries, self.start_offset, end_offset)
