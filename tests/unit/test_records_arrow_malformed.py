"""Malformed records inside batches whose CRC is right: typed errors, never a crash, as the reference.

The compiled record walk does no bounds checks of its own, so every case here is one where a
length from the data would otherwise send it past its buffer.
"""

from __future__ import annotations

import zlib

import lz4.frame
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_records_arrow_support import raw_batch, recrc

from broker.records import (
    BatchLimits,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatchTooLargeError,
    RecordsError,
    decode_batch,
    encode_batch,
)
from broker.records.arrow import decode_batches
from broker.records.compression import compress
from broker.records.header import HEADER_SIZE
from broker.records.varint import encode_varint


def varints(*values: int) -> bytes:
    out = bytearray()
    for v in values:
        encode_varint(v, out)
    return bytes(out)


def record(body: bytes) -> bytes:
    """A record: its length varint, then ``body`` (attributes onwards)."""
    return varints(len(body)) + body


GOOD_BODY = b"\x00" + varints(0, 0, 1) + b"k" + varints(1) + b"v" + varints(0)

# (id, records section, recordsCount, lastOffsetDelta, error)
CASES = [
    ("record length past the batch", varints(200) + GOOD_BODY, 1, 0, CorruptRecordError),
    ("negative record length", varints(-3) + GOOD_BODY, 1, 0, CorruptRecordError),
    ("record length 0", varints(0) + b"\x00" * 6, 1, 0, CorruptRecordError),
    ("varint of 6 bytes for an int32", record(b"\x00" + varints(0) + b"\x80" * 5 + b"\x00"
                                              + varints(-1, -1, 0)), 1, 0, CorruptRecordError),
    ("5-byte varint over int32", record(b"\x00" + varints(0) + b"\xff\xff\xff\xff\x7f"
                                        + varints(-1, -1, 0)), 1, 0, CorruptRecordError),
    ("offsetDelta past lastOffsetDelta", record(b"\x00" + varints(0, 5, -1, -1, 0)), 1, 0,
     CorruptRecordError),
    ("negative offsetDelta", record(b"\x00" + varints(0, -1, -1, -1, 0)), 1, 0, CorruptRecordError),
    ("key length -2", record(b"\x00" + varints(0, 0, -2, -1, 0)), 1, 0, CorruptRecordError),
    ("key past the record", record(b"\x00" + varints(0, 0, 50) + b"k" + varints(-1, 0)), 1, 0,
     CorruptRecordError),
    ("value past the record", record(b"\x00" + varints(0, 0, -1, 9) + b"vv" + varints(0)), 1, 0,
     CorruptRecordError),
    ("varint cut by the record end", record(b"\x00" + varints(0, 0, -1) + b"\x80"), 1, 0,
     CorruptRecordError),
    ("negative header count", record(b"\x00" + varints(0, 0, -1, -1, -1)), 1, 0, InvalidRecordError),
    ("header count over the limit", record(b"\x00" + varints(0, 0, -1, -1, 5000)), 1, 0,
     InvalidRecordError),
    ("null header key", record(b"\x00" + varints(0, 0, -1, -1, 1, -1, -1)), 1, 0, CorruptRecordError),
    ("header key past the record", record(b"\x00" + varints(0, 0, -1, -1, 1, 40) + b"ab"), 1, 0,
     CorruptRecordError),
    ("header value past the record", record(b"\x00" + varints(0, 0, -1, -1, 1, 1) + b"a"
                                            + varints(30) + b"x"), 1, 0, CorruptRecordError),
    ("header key not UTF-8", record(b"\x00" + varints(0, 0, -1, -1, 1, 2) + b"\xff\xfe"
                                    + varints(-1)), 1, 0, CorruptRecordError),
    ("bytes left inside a record", record(GOOD_BODY + b"\x00\x00"), 1, 0, CorruptRecordError),
    ("bytes left after the records", record(GOOD_BODY) + b"\x00" * 7, 1, 0, CorruptRecordError),
    ("fewer records than recordsCount", record(GOOD_BODY) * 2 + b"\x00" * 7, 3, 2,
     CorruptRecordError),
]


def both_raise(buf: bytes, error: type, **kwargs):
    kwargs.setdefault("include_headers", True)
    with pytest.raises(error):
        decode_batches(buf, topic="t", partition=0, **kwargs)
    with pytest.raises(error):
        decode_batch(buf, **{k: v for k, v in kwargs.items() if k in ("limits", "check_crc")})


@pytest.mark.parametrize("records, count, last_delta, error", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4])
def test_malformed_records_raise_typed_errors(records, count, last_delta, error, codec):
    assert decode_batches(raw_batch(record(GOOD_BODY), 1), topic="t", partition=0).num_rows == 1
    section = records if codec == Compression.NONE else compress(codec, records)
    buf = raw_batch(section, count, last_offset_delta=last_delta, codec=codec)
    both_raise(buf, error)


def test_the_error_says_where():
    buf = raw_batch(record(GOOD_BODY) + varints(200) + GOOD_BODY, 2, codec=0, base_offset=77)
    with pytest.raises(CorruptRecordError, match=r"record length 200 .*base offset 77, byte \d+"):
        decode_batches(buf, topic="t", partition=0)


def test_header_count_limit_follows_batch_limits():
    body = b"\x00" + varints(0, 0, -1, -1, 3) + (varints(1) + b"h" + varints(-1)) * 3
    buf = raw_batch(record(body), 1)
    assert decode_batches(buf, topic="t", partition=0, include_headers=True).num_rows == 1
    both_raise(buf, InvalidRecordError, limits=BatchLimits(headers_per_record_max=2))


@pytest.mark.parametrize("key", [
    "a", "é", "€", "𐀀", "\uffff", "\U0010ffff", "\ud7ff", "\ue000",
    b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
    b"\xc3", b"\xe2\x82", b"\x80", b"\xc3\x28", b"a\xf0\x9f\x98", b"\xef\xbf\xbf\xff",
])
@pytest.mark.parametrize("include_headers", [False, True])
def test_header_keys_must_be_utf8_like_pythons_decoder(key, include_headers):
    raw = key.encode("utf-8") if isinstance(key, str) else key
    body = b"\x00" + varints(0, 0, -1, -1, 1, len(raw)) + raw + varints(-1)
    buf = raw_batch(record(body), 1)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        both_raise(buf, CorruptRecordError, include_headers=include_headers)
        return
    batch = decode_batches(buf, topic="t", partition=0, include_headers=include_headers)
    if include_headers:
        assert batch.column("headers").to_pylist() == [[{"key": key, "value": None}]]


def test_bad_crc_and_magic():
    good = encode_batch([Record(0, 0, b"k", b"v")])
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    both_raise(bytes(flipped), CorruptRecordError)
    # With check_crc=False the garbled byte (the headers count) is caught by the record walk.
    flipped[-1] = 0x7F  # headersCount -64
    both_raise(bytes(flipped), RecordsError, check_crc=False)
    magic = bytearray(good)
    magic[16] = 1
    both_raise(recrc(magic), CorruptRecordError)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4])
def test_decompression_bomb_is_capped(codec):
    records = record(b"\x00" + varints(0, 0, -1, 80 << 20) + bytes(80 << 20) + varints(0))
    bomb = raw_batch(compress(codec, records), 1, codec=codec)
    assert len(bomb) < 1 << 20
    both_raise(bomb, RecordBatchTooLargeError)  # default cap: 64 MiB
    small = BatchLimits(decompressed_bytes_max=1_000)
    both_raise(raw_batch(compress(codec, record(GOOD_BODY) * 200), 200, codec=codec),
               RecordBatchTooLargeError, limits=small)


def test_lz4_first_guess_then_the_real_cap():
    """A batch that expands past the first lz4 guess (8x) but within the cap still decodes."""
    value = bytes(3 << 20)
    records = record(b"\x00" + varints(0, 0, -1, len(value)) + value + varints(0))
    buf = raw_batch(compress(Compression.LZ4, records), 1, codec=Compression.LZ4)
    assert len(records) > 8 * len(buf)
    decoded = decode_batches(buf, topic="t", partition=0)
    assert decoded.column("value")[0].as_py() == value


@pytest.mark.parametrize("codec, garbage", [
    (Compression.GZIP, b"\x1f\x8b" + b"\x00" * 30),
    (Compression.LZ4, lz4.frame.compress(b"x" * 100)[:-6]),
    (Compression.LZ4, b"\x04\x22\x4d\x18" + b"\xff" * 30),
    (Compression.GZIP, zlib.compress(b"x")[:-2]),
])
def test_garbled_compressed_data(codec, garbage):
    both_raise(raw_batch(garbage, 1, codec=codec), CorruptRecordError)


def test_compressed_count_over_what_the_bytes_hold():
    buf = raw_batch(compress(Compression.GZIP, record(GOOD_BODY)), 1_000, codec=Compression.GZIP)
    both_raise(buf, CorruptRecordError)


# ------------------------------------------------------------------------------------ fuzzing


def _rows_or_error(fn):
    try:
        return fn()
    except RecordsError as exc:
        return type(exc)


def _wrap64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def ours(buf: bytes, check_crc: bool):
    batch = decode_batches(buf, topic="t", partition=0, include_headers=True, check_crc=check_crc)
    micros = batch.column("timestamp").cast("int64").to_pylist()
    return [(o, us, k, v, tuple((h["key"], h["value"]) for h in hs)) for o, us, k, v, hs in zip(
        batch.column("offset").to_pylist(), micros, batch.column("key").to_pylist(),
        batch.column("value").to_pylist(), batch.column("headers").to_pylist())]


def reference(buf: bytes, check_crc: bool):
    records = decode_batch(buf, check_crc=check_crc).records
    return [(r.offset, _wrap64(r.timestamp * 1000), r.key, r.value, r.headers) for r in records]


records_strategy = st.lists(st.builds(
    Record, st.integers(0, 0), st.integers(0, 2**40), st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
             max_size=2).map(tuple)), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_strategy, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                  min_size=1, max_size=4),
       st.one_of(st.just(0), st.integers(0, 40)), st.sampled_from([Compression.NONE, Compression.GZIP]), st.booleans())
def test_garbled_records_agree_with_the_reference(records, edits, trim, codec, recompute_crc):
    """Change bytes of a records section (and maybe cut it): we and the reference give the same
    rows or raise the same error class; nothing else ever escapes."""
    records = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)]
    good = encode_batch(records)
    section = bytearray(good[HEADER_SIZE:])
    for pos, byte in edits:
        section[pos % len(section)] = byte
    del section[len(section) - min(trim, len(section) - 1):]
    body = bytes(section) if codec == Compression.NONE else compress(codec, bytes(section))
    buf = raw_batch(body, len(records), codec=codec, base_timestamp=records[0].timestamp)
    if not recompute_crc:
        buf = buf[:17] + good[17:21] + buf[21:]  # the old CRC: check_crc=False must still be safe
    check = recompute_crc
    got = _rows_or_error(lambda: ours(buf, check))
    want = _rows_or_error(lambda: reference(buf, check))
    assert got == want


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.integers(0, 40), st.integers(0, 3))
def test_random_record_sections(section, count, last_extra):
    buf = raw_batch(section, count, last_offset_delta=max(count - 1, 0) + last_extra)
    got = _rows_or_error(lambda: ours(buf, True))
    assert got == _rows_or_error(lambda: reference(buf, True))


def test_encoded_arrays_never_alias_the_input():
    """Decoded columns own their bytes: changing the input buffer afterwards changes nothing."""
    buf = bytearray(encode_batch([Record(0, 0, b"key", b"value")]))
    batch = decode_batches(buf, topic="t", partition=0)
    buf[HEADER_SIZE:] = bytes(len(buf) - HEADER_SIZE)
    assert batch.column("value").to_pylist() == [b"value"]
    assert np.asarray(batch.column("offset")).tolist() == [0]
