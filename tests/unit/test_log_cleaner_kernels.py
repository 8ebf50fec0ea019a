"""The cleaner's compiled chunk walk (``chunk_kernels`` through ``segment_cleaner.decode_chunk``):
it reads what the reference codec reads, and on bytes whose CRC matches but whose records are
malformed (a broken producer, a bug) it raises a typed ``RecordsError``, never reads or writes out
of bounds (numba does not check indexes: a mutation fuzzer runs it over such bytes)."""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.cleaner.chunk_kernels import H_ATTRIBUTES, H_COUNT, HEADER_COLUMNS, walk_headers
from broker.log.cleaner.key_hash import hash_keys
from broker.log.cleaner.segment_cleaner import decode_chunk
from broker.records import DEFAULT_LIMITS, Compression, Record, decode_batch, encode_batch
from broker.records.errors import RecordsError
from broker.records.header import ATTRIBUTES_OFFSET, CONTROL_MASK, CRC_OFFSET, HEADER_SIZE

KEYS = (1, 2, 3, 4)


def _batches(codec: int = Compression.NONE) -> bytes:
    out = b""
    offset = 0
    for n in (3, 1, 4):
        records = [Record(offset + j, 1_700_000_000_000 + j, None if j == 1 else b"key-%d" % (offset + j),
                          None if j == 2 else b"value-%d" % j) for j in range(n)]
        out += encode_batch(records, compression=codec, base_offset=offset)
        offset += n
    return out


def _decode(data: bytes):
    table = np.empty((len(data) // HEADER_SIZE + 1, HEADER_COLUMNS), np.int64)
    rows, end = walk_headers(np.frombuffer(data, np.uint8), 0, len(data), table)
    return decode_chunk(memoryview(data)[:end], table[:rows].copy(), KEYS, DEFAULT_LIMITS)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4, Compression.GZIP])
def test_the_walk_reads_what_the_reference_decoder_reads(codec):
    data = _batches(codec)
    chunk = _decode(data)
    expected, pos = [], 0
    while pos < len(data):
        batch = decode_batch(data, pos)
        expected.extend(batch.records)
        pos += batch.header.size
    records = chunk.records
    assert records.offsets.tolist() == [r.offset for r in expected]
    assert chunk.timestamps_ms.tolist() == [r.timestamp for r in expected]
    assert records.has_key.tolist() == [r.key is not None for r in expected]
    assert records.is_tombstone.tolist() == [r.value is None for r in expected]
    keys = [r.key or b"" for r in expected]
    offsets = np.zeros(len(keys) + 1, np.int64)
    offsets[1:] = np.cumsum([len(k) for k in keys])
    hi, lo = hash_keys(offsets, np.frombuffer(b"".join(keys), np.uint8), KEYS)
    assert np.array_equal(records.hi, hi) and np.array_equal(records.lo, lo)
    if codec == Compression.NONE:  # each record's span is its bytes, length prefix included
        first = HEADER_SIZE
        assert chunk.starts[0] == first and chunk.ends[2] == chunk.table[0, 1]


def _with_crc(data: bytearray, batch_pos: int, size: int) -> bytes:
    struct.pack_into(">I", data, batch_pos + CRC_OFFSET,
                     crc32c.crc32c(bytes(data[batch_pos + ATTRIBUTES_OFFSET:batch_pos + size])))
    return bytes(data)


def test_a_record_length_past_its_batch_is_a_corrupt_record_error():
    data = bytearray(encode_batch([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", b"w")]))
    data[HEADER_SIZE] = 0x7E  # the first record's length prefix: 63 bytes, more than the batch holds
    with pytest.raises(RecordsError, match="record length|offsetDelta|bytes|varint"):
        _decode(_with_crc(data, 0, len(data)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_malformed_records_with_a_valid_crc_raise_and_never_crash(data):
    batch = bytearray(encode_batch([Record(j, j, b"key-%d" % j, b"v" * j) for j in range(6)]))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(ATTRIBUTES_OFFSET, len(batch) - 1))  # all the CRC covers
        batch[position] = data.draw(st.integers(0, 255))
    mutated = _with_crc(batch, 0, len(batch))
    table = np.empty((2, HEADER_COLUMNS), np.int64)
    if walk_headers(np.frombuffer(mutated, np.uint8), 0, len(mutated), table)[0] == 0:
        return  # a header the walk refuses: SegmentFile.chunks raises OSError on it
    try:
        chunk = _decode(mutated)
    except RecordsError:
        return
    walked = 0 if chunk.table[0, H_ATTRIBUTES] & CONTROL_MASK else int(chunk.table[0, H_COUNT])
    assert len(chunk.records.offsets) == walked and np.all(chunk.ends <= len(mutated))
