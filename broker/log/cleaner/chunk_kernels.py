"""Compiled (numba) loops of the cleaner's read and rewrite: one call per chunk, not per batch.

The profile of a pass over 15 KiB batches of 100-byte records (``docs/performance.md``) was
per-batch Python, not per-record work: cutting a segment into chunks walked every batch header
in Python, decoding a chunk built Arrow columns and copied every key and value only to hash the
keys, and rewriting a batch took about ten numpy calls. Here a chunk costs three kernel calls:

- ``walk_headers``: the batch headers of a run of bytes, into an int64 table (one row per
  whole batch, ``H_*`` columns), with the structural checks ``fileio.iter_file_headers`` makes
  (a header, inside the bytes, magic 2, lastOffsetDelta >= 0); it stops at the first batch that
  fails them or is cut;
- ``scan_records``: walks the records of batches (the framing checks of the Arrow decode kernel,
  ``broker.records._arrow_kernels.decode_records``, the same errors) and writes, per record,
  offset, timestamp, the key's 128-bit keyed hash (``key_hash``: hashed where it lies, never
  copied), key and value nullness and the record's byte span; values are skipped, not read;
- ``rewrite_batches``: the cleaned bytes of a run of batches: KEEP copied, DROP skipped, a
  REWRITE of an uncompressed batch whose base timestamp stays (no new delete horizon) written as
  its header (length, max timestamp and count patched) and the kept records' spans. The CRC of
  each rewritten batch is the caller's (the ``crc32c`` module is far faster than a byte loop).

Safety as in ``_arrow_kernels``: every read is checked against its record's or batch's end, every
length against the bytes left; errors are codes in ``state``, never exceptions; the caller sizes
the outputs from bounds that hold for any input.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from broker.log.cleaner.key_hash import _siphash24_pair
from broker.records._arrow_kernels import (
    ERR_BATCH_TRAILING,
    ERR_FIELD_LENGTH,
    ERR_HEADER_COUNT,
    ERR_HEADER_KEY_UTF8,
    ERR_NULL_HEADER_KEY,
    ERR_OFFSET_DELTA,
    ERR_RECORD_LENGTH,
    ERR_RECORD_TRAILING,
    S_BATCH,
    S_DETAIL,
    S_ERROR,
    S_POS,
    STATE_SIZE,
    _copy,
    _is_utf8,
    _read_varint,
)

__all__ = ["ACT_DROP", "ACT_KEEP", "ACT_REWRITE", "HEADER_COLUMNS", "STATE_SIZE", "rewrite_batches",
           "scan_records", "walk_headers"]

HEADER_BYTES = 61
# Columns of the header table.
H_POS, H_SIZE, H_BASE_OFFSET, H_ATTRIBUTES, H_LAST_DELTA, H_BASE_TS, H_MAX_TS = 0, 1, 2, 3, 4, 5, 6
H_PRODUCER_ID, H_COUNT, H_CRC, H_FIRST_RECORD, H_END_RECORD = 7, 8, 9, 10, 11
HEADER_COLUMNS = 12

ACT_KEEP, ACT_REWRITE, ACT_DROP = 0, 1, 2  # rewrite_batches' actions (others are the caller's)

_COMPRESSION_MASK, _LOG_APPEND_MASK, _CONTROL_MASK = 0x07, 0x08, 0x20


@njit(inline="always")
def _be(data, pos, size):
    """Big-endian signed integer of ``size`` bytes at ``pos`` (the caller checked the range)."""
    value = np.int64(0)
    for i in range(size):
        value = (value << 8) | np.int64(data[pos + i])
    if size < 8 and value >= (np.int64(1) << (8 * size - 1)):
        value -= np.int64(1) << (8 * size)
    return value


@njit(inline="always")
def _put_be(out, pos, value, size):
    for i in range(size - 1, -1, -1):
        out[pos + i] = value & 0xFF
        value >>= 8


@njit(cache=True, nogil=True)
def walk_headers(data, start, end, table):
    """Fill ``table`` with the whole batches of data[start:end]; (rows, end of the last one).
    Stops at the first batch that is cut, malformed (see the module docstring), or when
    ``table`` is full."""
    pos = start
    rows = 0
    while rows < table.shape[0] and end - pos >= HEADER_BYTES:
        size = _be(data, pos + 8, 4) + 12
        if size < HEADER_BYTES or size > end - pos or data[pos + 16] != 2:
            break
        last_delta = _be(data, pos + 23, 4)
        if last_delta < 0:
            break
        table[rows, H_POS] = pos
        table[rows, H_SIZE] = size
        table[rows, H_BASE_OFFSET] = _be(data, pos, 8)
        table[rows, H_ATTRIBUTES] = _be(data, pos + 21, 2)
        table[rows, H_LAST_DELTA] = last_delta
        table[rows, H_BASE_TS] = _be(data, pos + 27, 8)
        table[rows, H_MAX_TS] = _be(data, pos + 35, 8)
        table[rows, H_PRODUCER_ID] = _be(data, pos + 43, 8)
        table[rows, H_COUNT] = _be(data, pos + 57, 4)
        table[rows, H_CRC] = _be(data, pos + 17, 4) & 0xFFFFFFFF
        rows += 1
        pos += size
    return rows, pos


@njit(inline="always")
def _fail(state, code, batch, pos, detail):
    state[S_ERROR] = code
    state[S_BATCH] = batch
    state[S_POS] = pos
    state[S_DETAIL] = detail


@njit(cache=True, nogil=True)
def scan_records(src, table, first_batch, end_batch, records_start, records_end, row, headers_max,
                 k0, k1, k2, k3, offsets, timestamps, hi, lo, has_key, tombstone, starts, ends, state):
    """Walk the records of batches [first_batch, end_batch) of ``table`` from row ``row`` on;
    returns the next row. A batch's records are src[pos + 61 : pos + size], or, when
    ``records_end >= 0`` (one decompressed batch), src[records_start:records_end]. Control
    batches are not walked (their markers are decided per batch): their record range is empty.
    Sets H_FIRST_RECORD / H_END_RECORD of each batch."""
    for b in range(first_batch, end_batch):
        table[b, H_FIRST_RECORD] = row
        if table[b, H_ATTRIBUTES] & _CONTROL_MASK:
            table[b, H_END_RECORD] = row
            continue
        if records_end >= 0:
            p, end = records_start, records_end
        else:
            p, end = table[b, H_POS] + HEADER_BYTES, table[b, H_POS] + table[b, H_SIZE]
        base_offset = table[b, H_BASE_OFFSET]
        base_ts = table[b, H_BASE_TS]
        log_append = table[b, H_ATTRIBUTES] & _LOG_APPEND_MASK
        last_delta = table[b, H_LAST_DELTA]
        for _ in range(table[b, H_COUNT]):
            starts[row] = p
            length, p, err = _read_varint(src, p, end, 5)
            if err:
                _fail(state, err, b, p, 0)
                return row
            if length < 0 or length > end - p:
                _fail(state, ERR_RECORD_LENGTH, b, p, length)
                return row
            rend = p + length
            p += 1  # attributes: unused in v2
            ts_delta, p, err = _read_varint(src, p, rend, 10)
            if err:
                _fail(state, err, b, p, 0)
                return row
            offset_delta, p, err = _read_varint(src, p, rend, 5)
            if err:
                _fail(state, err, b, p, 0)
                return row
            if offset_delta < 0 or offset_delta > last_delta:
                _fail(state, ERR_OFFSET_DELTA, b, p, offset_delta)
                return row
            klen, p, err = _read_varint(src, p, rend, 5)
            if err:
                _fail(state, err, b, p, 0)
                return row
            if klen < -1 or klen > rend - p:
                _fail(state, ERR_FIELD_LENGTH, b, p, klen)
                return row
            kpos = p
            if klen > 0:
                p += klen
            vlen, p, err = _read_varint(src, p, rend, 5)
            if err:
                _fail(state, err, b, p, 0)
                return row
            if vlen < -1 or vlen > rend - p:
                _fail(state, ERR_FIELD_LENGTH, b, p, vlen)
                return row
            if vlen > 0:
                p += vlen
            hcount, p, err = _read_varint(src, p, rend, 5)
            if err:
                _fail(state, err, b, p, 0)
                return row
            if hcount < 0 or hcount > headers_max:
                _fail(state, ERR_HEADER_COUNT, b, p, hcount)
                return row
            for _h in range(hcount):
                hklen, p, err = _read_varint(src, p, rend, 5)
                if err:
                    _fail(state, err, b, p, 0)
                    return row
                if hklen == -1:
                    _fail(state, ERR_NULL_HEADER_KEY, b, p, 0)
                    return row
                if hklen < -1 or hklen > rend - p:
                    _fail(state, ERR_FIELD_LENGTH, b, p, hklen)
                    return row
                hkpos = p
                p += hklen
                if not _is_utf8(src, hkpos, p):
                    _fail(state, ERR_HEADER_KEY_UTF8, b, hkpos, 0)
                    return row
                hvlen, p, err = _read_varint(src, p, rend, 5)
                if err:
                    _fail(state, err, b, p, 0)
                    return row
                if hvlen < -1 or hvlen > rend - p:
                    _fail(state, ERR_FIELD_LENGTH, b, p, hvlen)
                    return row
                if hvlen > 0:
                    p += hvlen
            if p != rend:
                _fail(state, ERR_RECORD_TRAILING, b, p, rend - p)
                return row
            ends[row] = rend
            offsets[row] = base_offset + offset_delta
            timestamps[row] = table[b, H_MAX_TS] if log_append else base_ts + ts_delta
            key_end = kpos + max(klen, 0)
            hi[row], lo[row] = _siphash24_pair(src, kpos, key_end, k0, k1, k2, k3)
            has_key[row] = klen >= 0
            tombstone[row] = vlen < 0
            row += 1
        if p != end:
            _fail(state, ERR_BATCH_TRAILING, b, p, end - p)
            return row
        table[b, H_END_RECORD] = row
    return row


@njit(cache=True, nogil=True)
def rewrite_batches(data, table, first_batch, end_batch, actions, keep, starts, ends, timestamps,
                    out, out_pos, out_size, out_max_ts):
    """Write batches [first_batch, end_batch) of ``table`` by ``actions`` (ACT_*) into ``out``
    from ``out_pos``; per batch its position and size in ``out`` (size 0: dropped) and max
    timestamp. A REWRITE batch's CRC is left for the caller. Returns the end position in out."""
    for b in range(first_batch, end_batch):
        action = actions[b]
        pos, size = table[b, H_POS], table[b, H_SIZE]
        if action == ACT_DROP:
            out_size[b] = 0
            continue
        if action == ACT_KEEP:
            _copy(out, out_pos, data, pos, size)
            out_size[b] = size
            out_max_ts[b] = table[b, H_MAX_TS]
            out_pos += size
            continue
        start = out_pos
        _copy(out, out_pos, data, pos, HEADER_BYTES)
        out_pos += HEADER_BYTES
        count = 0
        max_ts = np.int64(-(2**63))
        for r in range(table[b, H_FIRST_RECORD], table[b, H_END_RECORD]):
            if keep[r]:
                length = ends[r] - starts[r]
                _copy(out, out_pos, data, starts[r], length)
                out_pos += length
                count += 1
                if timestamps[r] > max_ts:
                    max_ts = timestamps[r]
        if count == 0:
            max_ts = table[b, H_MAX_TS]
        _put_be(out, start + 8, out_pos - start - 12, 4)
        _put_be(out, start + 35, max_ts, 8)
        _put_be(out, start + 57, count, 4)
        out_size[b] = out_pos - start
        out_max_ts[b] = max_ts
    return out_pos
