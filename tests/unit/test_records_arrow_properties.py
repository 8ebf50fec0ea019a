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
from broker.records.header import set_partition_leader_epoch
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


@SETTINGS
@given(rows(max_size=60), st.sampled_from([62 + 30, 700, 4_000, 1 << 20]), CODECS,
       st.integers(0, 2**40), st.integers(-1, 2**40), st.integers(-1, 2**15 - 1),
       st.one_of(st.just(-1), st.integers(0, 2**31 - 1)), st.booleans())
def test_every_header_field_as_kafka_python_writes_it(group, batch_bytes_max, codec, base_offset,
                                                      producer_id, producer_epoch, base_sequence,
                                                      transactional):
    """The encode kernel writes the batch header: each field, sequence wrap included, must be
    kafka-python's; uncompressed batches byte for byte, and copy=False views the same bytes."""
    fields = dict(base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                  base_sequence=base_sequence, transactional=transactional,
                  batch_bytes_max=batch_bytes_max, compression=codec)
    batches = encode_batches(**columns(group), **fields)
    views = encode_batches(**columns(group), **fields, copy=False)
    assert [bytes(v.data) for v in views] == [b.data for b in batches]
    for batch, view in zip(batches, views):
        assert isinstance(batch.data, bytes)
        assert isinstance(view.data, memoryview if codec == Compression.NONE else bytes)
        first, stop = batch.first_row, batch.first_row + batch.record_count
        sequence = -1 if base_sequence < 0 else (base_sequence + first) % 2**31
        peer = bytearray(kafka_python_batch(
            group[first:stop], codec, base_offset=base_offset + first, transactional=transactional,
            producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=sequence))
        # kafka-python leaves partitionLeaderEpoch 0; producers send -1 (Java's
        # NO_PARTITION_LEADER_EPOCH) and the leader stamps it. It lies outside the CRC.
        set_partition_leader_epoch(peer, 0, -1)
        peer = bytes(peer)
        if codec == Compression.NONE:
            assert batch.data == peer
            assert view.data.readonly
        # kafka-python sends a batch uncompressed when compressing does not shrink it: codec
        # bits, length and CRC may differ then; every other field may not.
        ours_header, peer_header = (next(iter_batches(data))[1]._replace(batch_length=0, crc=0)
                                    for data in (batch.data, peer))
        assert ours_header.attributes & 7 == codec
        assert ours_header._replace(attributes=ours_header.attributes & ~7) == \
            peer_header._replace(attributes=peer_header.attributes & ~7)
        assert kafka_python_rows(batch.data) == kafka_python_rows(peer)
