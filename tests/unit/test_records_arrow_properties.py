"""Property tests: any rows, any codec, any cut, through our encoder/decoder, the reference and kafka-python."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_records_arrow_support import (
    arrow_rows,
    kafka_python_batch,
    kafka_python_rows,
    reference_rows,
    without_headers,
)

from broker.records import Compression, ControlRecord, ControlType, Record, encode_batch
from broker.records import encode_control_batch, iter_batches
from broker.records.arrow import HEADERS_TYPE, decode_batches, encode_batches

CODECS = st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4])
nullable_bytes = st.one_of(st.none(), st.just(b""), st.binary(max_size=200))
headers = st.lists(st.tuples(st.text(max_size=12), nullable_bytes), max_size=3).map(tuple)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def rows(draw, min_size=1, max_size=60):
    """(timestamp, key, value, headers) rows; timestamps wander both ways, as producers' clocks do."""
    n = draw(st.integers(min_size, max_size))
    base = draw(st.integers(0, 2**42))
    return [(base + draw(st.integers(-50_000, 50_000)), draw(nullable_bytes), draw(nullable_bytes),
             draw(headers)) for _ in range(n)]


def columns(group):
    return dict(
        values=pa.array([r[2] for r in group], pa.binary()),
        keys=pa.array([r[1] for r in group], pa.binary()),
        timestamps=pa.array([r[0] for r in group], pa.int64()),
        headers=pa.array([list(r[3]) for r in group], HEADERS_TYPE),
    )


def control(offset: int) -> bytes:
    return encode_control_batch(ControlRecord(ControlType.COMMIT, 0), offset=offset,
                                timestamp=0, producer_id=1, producer_epoch=0)


@st.composite
def log_runs(draw):
    """Groups of rows encoded by us (several batches each), control batches between some groups,
    and maybe a cut batch at the end: (bytes, expected rows, first offset)."""
    codec = draw(CODECS)
    batch_bytes_max = draw(st.sampled_from([120, 700, 4_000, 1 << 20]))
    offset = first = draw(st.integers(0, 2**40))
    data, expected = [], []
    for group in draw(st.lists(rows(max_size=30), min_size=1, max_size=4)):
        for batch in encode_batches(**columns(group), compression=codec, base_offset=offset,
                                    batch_bytes_max=batch_bytes_max):
            data.append(batch.data)
        expected += [(offset + i, ts, 0, key, value, hdrs)
                     for i, (ts, key, value, hdrs) in enumerate(group)]
        offset += len(group)
        if draw(st.booleans()):
            data.append(control(offset))
            offset += 1
    if draw(st.booleans()):  # a cut batch at the end, as Fetch returns one
        tail = encode_batches(**columns(draw(rows(max_size=5))), compression=codec,
                              base_offset=offset)[0].data
        data.append(tail[: draw(st.integers(1, len(tail) - 1))])
    return b"".join(data), expected, first


@SETTINGS
@given(log_runs(), st.data())
def test_decode_of_our_batches_matches_every_reader(run, data):
    buf, expected, first = run
    last = expected[-1][0] + 2
    start = data.draw(st.integers(first - 1, last), label="start_offset")
    end = data.draw(st.integers(start, last + 1), label="end_offset")
    include_headers = data.draw(st.booleans(), label="include_headers")
    decoded = decode_batches(buf, topic="t", partition=1, start_offset=max(start, 0),
                             end_offset=end, include_headers=include_headers)
    decoded.validate(full=True)
    want = [r for r in expected if start <= r[0] < end]
    assert arrow_rows(decoded) == (want if include_headers else without_headers(want))
    # The whole run, through kafka-python and the reference codec (the cut batch ignored).
    complete = buf[: _complete_prefix(buf)]
    assert kafka_python_rows(complete) == expected == reference_rows(complete)


def _complete_prefix(buf: bytes) -> int:
    end = 0
    for pos, header in iter_batches(buf):
        end = pos + header.size
    return end


@SETTINGS
@given(st.lists(rows(max_size=25), min_size=1, max_size=3), CODECS, st.booleans())
def test_kafka_python_batches_decode_like_kafka_python(groups, codec, transactional):
    parts, offset = [], 0
    for group in groups:
        parts.append(kafka_python_batch(group, codec, base_offset=offset,
                                        transactional=transactional, producer_id=3,
                                        producer_epoch=0, base_sequence=offset))
        offset += len(group)
        if transactional:
            parts.append(control(offset))
            offset += 1
    buf = b"".join(parts)
    theirs = kafka_python_rows(buf)
    assert arrow_rows(decode_batches(buf, topic="t", partition=0, include_headers=True)) == theirs
    assert theirs == reference_rows(buf)


@SETTINGS
@given(rows(max_size=40), st.lists(st.integers(1, 1_000), min_size=40, max_size=40), CODECS)
def test_offset_gaps_as_after_compaction(group, gaps, codec):
    """Offsets come from each record's offsetDelta, not its position in the batch."""
    offsets = [sum(gaps[:i]) for i in range(len(group))]
    records = [Record(o, ts, key, value, hdrs) for o, (ts, key, value, hdrs) in zip(offsets, group)]
    buf = encode_batch(records, compression=codec, base_offset=0)
    decoded = decode_batches(buf, topic="t", partition=0, include_headers=True,
                             start_offset=offsets[len(offsets) // 2])
    assert arrow_rows(decoded) == [r for r in reference_rows(buf) if r[0] >= offsets[len(offsets) // 2]]


@SETTINGS
@given(rows(max_size=60), st.integers(62, 3_000), CODECS)
def test_encode_respects_batch_bytes_max(group, batch_bytes_max, codec):
    batches = encode_batches(**columns(group), batch_bytes_max=batch_bytes_max, compression=codec)
    assert [b.first_row for b in batches] == [sum(b.record_count for b in batches[:i])
                                              for i in range(len(batches))]
    assert sum(b.record_count for b in batches) == len(group)
    uncompressed = encode_batches(**columns(group), batch_bytes_max=batch_bytes_max)
    assert [b.record_count for b in uncompressed] == [b.record_count for b in batches]
    for batch in uncompressed:
        assert len(batch.data) <= batch_bytes_max or batch.record_count == 1
