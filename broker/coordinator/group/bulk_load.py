"""A takeover's replay of a large ``__consumer_offsets`` partition, column-wise.

``Shard.load`` replays (key, value) pairs one at a time: ~5 us a record in Python, 5 s for a
million committed offsets. Here the records stay in the partition's bytes (the reads' whole
batches, checked by ``whole_batches`` and joined): ``scan`` parses them
into columns with compiled loops (``load_kernels``) and ``replay`` keeps only the last record of
each offset key *before* any Python object is built, then builds each group's offsets dict in one
``dict(zip(keys, values))`` from column lists — about one dict insert and one tuple per surviving
key (Kafka's loader also replays every record, into a hash map per group).

The result is the same as the record-at-a-time replay, which stays the reference and takes every
record this path does not understand: records that are not offset commits (group metadata, unknown
keys) and every record of an offset key that has an unusual value (v4+, malformed) go through it,
in log order. A key is its bytes after the key version (v0 and v1 are the same struct, and the
struct has one encoding of a (group, topic, partition)). Anything irregular about the data as a whole (a compressed,
transactional or control batch, a corrupt one,
names or metadata that are not UTF-8) makes ``scan``/``replay`` give up before changing the shard,
and the caller replays record by record, which reports the problem as it always did.
"""

from __future__ import annotations

import contextlib
import gc
from itertools import repeat

import numpy as np

from broker.coordinator.group import load_kernels as k

__all__ = ["ScannedRecords", "whole_batches", "scan", "replay"]


class ScannedRecords:
    """The keyed data records of whole batches, as ``load_kernels`` columns over their bytes."""

    __slots__ = ("data", "rows")

    def __init__(self, data: bytes, rows: np.ndarray) -> None:
        self.data = data
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def pairs(self, indexes) -> list[tuple[bytes, bytes | None]]:
        """(key, value) of the given rows, for the record-at-a-time replay."""
        data, rows, out = self.data, self.rows, []
        for r in indexes:
            key_pos, key_len, value_pos, value_len = rows[r, k.C_KEY_POS:k.C_VALUE_LEN + 1].tolist()
            out.append((data[key_pos:key_pos + key_len],
                        None if value_len < 0 else data[value_pos:value_pos + value_len]))
        return out


def whole_batches(data) -> int | None:
    """Bytes of ``data``'s whole batches (a read may end in a cut one), each checked (bounds,
    magic, CRC-32C); None when one is corrupt (``decode_records`` then raises the error), or is
    compressed, transactional or a control batch (the record-at-a-time path's: transactional
    offsets wait for their marker). Runs off the event loop (compiled, without the GIL)."""
    status, _, walked = k.count_records(np.frombuffer(data, np.uint8), k.CRC32C_TABLE, True)
    return walked if status == k.SCAN_OK else None


def scan(data: bytes, from_offset: int = 0) -> ScannedRecords | None:
    """The keyed data records at or after ``from_offset`` of ``data``, whole uncompressed
    batches that ``whole_batches`` checked; None for anything it did not accept."""
    array = np.frombuffer(data, np.uint8)
    status, total, walked = k.count_records(array, k.CRC32C_TABLE, False)
    if status != k.SCAN_OK or walked != len(data):
        return None
    out = np.empty((total, k.COLUMNS), np.int64)
    status, rows, _ = k.scan_records(array, from_offset, out)
    return ScannedRecords(data, out[:rows]) if status == k.SCAN_OK else None


def replay(records: ScannedRecords, offsets: dict, offset_value: type, replay_one) -> bool:
    """Apply ``records`` to ``offsets`` (group -> {(topic, partition): offset_value(...)}, a
    tuple subclass without its own fields' defaults to fill), the
    last record of each key winning; ``replay_one(key, value)`` takes the rows this path leaves
    to the record-at-a-time replay, in log order. False, with nothing changed, when a name or
    metadata is not UTF-8 (the caller then replays every record one at a time)."""
    data, rows = records.data, records.rows
    array = np.frombuffer(data, np.uint8)
    kind = rows[:, k.C_KIND]
    with _collector_paused():
        return _replay(data, array, rows, kind, offsets, offset_value, replay_one, records)


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a million tuples are built: each of its young
    collections (every 700 allocations) walks the young objects and the older generations get
    walked as they fill, which made the build 5x slower (1.3 s instead of 0.25 s a million
    values). Tuples of ints and strings make no cycles, so nothing is left for it to find."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _replay(data, array, rows, kind, offsets, offset_value, replay_one, records) -> bool:
    # A key is its bytes after the key version: versions 0 and 1 are one struct, one key.
    key_ids, _, last, _, slow = k.intern_spans(array, rows[:, k.C_KEY_POS] + 2,
                                               np.maximum(rows[:, k.C_KEY_LEN] - 2, 0), kind != k.KIND_OFFSET)
    winners = rows[last[~slow]]
    winners = winners[winners[:, k.C_VALUE_LEN] >= 0]  # a tombstone last: the key is gone
    built = _build(data, array, winners, offset_value)
    if built is None:
        return False
    for group, by_key in built:
        existing = offsets.get(group)
        if existing is None:
            offsets[group] = by_key
        else:
            existing.update(by_key)
    for key, value in records.pairs(np.flatnonzero(slow[key_ids])):
        replay_one(key, value)
    return True


def _names(data: bytes, array, starts, lengths) -> tuple[np.ndarray, list[str]] | None:
    ids, first, _, _, _ = k.intern_spans(array, starts, lengths, np.zeros(len(starts), np.bool_))
    try:
        return ids, [data[p:p + n].decode() for p, n in zip(starts[first].tolist(), lengths[first].tolist())]
    except UnicodeDecodeError:
        return None


def _build(data: bytes, array, winners: np.ndarray, offset_value) -> list | None:
    """[(group, {(topic, partition): value})] of the winning rows, or None (not UTF-8)."""
    groups = _names(data, array, winners[:, k.C_GROUP_POS], winners[:, k.C_GROUP_LEN])
    topics = _names(data, array, winners[:, k.C_TOPIC_POS], winners[:, k.C_TOPIC_LEN])
    if groups is None or topics is None:
        return None
    (group_ids, group_names), (topic_ids, topic_names) = groups, topics
    wanted = [k.C_PARTITION, k.C_OFFSET, k.C_EPOCH, k.C_COMMIT_TS, k.C_EXPIRE_TS, k.C_META_POS, k.C_META_LEN]
    columns = np.vstack([winners[:, wanted].T, topic_ids])  # one contiguous row per field
    if len(group_ids) > 1 and (group_ids[1:] < group_ids[:-1]).any():
        order = np.argsort(group_ids, kind="stable")  # each group's keys together, in log order
        columns = columns[:, order]
    partitions, offsets, epochs, commit_ts, expire, meta_pos, meta_len, topic_ids = columns
    metadata = [""] * len(partitions)
    nonempty = np.flatnonzero(meta_len)
    try:
        for i, p, n in zip(nonempty.tolist(), meta_pos[nonempty].tolist(), meta_len[nonempty].tolist()):
            metadata[i] = data[p:p + n].decode()
    except UnicodeDecodeError:
        return None
    expires = [None] * len(partitions) if not (expire >= 0).any() else \
        [e if e >= 0 else None for e in expire.tolist()]
    names = topic_names[0] if len(topic_names) == 1 else None
    keys = list(zip(repeat(names) if names is not None else map(topic_names.__getitem__, topic_ids.tolist()),
                    partitions.tolist()))
    # tuple.__new__ builds each value in C (a NamedTuple's own __new__ is a Python call: 3x slower)
    values = list(map(tuple.__new__, repeat(offset_value),
                      zip(offsets.tolist(), epochs.tolist(), metadata, commit_ts.tolist(), expires)))
    bounds = np.cumsum(np.bincount(group_ids, minlength=len(group_names))).tolist()
    out, start = [], 0
    for name, end in zip(group_names, bounds):
        out.append((name, dict(zip(keys[start:end], values[start:end]))))
        start = end
    return out
