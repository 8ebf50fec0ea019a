"""The Arrow record codec agrees with kafka-python and with broker.records' reference codec."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from kafka.record.default_records import DefaultRecordBatch
from test_records_arrow_support import (
    SAMPLE,
    arrow_rows,
    kafka_python_batch,
    kafka_python_rows,
    reference_rows,
    set_attributes,
    without_headers,
)

from broker.records import (
    Compression,
    ControlRecord,
    ControlType,
    Record,
    UnsupportedCompressionError,
    decode_batch,
    encode_batch,
    encode_control_batch,
    iter_batches,
    read_header,
)
from broker.records import _arrow_kernels as kernels
from broker.records._arrow_columns import pool_array, trimmed
from broker.records.arrow import (
    HEADERS_TYPE,
    SPARK_KAFKA_SCHEMA,
    SPARK_KAFKA_SCHEMA_WITH_HEADERS,
    EncodedBatch,
    decode_batches,
    encode_batches,
)

CODECS = [
    pytest.param(Compression.NONE, id="none"),
    pytest.param(Compression.GZIP, id="gzip"),
    pytest.param(Compression.LZ4, id="lz4"),
]
TS = 1_700_000_000_000


def sample_columns(rows=SAMPLE):
    return dict(
        values=pa.array([r[2] for r in rows], pa.binary()),
        keys=pa.array([r[1] for r in rows], pa.binary()),
        timestamps=pa.array([r[0] for r in rows], pa.int64()),
        headers=pa.array([list(r[3]) for r in rows], HEADERS_TYPE),
    )


def expected(rows=SAMPLE, base_offset=0, timestamp_type=0):
    return [(base_offset + i, ts, timestamp_type, key, value, headers)
            for i, (ts, key, value, headers) in enumerate(rows)]


def control(offset: int, kind: int = ControlType.COMMIT, producer_id: int = 99) -> bytes:
    return encode_control_batch(ControlRecord(kind, 5), offset=offset, timestamp=TS,
                                producer_id=producer_id, producer_epoch=3)


# ------------------------------------------------------------------------------------- schema


def test_schema_is_sparks_kafka_source_schema():
    expected_fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ]
    assert [(f.name, f.type) for f in SPARK_KAFKA_SCHEMA] == expected_fields
    assert all(f.nullable for f in SPARK_KAFKA_SCHEMA)  # Spark's StructType.add: nullable
    with_headers = SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert with_headers.names == SPARK_KAFKA_SCHEMA.names + ["headers"]
    headers = with_headers.field("headers").type
    assert pa.types.is_list(headers)
    entry = headers.value_type
    assert [(f.name, f.type, f.nullable) for f in entry] == [
        ("key", pa.string(), True), ("value", pa.binary(), True)]


@pytest.mark.parametrize("include_headers", [False, True])
def test_output_has_the_schema_and_valid_arrays(include_headers):
    data = b"".join(b.data for b in encode_batches(**sample_columns(), compression=0))
    batch = decode_batches(data, topic="orders", partition=7, include_headers=include_headers)
    assert batch.schema == (SPARK_KAFKA_SCHEMA_WITH_HEADERS if include_headers else SPARK_KAFKA_SCHEMA)
    batch.validate(full=True)
    assert batch.column("topic").to_pylist() == ["orders"] * len(SAMPLE)
    assert batch.column("partition").to_pylist() == [7] * len(SAMPLE)


def test_empty_input_gives_an_empty_batch():
    for data in (b"", b"\x00" * 11):  # nothing, and a cut length prefix
        batch = decode_batches(data, topic="t", partition=0, include_headers=True)
        assert batch.num_rows == 0 and batch.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert encode_batches(pa.array([], pa.binary()), now_ms=TS) == []


# ------------------------------------------------------------------ kafka-python builds, we read


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_kafka_python_batches_decode_to_the_rows_kafka_python_reads(codec, transactional):
    producer = dict(transactional=transactional, producer_id=99, producer_epoch=3, base_sequence=0)
    first = kafka_python_batch(SAMPLE, codec, base_offset=100, **producer)
    assert read_header(first).compression == codec, "kafka-python sent it uncompressed"
    parts = [first]
    if transactional:
        parts.append(control(106))
    parts.append(kafka_python_batch(SAMPLE[::-1], codec, base_offset=107, **producer))
    if transactional:
        parts.append(control(113, ControlType.ABORT))
    data = b"".join(parts)
    theirs = kafka_python_rows(data)
    assert len(theirs) == 2 * len(SAMPLE)
    with_headers = decode_batches(data, topic="t", partition=0, include_headers=True)
    assert arrow_rows(with_headers) == theirs == reference_rows(data)
    plain = decode_batches(data, topic="t", partition=0)
    assert arrow_rows(plain) == without_headers(theirs)


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_batches_take_the_max_timestamp(codec):
    batch = kafka_python_batch(SAMPLE, codec, base_offset=5)
    header = read_header(batch)
    log_append = set_attributes(batch, header.attributes | 0x08)
    theirs = kafka_python_rows(log_append)
    assert {row[1] for row in theirs} == {header.max_timestamp}
    assert {row[2] for row in theirs} == {1}
    decoded = decode_batches(log_append, topic="t", partition=0, include_headers=True)
    assert arrow_rows(decoded) == theirs == reference_rows(log_append)


# ------------------------------------------------------------------ we build, kafka-python reads


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_in_kafka_python(codec):
    batches = encode_batches(**sample_columns(), compression=codec, base_offset=40,
                             producer_id=7, producer_epoch=2, base_sequence=11)
    assert [(b.record_count, b.first_row) for b in batches] == [(len(SAMPLE), 0)]
    data = batches[0].data
    assert kafka_python_rows(data) == expected(base_offset=40) == reference_rows(data)
    theirs = DefaultRecordBatch(bytearray(data))
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (7, 2, 11)
    assert (theirs.base_offset, theirs.last_offset_delta) == (40, len(SAMPLE) - 1)
    assert theirs.first_timestamp == SAMPLE[0][0]
    assert theirs.max_timestamp == max(r[0] for r in SAMPLE)
    assert not theirs.is_transactional


def test_uncompressed_bytes_identical_to_the_reference_encoder():
    """With no compression there is one right encoding; both our encoders must produce it."""
    ours = encode_batches(**sample_columns(), base_offset=3, producer_id=5, producer_epoch=1,
                          base_sequence=9, transactional=True)
    records = [Record(3 + i, ts, key, value, headers)
               for i, (ts, key, value, headers) in enumerate(SAMPLE)]
    reference = encode_batch(records, producer_id=5, producer_epoch=1, base_sequence=9,
                             transactional=True)
    assert [b.data for b in ours] == [reference]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_through_our_decoder(codec):
    batches = encode_batches(**sample_columns(), compression=codec, base_offset=1000)
    data = b"".join(b.data for b in batches)
    decoded = decode_batches(data, topic="t", partition=0, include_headers=True)
    assert arrow_rows(decoded) == expected(base_offset=1000)


def test_runs_of_mixed_codecs_and_sizes_decode_in_order():
    """Small decompressed batches share a kernel call (joined), large ones and uncompressed runs
    have their own: every mix must come out in log order, with offset ranges cutting anywhere."""
    big_value = b"v" * 300_000  # decompresses past the joining limit
    plan = [(Compression.LZ4, SAMPLE), (Compression.LZ4, SAMPLE), (Compression.NONE, SAMPLE),
            (Compression.GZIP, SAMPLE), (Compression.LZ4, [(TS, b"big", big_value, ())]),
            (Compression.LZ4, SAMPLE), (Compression.NONE, SAMPLE), (Compression.GZIP, SAMPLE)]
    data, everything, offset = b"", [], 0
    for codec, rows in plan:
        data += b"".join(b.data for b in encode_batches(**sample_columns(rows), compression=codec,
                                                         base_offset=offset, batch_bytes_max=1 << 20))
        everything += expected(rows, base_offset=offset)
        offset += len(rows)
    for start, end in [(0, offset), (3, offset - 2), (len(SAMPLE) * 4, len(SAMPLE) * 4 + 1), (7, 30)]:
        decoded = decode_batches(data, topic="t", partition=0, start_offset=start, end_offset=end,
                                 include_headers=True)
        assert arrow_rows(decoded) == [r for r in everything if start <= r[0] < end], (start, end)


# ------------------------------------------------------------------------- decode_batches options


def test_offset_range_cuts_inside_batches():
    data = b"".join(b.data for b in encode_batches(**sample_columns(), base_offset=10))
    data += b"".join(b.data for b in encode_batches(**sample_columns(), base_offset=16))
    everything = expected(base_offset=10) + expected(base_offset=16)
    for start, end in [(12, 14), (10, 22), (0, 100), (15, 17), (13, 13), (21, 22), (22, 99)]:
        decoded = decode_batches(data, topic="t", partition=0, start_offset=start,
                                 end_offset=end, include_headers=True)
        assert arrow_rows(decoded) == [r for r in everything if start <= r[0] < end], (start, end)


def test_a_cut_batch_at_the_end_is_ignored():
    whole = b"".join(b.data for b in encode_batches(**sample_columns(), base_offset=0))
    second = encode_batches(**sample_columns(), base_offset=len(SAMPLE))[0].data
    for cut in (1, 11, 12, 60, 61, len(second) - 1):
        decoded = decode_batches(whole + second[:cut], topic="t", partition=0)
        assert arrow_rows(decoded) == without_headers(expected())


def test_control_batches_are_skipped_and_the_filter_sees_every_batch():
    """A read_committed style filter: drop producer 99's batches before its ABORT marker."""
    ours = encode_batches(**sample_columns(), base_offset=0, producer_id=99, producer_epoch=3,
                          base_sequence=0, transactional=True)[0].data
    other = encode_batches(**sample_columns(), base_offset=7, producer_id=42, producer_epoch=0,
                           base_sequence=0, transactional=True)[0].data
    data = ours + control(6, ControlType.ABORT) + other + control(13, ControlType.COMMIT, 42)
    seen = []

    def not_aborted(header):
        seen.append((header.base_offset, header.is_control))
        return header.producer_id != 99

    decoded = decode_batches(data, topic="t", partition=0, batch_filter=not_aborted)
    assert seen == [(0, False), (6, True), (7, False), (13, True)]
    assert arrow_rows(decoded) == without_headers(expected(base_offset=7))
    unfiltered = decode_batches(data, topic="t", partition=0)
    assert unfiltered.num_rows == 2 * len(SAMPLE)  # the markers are never rows


def test_decodes_bytearray_and_memoryview():
    data = encode_batches(**sample_columns())[0].data
    for view in (bytearray(data), memoryview(data), memoryview(b"xx" + data)[2:]):
        assert arrow_rows(decode_batches(view, topic="t", partition=0)) == without_headers(expected())


# ------------------------------------------------------------------------- encode_batches options


def test_batches_split_by_bytes_and_sequences_continue():
    n = 100
    values = pa.array([b"v" * (i % 37) for i in range(n)], pa.binary())
    batches = encode_batches(values, timestamps=np.arange(n) + TS, batch_bytes_max=400,
                             base_offset=1_000, producer_id=5, producer_epoch=0,
                             base_sequence=2**31 - 40)
    assert len(batches) > 5
    assert sum(b.record_count for b in batches) == n
    assert [b.first_row for b in batches] == list(np.cumsum([0] + [b.record_count for b in batches[:-1]]))
    for b in batches:
        header = read_header(b.data)
        assert len(b.data) <= 400
        assert header.base_offset == 1_000 + b.first_row
        assert header.base_sequence == (2**31 - 40 + b.first_row) % 2**31  # wraps like Kafka
        assert header.records_count == b.record_count == header.last_offset_delta + 1
    # Greedy: the next row would not have fit in the batch before it.
    for b, following in zip(batches, batches[1:]):
        row = following.first_row
        alone = encode_batches(values[b.first_row : row + 1], timestamps=np.arange(n)[b.first_row : row + 1] + TS)
        assert len(alone[0].data) > 400
    data = b"".join(b.data for b in batches)
    assert [r[4] for r in kafka_python_rows(data)] == values.to_pylist()


def test_an_oversize_row_makes_a_batch_of_one():
    values = pa.array([b"a" * 10, b"b" * 5000, b"c" * 10, b"d" * 10], pa.binary())
    batches = encode_batches(values, batch_bytes_max=1000, now_ms=TS)
    assert [(b.first_row, b.record_count) for b in batches] == [(0, 1), (1, 1), (2, 2)]
    assert [r[4] for r in reference_rows(b"".join(b.data for b in batches))] == values.to_pylist()


def test_transactional_attribute_and_no_producer_defaults():
    plain = read_header(encode_batches(pa.array([b"x"]), now_ms=TS)[0].data)
    assert (plain.producer_id, plain.producer_epoch, plain.base_sequence) == (-1, -1, -1)
    assert not plain.is_transactional and plain.timestamp_type == 0
    assert plain.partition_leader_epoch == -1
    txn = read_header(encode_batches(pa.array([b"x"]), now_ms=TS, producer_id=1, producer_epoch=0,
                                     base_sequence=0, transactional=True)[0].data)
    assert txn.is_transactional and not txn.is_control


@pytest.mark.parametrize("values", [
    pytest.param(pa.array(["a", None, "", "é"]), id="string"),
    pytest.param(pa.array(["a", None, "", "é"], pa.large_string()), id="large_string"),
    pytest.param(pa.array([b"a", None, b"", "é".encode()], pa.large_binary()), id="large_binary"),
    pytest.param(pa.array([b"a", None, b"", "é".encode()], pa.binary_view()), id="binary_view"),
    pytest.param(pa.chunked_array([[b"a", None], [b"", "é".encode()]]), id="chunked"),
    pytest.param([b"a", None, b"", "é".encode()], id="python_list"),
    pytest.param(np.array([b"a", None, b"", "é".encode()], dtype=object), id="numpy_object"),
    pytest.param(pa.array([b"zz", b"a", None, b"", "é".encode(), b"zz"]).slice(1, 4), id="sliced"),
])
def test_value_and_key_column_kinds(values):
    batches = encode_batches(values, keys=values, now_ms=TS)
    rows = kafka_python_rows(batches[0].data)
    expect = [b"a", None, b"", "é".encode()]
    assert [r[4] for r in rows] == expect and [r[3] for r in rows] == expect
    assert {r[1] for r in rows} == {TS}


@pytest.mark.parametrize("timestamps, expect", [
    (pa.array([1, 2, -5], pa.timestamp("ms")), [1, 2, -5]),
    (pa.array([1_500, 2_999, -1], pa.timestamp("us", tz="UTC")), [1, 2, -1]),  # floored
    (pa.array([3_000_000, 4_000_001], pa.timestamp("ns")) , [3, 4]),
    (pa.array([1, 2], pa.timestamp("s")), [1_000, 2_000]),
    (np.array([10, 20], np.int64), [10, 20]),
    (np.array(["1970-01-01T00:00:01.5", "2023-11-14T22:13:20"], "datetime64[us]"),
     [1_500, 1_700_000_000_000]),
    (pa.array([7, None], pa.int64()), [7, TS]),  # null: the producer's clock
    (pa.array([None, 8], pa.timestamp("us")), [TS, 0]),
    (None, None),
])
def test_timestamp_inputs(timestamps, expect):
    n = 3 if expect is None else len(expect)
    batches = encode_batches(pa.array([b"v"] * n), timestamps=timestamps, now_ms=TS)
    got = [r[1] for r in kafka_python_rows(batches[0].data)]
    assert got == ([TS] * n if expect is None else expect)


def test_timestamps_need_a_clock_when_missing():
    with pytest.raises(ValueError, match="now_ms"):
        encode_batches(pa.array([b"v"]))
    with pytest.raises(ValueError, match="now_ms"):
        encode_batches(pa.array([b"v"]), timestamps=pa.array([None], pa.int64()))


def test_header_inputs():
    python_lists = [[("a", b"1"), ("b", None)], None, [], [("c", b"")]]
    arrow = pa.array([[], [("z", b"z")]] + python_lists, HEADERS_TYPE).slice(2)
    binary_keys = pa.array(python_lists, pa.list_(pa.struct([("key", pa.binary()),
                                                              ("value", pa.binary())])))
    expect = [(("a", b"1"), ("b", None)), (), (), (("c", b""),)]
    for headers in (python_lists, arrow, binary_keys):
        batches = encode_batches(pa.array([b"v"] * 4), headers=headers, now_ms=TS)
        assert [r[5] for r in kafka_python_rows(batches[0].data)] == expect


def test_bad_encoder_input_is_refused():
    with pytest.raises(ValueError, match="header keys must not be null"):
        encode_batches(pa.array([b"v"]), headers=[[(None, b"x")]], now_ms=TS)
    with pytest.raises(ValueError, match="rows"):
        encode_batches(pa.array([b"v"]), keys=pa.array([b"a", b"b"]), now_ms=TS)
    with pytest.raises(TypeError, match="binary or string"):
        encode_batches(pa.array([1, 2]), now_ms=TS)
    with pytest.raises(UnsupportedCompressionError):
        encode_batches(pa.array([b"v"]), compression=Compression.ZSTD, now_ms=TS)
    with pytest.raises(ValueError, match="batch_bytes_max"):
        encode_batches(pa.array([b"v"]), batch_bytes_max=61, now_ms=TS)


def test_invalid_arrow_offsets_are_refused_not_read():
    """Offsets going backwards pass pyarrow's cheap validation; they must not reach the copies."""
    data = pa.py_buffer(b"abc")
    backwards = pa.Array.from_buffers(pa.binary(), 2, [None, pa.py_buffer(
        np.array([0, 3, 1], np.int32).tobytes()), data])
    with pytest.raises(ValueError, match="outside their data"):
        encode_batches(pa.array([b"x", b"y"]), keys=backwards, now_ms=TS)
    with pytest.raises(ValueError, match="outside their data"):
        encode_batches(backwards, now_ms=TS)


def test_encoded_batch_shape():
    (batch,) = encode_batches(pa.array([b"x", b"y"]), now_ms=TS)
    assert isinstance(batch, EncodedBatch) and isinstance(batch.data, bytes)
    assert batch == (batch.data, 2, 0)
    assert [pos for pos, _ in iter_batches(batch.data)] == [0]


def test_kernels_never_compile_at_call_time():
    """Eager signatures only: a call with other argument types fails instead of compiling."""
    for kernel in (kernels.decode_records, kernels.plan_batches, kernels.write_records):
        assert len(kernel.signatures) == 1 and not kernel._can_compile


def test_mostly_unused_output_buffers_are_not_pinned():
    """The decoder sizes outputs for the worst case; a small result is copied out of them."""
    big = pool_array(1000, np.uint8)
    big[:] = 7
    small, most = trimmed(big[:10]), trimmed(big[:900])
    assert small.address != big.ctypes.data and small.to_pybytes() == b"\x07" * 10
    assert most.address == big.ctypes.data and most.size == 900


def test_nothing_kept_gives_valid_empty_columns():
    data = encode_batches(**sample_columns(), base_offset=10)[0].data
    for kwargs in (dict(start_offset=100), dict(end_offset=10), dict(batch_filter=lambda h: False)):
        batch = decode_batches(data, topic="t", partition=0, include_headers=True, **kwargs)
        batch.validate(full=True)
        assert batch.num_rows == 0
        assert [np.frombuffer(batch.column(c).buffers()[1], np.int32)[0]
                for c in ("key", "value", "headers")] == [0, 0, 0]


@pytest.mark.parametrize("codec", CODECS)
def test_producer_batches_all_start_at_base_offset_zero(codec):
    """A producer's batches each start at 0 (Kafka's leader refuses any other client baseOffset);
    their sequences still continue from batch to batch."""
    rows = SAMPLE * 40
    batches = encode_batches(**sample_columns(rows), compression=codec, batch_bytes_max=400,
                             producer_id=7, producer_epoch=0, base_sequence=10, continue_offsets=False)
    assert len(batches) > 2
    for batch in batches:
        decoded = decode_batch(batch.data)  # CRC and every length checked
        assert decoded.header.base_offset == 0
        assert decoded.header.base_sequence == 10 + batch.first_row
        assert [r.offset for r in decoded.records] == list(range(batch.record_count))
