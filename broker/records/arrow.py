"""Vectorized RecordBatch v2 <-> Arrow codec: the client's and the Spark connector's fast path.

``decode_batches`` turns a run of whole v2 batches (a Fetch response's records, or ``Log.read``)
into one ``pa.RecordBatch`` in Spark's Kafka source schema; ``encode_batches`` turns Arrow columns
into ready-to-produce batches. Per batch, Python does what ``broker.records.header`` and
``compression`` already do (validate the header and CRC, decompress with the cap, compress,
stamp the header); per record, only the compiled loops of ``_arrow_kernels`` run. They check
every length like the reference codec (``broker.records.batch``) and agree with it record for
record; tests/unit/test_records_arrow*.py hold the two (and kafka-python) to that.

Bounds: each batch is validated against ``BatchLimits`` (batch size, records per batch,
decompressed size, headers per record) before anything is allocated for its records, and one call
decodes at most 2 GiB of record bytes (Arrow's int32 offsets); past that it raises
``RecordBatchTooLargeError`` and the caller decodes fewer batches at a time.
"""

from __future__ import annotations

import functools
import struct
from typing import Callable, NamedTuple

import crc32c
import numpy as np
import pyarrow as pa

from broker.records import _arrow_kernels as kernels
from broker.records._arrow_columns import (
    HEADERS_TYPE,
    binary_array,
    binary_parts,
    header_parts,
    no_headers,
    null_parts,
    pool_array,
    readonly,
    timestamps_ms,
    trimmed,
)
from broker.records.compression import Compression, check_supported, compress, decompress
from broker.records._keyless_kernel import keyless_records
from broker.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KeylessRecordError,
    RecordBatchTooLargeError,
)
from broker.records.header import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    DEFAULT_LIMITS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    BatchHeader,
    BatchLimits,
    batch_size_at,
    validate_batch,
)

__all__ = [
    "SPARK_KAFKA_SCHEMA",
    "SPARK_KAFKA_SCHEMA_WITH_HEADERS",
    "HEADERS_TYPE",
    "EncodedBatch",
    "decode_batches",
    "encode_batches",
    "check_batches",
]

# Spark's Kafka source schema (KafkaRecordToRowConverter): every field nullable, timestamps in
# microseconds as Spark's TimestampType travels in Arrow.
SPARK_KAFKA_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
])
SPARK_KAFKA_SCHEMA_WITH_HEADERS = SPARK_KAFKA_SCHEMA.append(pa.field("headers", HEADERS_TYPE))

_INT32_MAX = 2**31 - 1
_MIN_RECORD_BYTES = 7  # six one-byte varints and the attributes byte
_MIN_HEADER_BYTES = 2  # key length and value length varints
_LZ4_GUESS_RATIO = 8
_LZ4_GUESS_MIN_BYTES = 1 << 20
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
assert kernels.HEADER_BYTES == HEADER_SIZE
_EMPTY_I32 = np.empty(0, np.int32)
_EMPTY_U8 = np.empty(0, np.uint8)


class EncodedBatch(NamedTuple):
    data: bytes | memoryview  # one whole v2 batch, CRC set (bytes unless copy=False)
    record_count: int
    first_row: int  # index of its first row in the encoder's input


# --------------------------------------------------------------------------------------- decode


class _Plan(NamedTuple):
    """The batches to decode, in order, as kernel calls: (records buffer, its batch table)."""

    segments: list[tuple[np.ndarray, np.ndarray]]  # table: int64 [batches, BATCH_COLUMNS]
    rows_max: int  # sum of recordsCount: no more rows than this can come out
    payload_bytes: int  # sum of record-section sizes: no more key (value, ...) bytes than this


def decode_batches(
    data,
    *,
    topic: str,
    partition: int,
    start_offset: int = 0,
    end_offset: int = 2**63 - 1,
    include_headers: bool = False,
    batch_filter: Callable[[BatchHeader], bool] | None = None,
    limits: BatchLimits = DEFAULT_LIMITS,
    check_crc: bool = True,
) -> pa.RecordBatch:
    """Decode a run of whole v2 batches into Spark's Kafka source schema (see the module doc).

    A cut batch at the end is ignored, as consumers do. Control batches are skipped. ``batch_filter``
    is called once per complete batch, in order, control batches included (so a read_committed
    filter sees the ABORT markers it must track); a non-control batch it answers False for is
    dropped. Rows with start_offset <= offset < end_offset are kept; batches wholly outside that
    range are validated but not decompressed. Raises a ``RecordsError`` subclass on bad bytes.
    """
    plan = _plan_decode(data, start_offset, end_offset, batch_filter, limits, check_crc)
    out = _DecodeOutputs.allocate(plan.rows_max, plan.payload_bytes, include_headers)
    state = np.zeros(kernels.STATE_SIZE, np.int64)
    for records, table in plan.segments:
        kernels.decode_records(
            records, table, start_offset, end_offset, limits.headers_per_record_max,
            include_headers, out.offsets, out.timestamps, out.ts_types,
            out.key_offsets, out.key_data, out.key_valid,
            out.value_offsets, out.value_data, out.value_valid, out.list_offsets,
            out.hkey_offsets, out.hkey_data, out.hvalue_offsets, out.hvalue_data, out.hvalue_valid,
            state,
        )  # fmt: skip
        if state[kernels.S_ERROR]:
            _raise_decode_error(state, table, limits)
    return out.to_record_batch(state, topic, partition, include_headers)


def check_batches(data, *, limits: BatchLimits = DEFAULT_LIMITS, check_crc: bool = True,
                  keys_required: bool = False) -> int:
    """Check that every record of every batch in ``data`` decodes; return the record count.

    What a leader must do before it accepts a producer's batch (Kafka's ``LogValidator``): a batch
    whose CRC matches can still hold a compressed section that does not decompress, expands past
    ``decompressed_bytes_max``, or records that overrun their batch, and every consumer would
    then fail at that offset. Control batches are refused here: only the transaction
    coordinator writes them. It walks records with the decode kernel but keeps none of them (an
    empty offset range), so nothing is copied: about 10 ns a record uncompressed (bench/codec.py).
    Raises the typed ``RecordsError`` subclasses, as ``decode_batches`` does.

    ``keys_required`` (a compacted topic): once every record decoded, records without a key are
    ``KeylessRecordError`` naming each of them. A second, lighter walk over the same buffers
    (``_keyless_kernel``), run only then, so the check of other topics costs what it did.
    """
    view = memoryview(data).cast("B")
    planner = _Planner(view, limits)
    pos, end, records = 0, len(view), 0
    batches = []
    while pos < end:
        header = validate_batch(view, pos, limits, check_crc)
        if header.is_control:
            raise InvalidRecordError(f"control batch at base offset {header.base_offset}: only "
                                     "the transaction coordinator writes transaction markers")
        batches.append((header, pos))
        pos += header.size
        records += header.records_count
    for header, pos in batches:  # every header is valid: plan without checking them again
        planner.add(header, pos + HEADER_SIZE, pos + header.size)
    out = _CHECK_OUTPUTS
    state = np.zeros(kernels.STATE_SIZE, np.int64)
    segments = planner.plan().segments
    for buffer, table in segments:
        kernels.decode_records(
            buffer, table, 0, 0, limits.headers_per_record_max, False,
            out.offsets, out.timestamps, out.ts_types,
            out.key_offsets, out.key_data, out.key_valid,
            out.value_offsets, out.value_data, out.value_valid, out.list_offsets,
            out.hkey_offsets, out.hkey_data, out.hvalue_offsets, out.hvalue_data, out.hvalue_valid,
            state,
        )  # fmt: skip
        if state[kernels.S_ERROR]:
            _raise_decode_error(state, table, limits)
    assert state[kernels.S_ROWS] == 0, "an empty offset range keeps no row"
    if keys_required:
        _check_keys(segments, records)
    return records


def _check_keys(segments, records: int) -> None:
    """``KeylessRecordError`` if any record of the checked ``segments`` has a null key."""
    found = np.empty((records, 2), np.int64)
    keyless: list[tuple[int, int]] = []
    first_batch = 0
    for buffer, table in segments:
        count = keyless_records(buffer, table, found)
        assert count >= 0, "decode_records accepted these records"
        keyless.extend((first_batch + int(b), int(i)) for b, i in found[:count])
        first_batch += table.shape[0]
    if keyless:
        raise KeylessRecordError(tuple(keyless))


def _plan_decode(data, start_offset: int, end_offset: int, batch_filter,
                 limits: BatchLimits, check_crc: bool) -> _Plan:
    """Validate each batch (header, CRC), decompress the wanted ones; Python work per *batch*.

    Consecutive uncompressed batches are decoded in place, in one kernel call; each compressed
    batch gets a call of its own on its decompressed bytes (joining them would copy them all).
    """
    view = memoryview(data).cast("B")
    planner = _Planner(view, limits)
    pos, end = 0, len(view)
    while end - pos >= LOG_OVERHEAD:
        size = batch_size_at(view, pos)
        if size >= HEADER_SIZE and size > end - pos:
            break  # a cut batch at the end: Fetch returns one when the next batch is over its max
        header = validate_batch(view, pos, limits, check_crc)
        records_at, pos = pos + HEADER_SIZE, pos + size
        wanted = batch_filter is None or batch_filter(header)
        if (header.is_control or not wanted
                or header.next_offset <= start_offset or header.base_offset >= end_offset):
            continue
        planner.add(header, records_at, pos)
    return planner.plan()


class _Planner:
    """Builds a ``_Plan`` from validated batch headers, in order (see ``_plan_decode``)."""

    __slots__ = ("_view", "_limits", "_buf", "_segments", "_in_place", "_rows_max", "_payload_bytes")

    def __init__(self, view: memoryview, limits: BatchLimits) -> None:
        self._view = view
        self._limits = limits
        self._buf: np.ndarray | None = None  # the input as numpy, made when first needed
        self._segments: list[tuple[np.ndarray, np.ndarray]] = []
        self._in_place: list[tuple[int, ...]] = []  # rows of the current run of uncompressed batches
        self._rows_max = self._payload_bytes = 0

    def add(self, header: BatchHeader, records_at: int, end: int) -> None:
        """Plan the records of the batch at [records_at - HEADER_SIZE, end)."""
        if header.compression == 0:
            self._in_place.append(_table_row(header, records_at, end))
            self._payload_bytes += end - records_at
        else:
            records = _decompress(header.compression, self._view[records_at:end],
                                  self._limits.decompressed_bytes_max)
            if header.records_count * _MIN_RECORD_BYTES > len(records):
                raise CorruptRecordError(f"batch at base offset {header.base_offset} claims "
                                         f"{header.records_count} records in {len(records)} bytes")
            self._flush_in_place()
            self._segments.append((np.frombuffer(records, np.uint8),
                                   _table([_table_row(header, 0, len(records))])))
            self._payload_bytes += len(records)
        if self._payload_bytes > _INT32_MAX:
            raise RecordBatchTooLargeError("over 2 GiB of records in one decode_batches call; "
                                           "decode fewer batches at a time")
        self._rows_max += header.records_count

    def _flush_in_place(self) -> None:
        if self._in_place:
            if self._buf is None:
                self._buf = readonly(np.frombuffer(self._view, np.uint8))
            self._segments.append((self._buf, _table(self._in_place)))
            self._in_place = []

    def plan(self) -> _Plan:
        self._flush_in_place()
        return _Plan(self._segments, self._rows_max, self._payload_bytes)


def _table_row(header: BatchHeader, start: int, end: int) -> tuple[int, ...]:
    row = (start, end, header.base_offset, header.base_timestamp, header.max_timestamp,
           header.timestamp_type, header.records_count, header.last_offset_delta)
    assert len(row) == kernels.BATCH_COLUMNS
    return row


def _table(rows: list[tuple[int, ...]]) -> np.ndarray:
    return readonly(np.array(rows, np.int64))


def _decompress(codec: int, raw: memoryview, cap: int) -> bytes:
    """``compression.decompress`` with the same result and errors, minus a cost of lz4's.

    python-lz4 allocates its whole ``max_length`` up front: with the 64 MiB default cap that
    tripled the time to decompress a 1 MiB batch (measured). So lz4 first tries a cap sized from
    the input, and only a batch that really expands further is decompressed again with ``cap``.
    """
    if codec == Compression.LZ4:
        guess = max(_LZ4_GUESS_RATIO * len(raw), _LZ4_GUESS_MIN_BYTES)
        if guess < cap:
            try:
                return decompress(codec, raw, guess)
            except RecordBatchTooLargeError:
                pass
    return decompress(codec, raw, cap)


_BINARY = pa.binary()
_INT32_TYPE = pa.int32()
_INT64_TYPE = pa.int64()
_TIMESTAMP_TYPE = SPARK_KAFKA_SCHEMA.field("timestamp").type
_ALIGN = 64  # Arrow's recommended buffer alignment
_I64, _I32, _U8 = np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.uint8)


def _carve(*columns: tuple[int, np.dtype]) -> list[np.ndarray]:
    """Uninitialised arrays of (count, dtype), 64-byte aligned, all in one Arrow pool buffer.

    One allocation instead of one per column: a small decode spent a fifth of its time in
    ``pool_array`` calls. Each array's ``base`` is the shared buffer, so ``trimmed`` still judges
    every column by its own size (and copies out one that is mostly unused)."""
    starts, total = [], 0
    for count, dtype in columns:
        starts.append(total)
        total += -(-count * dtype.itemsize // _ALIGN) * _ALIGN
    buffer = pa.allocate_buffer(total)
    return [np.frombuffer(buffer, dtype, count, start)
            for (count, dtype), start in zip(columns, starts)]


@functools.lru_cache(maxsize=1024)
def _constant_scalars(topic: str, partition: int) -> tuple[pa.Scalar, pa.Scalar]:
    """The topic and partition scalars ``pa.repeat`` fills their columns with (immutable, so
    shared; making them was ~4 us of every decode)."""
    return pa.scalar(topic, pa.string()), pa.scalar(partition, pa.int32())


class _DecodeOutputs(NamedTuple):
    """Output columns sized so that no input can make the kernel write past them.

    Byte buffers get the whole payload size; ``trimmed`` copies out what a column leaves mostly
    unused. Memory comes from Arrow's pool (see ``pool_array``).
    """

    offsets: np.ndarray
    timestamps: np.ndarray
    ts_types: np.ndarray
    key_offsets: np.ndarray
    key_data: np.ndarray
    key_valid: np.ndarray
    value_offsets: np.ndarray
    value_data: np.ndarray
    value_valid: np.ndarray
    list_offsets: np.ndarray
    hkey_offsets: np.ndarray
    hkey_data: np.ndarray
    hvalue_offsets: np.ndarray
    hvalue_data: np.ndarray
    hvalue_valid: np.ndarray

    @classmethod
    def allocate(cls, rows: int, payload: int, include_headers: bool) -> "_DecodeOutputs":
        if include_headers:
            headers = payload // _MIN_HEADER_BYTES + 1
            header_columns = (
                pool_array(rows + 1, np.int32), pool_array(headers + 1, np.int32),
                pool_array(payload, np.uint8), pool_array(headers + 1, np.int32),
                pool_array(payload, np.uint8), pool_array(headers, np.uint8),
            )
        else:
            header_columns = (_EMPTY_I32, _EMPTY_I32, _EMPTY_U8, _EMPTY_I32, _EMPTY_U8, _EMPTY_U8)
        offsets, timestamps, ts_types, key_offsets, key_valid, value_offsets, value_valid = _carve(
            (rows, _I64), (rows, _I64), (rows, _I32), (rows + 1, _I32), (rows, _U8),
            (rows + 1, _I32), (rows, _U8))
        out = cls(
            offsets, timestamps, ts_types,
            key_offsets, pool_array(payload, np.uint8), key_valid,
            value_offsets, pool_array(payload, np.uint8), value_valid,
            *header_columns,
        )
        # The kernel writes the rest; with no rows, it is never called.
        out.key_offsets[0] = out.value_offsets[0] = 0
        if include_headers:
            out.list_offsets[0] = out.hkey_offsets[0] = out.hvalue_offsets[0] = 0
        return out

    def to_record_batch(self, state: np.ndarray, topic: str, partition: int,
                        include_headers: bool) -> pa.RecordBatch:
        n = int(state[kernels.S_ROWS])
        key = binary_array(_BINARY, n, self.key_offsets,
                           self.key_data[: state[kernels.S_KEY_BYTES]], self.key_valid,
                           int(state[kernels.S_KEY_NULLS]))
        value = binary_array(_BINARY, n, self.value_offsets,
                             self.value_data[: state[kernels.S_VALUE_BYTES]], self.value_valid,
                             int(state[kernels.S_VALUE_NULLS]))
        topic_scalar, partition_scalar = _constant_scalars(topic, partition)
        columns = [
            key,
            value,
            pa.repeat(topic_scalar, n),
            pa.repeat(partition_scalar, n),
            pa.Array.from_buffers(_INT64_TYPE, n, [None, trimmed(self.offsets[:n])]),
            pa.Array.from_buffers(_TIMESTAMP_TYPE, n, [None, trimmed(self.timestamps[:n])]),
            pa.Array.from_buffers(_INT32_TYPE, n, [None, trimmed(self.ts_types[:n])]),
        ]
        if not include_headers:
            return pa.RecordBatch.from_arrays(columns, schema=SPARK_KAFKA_SCHEMA)
        columns.append(self._headers(state, n))
        return pa.RecordBatch.from_arrays(columns, schema=SPARK_KAFKA_SCHEMA_WITH_HEADERS)

    def _headers(self, state: np.ndarray, n: int) -> pa.Array:
        count = int(state[kernels.S_HEADERS])
        # The kernel checked every header key is UTF-8, as Arrow requires of a string column.
        keys = binary_array(pa.string(), count, self.hkey_offsets,
                            self.hkey_data[: state[kernels.S_HKEY_BYTES]], _EMPTY_U8, 0)
        values = binary_array(pa.binary(), count, self.hvalue_offsets,
                              self.hvalue_data[: state[kernels.S_HVALUE_BYTES]],
                              self.hvalue_valid, int(state[kernels.S_HVALUE_NULLS]))
        entry_type = HEADERS_TYPE.value_type
        entries = pa.StructArray.from_arrays([keys, values], fields=list(entry_type))
        return pa.Array.from_buffers(HEADERS_TYPE, n, [None, trimmed(self.list_offsets[: n + 1])],
                                     children=[entries])


# check_batches keeps no row, so the kernel only ever writes 0 into element 0 of the offset
# columns here: one shared set of empty outputs (allocating it was a third of a small check).
_CHECK_OUTPUTS = _DecodeOutputs.allocate(0, 0, False)

_DECODE_ERRORS = {
    kernels.ERR_VARINT_END: "varint runs past the end of the record data",
    kernels.ERR_VARINT_LONG: "varint longer than its 5 or 10 bytes",
    kernels.ERR_VARINT_INT32: "varint does not fit in an int32",
    kernels.ERR_RECORD_LENGTH: "record length {detail} overruns the batch",
    kernels.ERR_OFFSET_DELTA: "record offsetDelta {detail} outside [0, lastOffsetDelta]",
    kernels.ERR_FIELD_LENGTH: "field length {detail} overruns the record",
    kernels.ERR_NULL_HEADER_KEY: "record header with a null key",
    kernels.ERR_HEADER_KEY_UTF8: "record header key is not UTF-8",
    kernels.ERR_RECORD_TRAILING: "record has {detail} unread bytes",
    kernels.ERR_BATCH_TRAILING: "{detail} bytes left over after the batch's records",
}


def _raise_decode_error(state: np.ndarray, table: np.ndarray, limits: BatchLimits) -> None:
    code, batch, pos, detail = (int(v) for v in state[: kernels.S_DETAIL + 1])
    where = (f"in the batch at base offset {int(table[batch, kernels.B_BASE_OFFSET])}, "
             f"byte {pos - int(table[batch, kernels.B_START])} of its records")
    if code == kernels.ERR_HEADER_COUNT:
        raise InvalidRecordError(
            f"record has {detail} headers, limit {limits.headers_per_record_max} ({where})")
    assert code in _DECODE_ERRORS, f"decode kernel returned unknown error code {code}"
    raise CorruptRecordError(f"{_DECODE_ERRORS[code].format(detail=detail)} ({where})")


# --------------------------------------------------------------------------------------- encode


def encode_batches(
    values,
    *,
    keys=None,
    timestamps=None,
    headers=None,
    compression: int = 0,
    batch_bytes_max: int = 1 << 20,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    now_ms: int | None = None,
    copy: bool = True,
    continue_offsets: bool = True,
) -> list[EncodedBatch]:
    """Encode rows into consecutive v2 batches (CreateTime), ready to produce.

    ``values``/``keys``: binary or string columns (Arrow, or anything ``pa.array`` takes), nulls
    allowed. ``timestamps``: Arrow timestamps (any unit) or int64 epoch ms; None or null rows take
    ``now_ms``. ``headers``: list<struct<key: string, value: binary>>, null lists = no headers.
    A batch holds rows while its uncompressed size (61-byte header + record bytes) stays within
    ``batch_bytes_max`` -- so it also fits a broker whose message.max.bytes is that -- and at most
    ``DEFAULT_LIMITS.records_per_batch_max`` records; one over-size row makes a batch of one.
    Batch k starts at base_offset + rows before it (a log's layout), or with
    ``continue_offsets=False`` at base_offset itself: what a producer sends, since Kafka's leader
    refuses a client batch whose baseOffset is not 0 (``LogValidator``). Its baseSequence
    continues either way (wrapping past INT32_MAX to 0, as Kafka's
    DefaultRecordBatch.incrementSequence).

    ``copy=False`` (uncompressed only) hands out each batch as a read-only ``memoryview`` into
    the one buffer the kernel wrote, instead of copying it into a new ``bytes``: what
    kafka-python's ``DefaultRecordBatchBuilder.build()`` does with its bytearray. The buffer comes
    from Arrow's pool, which reuses freed memory; a new ``bytes`` is fresh memory from malloc,
    which glibc returns to the kernel when it is freed (heap trimming), so every call page-faults
    its whole output anew: about as costly as the rest of the encoder (bench/codec.py reports
    both). The views keep the whole buffer (every batch of the call) alive until the last one
    is released. Compressed batches are always new bytes: the compressor allocates them.
    """
    codec = check_supported(compression)
    if batch_bytes_max <= HEADER_SIZE:
        raise ValueError(f"batch_bytes_max {batch_bytes_max} leaves no room after the header")
    value_parts = binary_parts(values, "values")
    n = len(value_parts.valid)
    if n == 0:
        return []
    key_parts = null_parts(n) if keys is None else binary_parts(keys, "keys", n)
    ts = timestamps_ms(timestamps, n, now_ms)
    hdr = header_parts(headers, n) if headers is not None else no_headers(n)
    columns = (*value_parts, *key_parts, ts, hdr.first, hdr.count, hdr.keys.data,
               hdr.keys.offsets, *hdr.values)
    state = np.zeros(kernels.STATE_SIZE, np.int64)
    body, first_rows, positions = (pool_array(n + extra, np.int64) for extra in (0, 1, 1))
    kernels.plan_batches(*columns, batch_bytes_max, DEFAULT_LIMITS.records_per_batch_max,
                         body, first_rows, positions, state)
    if state[kernels.S_ERROR]:
        _raise_encode_error(state)
    count = int(state[kernels.S_BATCHES])
    first_rows, positions = first_rows[: count + 1], positions[: count + 1]
    out = pool_array(int(positions[-1]), np.uint8)
    attributes = codec | (TRANSACTIONAL_MASK if transactional else 0)
    kernels.write_records(*columns, readonly(body), readonly(first_rows), readonly(positions),
                          base_offset, attributes, producer_id, producer_epoch, base_sequence, out)
    finish = _finish_uncompressed if codec == 0 else _finish_compressed
    starts, rows = positions.tolist(), first_rows.tolist()
    if not continue_offsets:  # baseOffset lies before the CRC's range: set it per batch, no re-CRC
        for k in range(1, count):
            out[starts[k]:starts[k] + 8] = np.frombuffer(struct.pack(">q", base_offset), np.uint8)
    view = memoryview(out)
    if codec == 0 and not copy:
        finish = _finish_in_place
        view = view.toreadonly()  # _finish_in_place writes the CRC through ``out``
    return [EncodedBatch(finish(view, starts[k], starts[k + 1], codec), rows[k + 1] - rows[k], rows[k])
            for k in range(count)]


def _raise_encode_error(state: np.ndarray) -> None:
    code, row, detail = (int(state[i]) for i in (kernels.S_ERROR, kernels.S_POS, kernels.S_DETAIL))
    if code == kernels.ERR_RECORD_TOO_LARGE:
        raise ValueError(f"row {row} encodes to a record of {detail} bytes, over Kafka's int32 limit")
    assert code == kernels.ERR_BAD_INPUT, f"encode kernel returned unknown error code {code}"
    raise ValueError(f"row {row}: Arrow offsets point outside their data buffer (invalid array)")


def _finish_uncompressed(view: memoryview, start: int, end: int, codec: int) -> bytes:
    """Set the CRC-32C of the batch at view[start:end] (header written by the kernel); copy it out.

    The CRC runs over the records while they are still in cache from the kernel's pass: a
    separate library call (hardware CRC-32C, ~20 GB/s here) costs less than a byte loop in numba.
    """
    _CRC.pack_into(view, start + CRC_OFFSET, crc32c.crc32c(view[start + ATTRIBUTES_OFFSET : end]))
    return view[start:end].tobytes()


def _finish_in_place(view: memoryview, start: int, end: int, codec: int) -> memoryview:
    """``_finish_uncompressed`` without the copy: the read-only view of the batch in place."""
    crc = crc32c.crc32c(view[start + ATTRIBUTES_OFFSET : end])
    _CRC.pack_into(view.obj, start + CRC_OFFSET, crc)
    return view[start:end]


def _finish_compressed(view: memoryview, start: int, end: int, codec: int) -> bytes:
    """Compress the records of the batch at view[start:end], then fix batchLength and the CRC."""
    payload = compress(codec, view[start + HEADER_SIZE : end])
    header = bytearray(view[start : start + HEADER_SIZE])
    _INT32.pack_into(header, 8, HEADER_SIZE + len(payload) - LOG_OVERHEAD)
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return b"".join((header, payload))
