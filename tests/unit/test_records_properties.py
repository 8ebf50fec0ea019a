"""Property tests: any records round-trip through every codec, and kafka-python agrees."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from broker.records import Compression, Record, decode_batch, encode_batch
from broker.records.varint import decode_varint, encode_varint, size_of_varint

nullable_bytes = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=20), nullable_bytes), max_size=4).map(tuple)


@st.composite
def record_lists(draw):
    n = draw(st.integers(1, 40))
    base_offset = draw(st.integers(0, 2**40))
    base_ts = draw(st.integers(0, 2**41))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    out, offset = [], base_offset
    for i in range(n):
        out.append(Record(offset, base_ts + draw(st.integers(-10_000, 10_000)),
                          draw(nullable_bytes), draw(nullable_bytes), draw(headers)))
        offset += gaps[i]
    return out


@settings(max_examples=150, deadline=None)
@given(record_lists(), st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]))
def test_round_trip_and_kafka_python_agrees(records, codec):
    buf = encode_batch(records, compression=codec)
    assert decode_batch(buf).records == records
    theirs = DefaultRecordBatch(bytearray(buf))
    assert theirs.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in theirs]
    assert got == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


@given(st.integers(-(2**63), 2**63 - 1))
def test_varint_round_trip(value):
    out = bytearray()
    encode_varint(value, out)
    assert len(out) == size_of_varint(value)
    assert decode_varint(bytes(out), 0) == (value, len(out))
