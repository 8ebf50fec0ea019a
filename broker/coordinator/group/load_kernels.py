"""Compiled (numba) loops of a coordinator takeover: walk a partition's batches once, parse every
offset-commit record into columns, and keep the last record of each key.

A takeover replays the whole ``__consumer_offsets`` partition: with a million committed offsets a
Python loop over the records (decode, then a dict update each) costs ~5 s; these loops do the
per-record work in ~0.1 s and leave Python one step per *surviving* key (``bulk_load``).

``count_records(data, CRC32C_TABLE, check_crc)`` checks the batches (bounds, magic, CRC-32C) and counts
their records. ``scan_records(data, from_offset, out)`` walks whole v2 batches of ``data`` (uncompressed; the
caller checked CRCs and compression) and fills one row of ``out`` per keyed data record at or
after ``from_offset`` (columns ``C_*``). ``KIND_OFFSET`` rows are offset commits whose key (v0/1)
and value (v0-3, or a tombstone) have exactly the layout the schema gives; ``KIND_OFFSET_SLOW``
rows have such a key but another value (v4, flexible, or malformed: the checked Python decoder
says which); ``KIND_OTHER`` rows are anything else (group metadata, unknown or malformed keys).

``intern_spans(data, starts, lengths)`` numbers equal byte strings in first-seen order (an
open-addressing table with exact comparison: a hash collision costs a probe, never a wrong
answer) and gives each number its last row, its row count and whether any row was flagged.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["count_records", "scan_records", "intern_spans", "CRC32C_TABLE", "COLUMNS", "KIND_OFFSET", "KIND_OFFSET_SLOW", "KIND_OTHER"]

KIND_OFFSET, KIND_OFFSET_SLOW, KIND_OTHER = 0, 1, 2
(C_KIND, C_KEY_POS, C_KEY_LEN, C_VALUE_POS, C_VALUE_LEN, C_GROUP_POS, C_GROUP_LEN, C_TOPIC_POS,
 C_TOPIC_LEN, C_PARTITION, C_OFFSET, C_EPOCH, C_META_POS, C_META_LEN, C_COMMIT_TS, C_EXPIRE_TS) = range(16)
COLUMNS = 16
SCAN_OK, SCAN_CORRUPT, SCAN_RECORD_PATH, SCAN_FULL = 0, 1, 2, 3

_HEADER_BYTES = 61
_COMPRESSION_MASK, _TRANSACTIONAL_MASK, _CONTROL_MASK = 0x07, 0x10, 0x20
# Batches the columns do not take: compressed (another writer's), transactional and control
# (transactional offset commits: pending until their marker, the record-at-a-time path's rule).
_RECORD_PATH_MASK = _COMPRESSION_MASK | _TRANSACTIONAL_MASK | _CONTROL_MASK


@njit(inline="always")
def _be(data, pos, size):
    value = np.int64(0)
    for i in range(size):
        value = (value << 8) | np.int64(data[pos + i])
    if size < 8 and value >= (np.int64(1) << (8 * size - 1)):
        value -= np.int64(1) << (8 * size)
    return value


@njit(inline="always")
def _varint(data, pos, end):
    """(zigzag value, next pos); next pos -1 when cut or longer than 10 bytes."""
    raw = np.uint64(0)
    shift = np.uint64(0)
    for i in range(10):
        if pos + i >= end:
            return np.int64(0), -1
        b = np.uint64(data[pos + i])
        raw |= (b & np.uint64(0x7F)) << shift
        if b < 0x80:
            value = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
            return value, pos + i + 1
        shift += np.uint64(7)
    return np.int64(0), -1


@njit(inline="always")
def _parse_key(data, row, pos, length):
    """Fill the key columns; False when this is not an offset-commit key of the exact layout."""
    if length < 4:
        return False
    version = _be(data, pos, 2)
    if version != 0 and version != 1:
        return False
    group_len = _be(data, pos + 2, 2)
    if group_len < 0 or 4 + group_len + 2 > length:
        return False
    topic_at = pos + 4 + group_len
    topic_len = _be(data, topic_at, 2)
    if topic_len < 0 or 4 + group_len + 2 + topic_len + 4 != length:
        return False
    row[C_GROUP_POS], row[C_GROUP_LEN] = pos + 4, group_len
    row[C_TOPIC_POS], row[C_TOPIC_LEN] = topic_at + 2, topic_len
    row[C_PARTITION] = _be(data, topic_at + 2 + topic_len, 4)
    return True


@njit(inline="always")
def _parse_value(data, row, pos, length):
    """Fill the value columns of a v0-3 value; False for any other version or layout."""
    if length < 12:
        return False
    version = _be(data, pos, 2)
    row[C_OFFSET] = _be(data, pos + 2, 8)
    row[C_EXPIRE_TS] = -1
    if version == 3:
        if length < 16:
            return False
        row[C_EPOCH] = _be(data, pos + 10, 4)
        meta_len = _be(data, pos + 14, 2)
        at = 16
    elif 0 <= version <= 2:
        row[C_EPOCH] = -1
        meta_len = _be(data, pos + 10, 2)
        at = 12
    else:
        return False
    tail = 16 if version == 1 else 8
    if meta_len < 0 or at + meta_len + tail != length:
        return False
    row[C_META_POS], row[C_META_LEN] = pos + at, meta_len
    row[C_COMMIT_TS] = _be(data, pos + at + meta_len, 8)
    if version == 1:
        row[C_EXPIRE_TS] = _be(data, pos + at + meta_len + 8, 8)
    return True


def _crc32c_table():
    table = np.zeros(256, np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[n] = c
    return table


CRC32C_TABLE = _crc32c_table()


@njit(inline="always")
def _crc32c(data, start, end, table):
    crc = np.uint32(0xFFFFFFFF)
    for i in range(start, end):
        crc = table[(crc ^ np.uint32(data[i])) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def count_records(data, table, check_crc):
    """(status, records in data batches, bytes of whole batches): the rows ``scan_records``
    needs. Checks every batch's bounds, magic and CRC-32C (``table``: ``CRC32C_TABLE``; with
    ``check_crc``); stops at the first bad batch (SCAN_CORRUPT), at one for the record-at-a-time
    path (SCAN_RECORD_PATH: compressed, transactional or control), or at a batch cut by the end
    of ``data``."""
    pos, end, total = 0, len(data), 0
    while end - pos >= _HEADER_BYTES:
        size = _be(data, pos + 8, 4) + 12
        if size < _HEADER_BYTES or data[pos + 16] != 2:
            return SCAN_CORRUPT, total, pos
        if size > end - pos:
            break  # cut by the end of a read
        if check_crc and np.uint32(_be(data, pos + 17, 4) & 0xFFFFFFFF) != _crc32c(data, pos + 21, pos + size, table):
            return SCAN_CORRUPT, total, pos
        attributes = _be(data, pos + 21, 2)
        if attributes & _RECORD_PATH_MASK:
            return SCAN_RECORD_PATH, total, pos
        total += max(_be(data, pos + 57, 4), 0)
        pos += size
    return SCAN_OK, total, pos


@njit(cache=True, nogil=True)
def scan_records(data, from_offset, out):
    """(status, rows, bytes walked); status SCAN_OK, or where it stopped and why."""
    pos, end, rows = 0, len(data), 0
    while end - pos >= _HEADER_BYTES:
        size = _be(data, pos + 8, 4) + 12
        if size < _HEADER_BYTES or size > end - pos or data[pos + 16] != 2:
            return SCAN_CORRUPT, rows, pos
        attributes = _be(data, pos + 21, 2)
        if attributes & _RECORD_PATH_MASK:
            return SCAN_RECORD_PATH, rows, pos
        base_offset = _be(data, pos, 8)
        count = _be(data, pos + 57, 4)
        if rows + count > out.shape[0]:
            return SCAN_FULL, rows, pos
        at, batch_end = pos + _HEADER_BYTES, pos + size
        for _ in range(count):
            length, at = _varint(data, at, batch_end)
            if at < 0 or length < 0 or at + length > batch_end:
                return SCAN_CORRUPT, rows, pos
            record_end = at + length
            _, at = _varint(data, at + 1, record_end)  # attributes, then timestamp delta
            if at < 0:
                return SCAN_CORRUPT, rows, pos
            delta, at = _varint(data, at, record_end)
            if at < 0:
                return SCAN_CORRUPT, rows, pos
            key_len, at = _varint(data, at, record_end)
            if at < 0 or at + max(key_len, 0) > record_end:
                return SCAN_CORRUPT, rows, pos
            key_at = at
            at += max(key_len, 0)
            value_len, at = _varint(data, at, record_end)
            if at < 0 or at + max(value_len, 0) > record_end:
                return SCAN_CORRUPT, rows, pos
            value_at = at
            at = record_end  # headers are not needed
            if key_len < 0 or base_offset + delta < from_offset:
                continue
            row = out[rows]
            row[C_KEY_POS], row[C_KEY_LEN] = key_at, key_len
            row[C_VALUE_POS], row[C_VALUE_LEN] = value_at, value_len
            if not _parse_key(data, row, key_at, key_len):
                row[C_KIND] = KIND_OTHER
            elif value_len < 0 or _parse_value(data, row, value_at, value_len):
                row[C_KIND] = KIND_OFFSET
            else:
                row[C_KIND] = KIND_OFFSET_SLOW
            rows += 1
        if at != batch_end:
            return SCAN_CORRUPT, rows, pos
        pos += size
    return SCAN_OK, rows, pos


@njit(inline="always")
def _same(data, a, b, length):
    for i in range(length):
        if data[a + i] != data[b + i]:
            return False
    return True


@njit(cache=True, nogil=True)
def intern_spans(data, starts, lengths, flagged):
    """(ids per row, then per id: first row, last row, rows, any row flagged). A slot holds
    (32 bits of the hash, id): a probe past another key costs one look at the table, and the
    bytes are compared only when the hash bits match (the table is the one random access)."""
    n = len(starts)
    slots = 1
    while slots < 2 * n + 2:
        slots *= 2
    mask = slots - 1
    table = np.full(slots, -1, np.int64)  # slot -> tag << 32 | id
    ids = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    count = np.zeros(n, np.int64)
    any_flag = np.zeros(n, np.bool_)
    distinct = 0
    for r in range(n):
        start, length = starts[r], lengths[r]
        h = np.uint64(14695981039346656037)
        for i in range(length):
            h = (h ^ np.uint64(data[start + i])) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
        tag = np.int64(h >> np.uint64(33))  # 31 bits: the entry stays non-negative
        slot = np.int64(h & np.uint64(mask))
        while True:
            entry = table[slot]
            if entry < 0:
                found = distinct
                table[slot] = (tag << 32) | found
                first[found] = r
                distinct += 1
                break
            if (entry >> 32) == tag:
                found = entry & 0xFFFFFFFF
                rep = first[found]
                if lengths[rep] == length and _same(data, starts[rep], start, length):
                    break
            slot = (slot + 1) & mask
        ids[r] = found
        last[found] = r
        count[found] += 1
        if flagged[r]:
            any_flag[found] = True
    return ids, first[:distinct], last[:distinct], count[:distinct], any_flag[:distinct]
