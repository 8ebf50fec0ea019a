"""Keep some records of a batch by copying their bytes: the log cleaner's fast rewrite.

A record's bytes hold its offset and timestamp as deltas from the batch's base offset and base
timestamp. A rewritten batch that keeps both bases (``encode_retained_batch`` does, unless it
stamps a new delete horizon) can therefore take the kept records' bytes as they are, with no
decoding: find each record's span (``record_spans``, a compiled walk of the length prefixes,
every length checked against the bytes left), gather the kept spans with numpy, compress again
if the batch was compressed, and write the header (``encode_retained_batch``'s fields). Per
record only compiled and vectorized code runs; a Python decode and encode of each record cost
~40 us per record in the cleaner's profile.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from broker.records import header as hdr
from broker.records.compression import compress, decompress
from broker.records.errors import CorruptRecordError
from broker.records.header import DEFAULT_LIMITS, BatchHeader, BatchLimits

__all__ = ["record_spans", "retain_records"]

_BAD_SPANS = -1


@njit(cache=True, nogil=True)  # array work only: the broker's event loop runs meanwhile
def _spans(data, count, starts, ends):
    """Fill starts/ends of ``count`` records in ``data``; the number found (``_BAD_SPANS`` when a
    length prefix is malformed or runs past the end)."""
    pos = 0
    end = data.shape[0]
    for i in range(count):
        starts[i] = pos  # a record starts at its length prefix
        result = 0
        shift = 0
        limit = pos + 5
        while True:
            if pos >= end or pos >= limit:
                return _BAD_SPANS
            b = np.int64(data[pos])
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        length = ((result >> 1) & 0x7FFFFFFF) ^ -(result & 1)
        if length < 0 or length > end - pos:
            return _BAD_SPANS
        ends[i] = pos + length
        pos += length
    return count if pos == end else _BAD_SPANS


def record_spans(payload: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of each record's bytes, length prefix included, in an uncompressed
    records section; ``CorruptRecordError`` when the section does not hold exactly ``count``."""
    starts = np.empty(count, np.int64)
    ends = np.empty(count, np.int64)
    if _spans(payload, count, starts, ends) != count:
        raise CorruptRecordError(f"records section does not hold {count} well-formed records")
    return starts, ends


def retain_records(batch: bytes | memoryview, header: BatchHeader, keep: np.ndarray, max_timestamp: int,
                   limits: BatchLimits = DEFAULT_LIMITS) -> bytes:
    """The batch ``header`` describes (whole, in ``batch``) with only the records ``keep`` marks:
    same fields as ``encode_retained_batch`` without a new delete horizon (the base timestamp,
    and with it every record's bytes, stays as it was). ``max_timestamp`` is the kept records'."""
    raw = memoryview(batch)[hdr.HEADER_SIZE:header.size]
    codec = header.compression
    payload = decompress(codec, raw, limits.decompressed_bytes_max) if codec else raw
    data = np.frombuffer(payload, np.uint8)
    starts, ends = record_spans(data, header.records_count)
    lengths = (ends - starts)[keep]
    total = int(lengths.sum())
    first = np.cumsum(lengths) - lengths  # where each kept record goes in the output
    gather = np.arange(total, dtype=np.int64) + np.repeat(starts[keep] - first, lengths)
    kept = data[gather].tobytes()
    count = int(np.count_nonzero(keep))
    attributes, base_timestamp = header.attributes, header.base_timestamp
    if count == 0:  # as encode_retained_batch writes an empty batch
        attributes &= ~hdr.COMPRESSION_MASK
        kept, base_timestamp = b"", max_timestamp
    elif codec:
        kept = compress(codec, kept)
    buf = bytearray(hdr.HEADER_SIZE + len(kept))
    struct.pack_into(
        ">qiibIhiqqqhii", buf, 0,
        header.base_offset, len(buf) - hdr.LOG_OVERHEAD, header.partition_leader_epoch, hdr.MAGIC, 0,
        attributes, header.last_offset_delta, base_timestamp, max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, count,
    )  # fmt: skip
    buf[hdr.HEADER_SIZE:] = kept
    struct.pack_into(">I", buf, hdr.CRC_OFFSET, hdr.compute_crc(buf, 0, len(buf)))
    return bytes(buf)
