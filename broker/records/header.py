"""A light view of a RecordBatch v2 header: read and check it without decoding records.

Layout (big-endian; Kafka ``DefaultRecordBatch``), 61 bytes before the records::

    off  size  field                 notes
      0     8  baseOffset            assigned by the leader; outside the CRC
      8     4  batchLength           bytes after this field (total size - 12)
     12     4  partitionLeaderEpoch  set by the leader; outside the CRC
     16     1  magic                 2
     17     4  crc                   CRC-32C (Castagnoli) of bytes [21, end)
     21     2  attributes            bits 0-2 codec, 3 timestampType, 4 transactional, 5 control,
                                     6 hasDeleteHorizonMs
     23     4  lastOffsetDelta
     27     8  baseTimestamp
     35     8  maxTimestamp
     43     8  producerId            -1 when not idempotent
     51     2  producerEpoch
     53     4  baseSequence
     57     4  recordsCount          stays uncompressed
     61        records               one compressed blob when the codec is not none

Because baseOffset and partitionLeaderEpoch lie before the CRC's range, the leader assigns offsets
and stamps its epoch in place (``set_base_offset``, ``set_partition_leader_epoch``) without
recomputing the CRC. This view is the broker's hot path: produce validation, log append, read,
index rebuild and crash recovery all use it, and none of them decode individual records.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c

from broker.records.compression import check_supported
from broker.records.errors import CorruptRecordError, InvalidRecordError, RecordBatchTooLargeError

__all__ = [
    "BatchHeader",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "BatchLimits",
    "read_header",
    "validate_batch",
    "batch_size_at",
    "iter_batches",
    "set_base_offset",
    "set_partition_leader_epoch",
    "compute_crc",
    "log_append_time_header",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted by batchLength
MAGIC = 2
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [ATTRIBUTES_OFFSET, end)
_LENGTH_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_MAX_TIMESTAMP_OFFSET = 35  # after lastOffsetDelta (23) and baseTimestamp (27)
_UINT32 = struct.Struct(">I")
_MAGIC_AND_CRC = struct.Struct(">bI")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_SUPPORTED_CODECS = frozenset({0, 1, 3})  # none, gzip, lz4
_new_header = tuple.__new__

assert HEADER_SIZE == 61
assert _HEADER.size - LOG_OVERHEAD == 49


class BatchLimits(NamedTuple):
    """Bounds a batch must respect before anything is allocated for it.

    ``batch_bytes_max`` is Kafka's ``message.max.bytes`` (a whole batch, header included).
    ``decompressed_bytes_max`` caps what a compressed batch may expand to.
    """

    batch_bytes_max: int = 1048588
    decompressed_bytes_max: int = 64 * 1024 * 1024
    records_per_batch_max: int = 1 << 20
    headers_per_record_max: int = 1024


DEFAULT_LIMITS = BatchLimits()


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping past INT32_MAX to 0 (DefaultRecordBatch)."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the 61-byte header at ``pos``. Checks nothing but that 61 bytes are there."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch header needs {HEADER_SIZE} bytes, {max(0, len(buf) - pos)} left"
        )
    return _new_header(BatchHeader, _HEADER.unpack_from(buf, pos))


def batch_size_at(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Total size of the batch at ``pos`` from its length field, or -1 if the 12-byte prefix is cut."""
    if len(buf) - pos < LOG_OVERHEAD:
        return -1
    return _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def validate_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    limits: BatchLimits = DEFAULT_LIMITS,
    check_crc: bool = True,
) -> BatchHeader:
    """Check the batch at ``pos`` the way a leader must before appending it.

    Checks, in order: the length prefix fits the buffer and the limit, the magic, the codec, the
    record count against what the bytes could hold, and the CRC over [21, end). Returns the header.
    Raises a subclass of ``RecordsError`` naming what is wrong; nothing is allocated for the records.
    This runs once per produced batch, so it reads fields by index from one unpack (measured in
    bench/header_view.py).
    """
    available = len(buf) - pos
    if available < LOG_OVERHEAD:
        raise CorruptRecordError(f"batch needs at least {LOG_OVERHEAD} bytes, {available} left")
    size = _INT32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"batchLength {size - LOG_OVERHEAD} is below the v2 header size")
    if size > limits.batch_bytes_max:
        raise RecordBatchTooLargeError(
            f"batch of {size} bytes is over the limit of {limits.batch_bytes_max} (message.max.bytes)"
        )
    if size > available:
        raise CorruptRecordError(f"batchLength says {size} bytes, only {available} present")
    fields = _HEADER.unpack_from(buf, pos)
    if fields[3] != MAGIC:
        raise CorruptRecordError(f"magic {fields[3]} is not supported; only v2 record batches")
    codec = fields[5] & COMPRESSION_MASK
    if codec not in _SUPPORTED_CODECS:
        check_supported(codec)  # raises the typed error for this codec id
    count, last_offset_delta = fields[12], fields[6]
    # A record takes at least 7 bytes uncompressed (6 one-byte varints and the attributes byte).
    if count < 0 or last_offset_delta < count - 1 or (codec == 0 and count * 7 > size - HEADER_SIZE):
        _raise_bad_counts(count, last_offset_delta, size)
    if count > limits.records_per_batch_max:
        raise InvalidRecordError(f"batch claims {count} records, limit {limits.records_per_batch_max}")
    if check_crc:
        actual = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
        if actual != fields[4]:
            raise CorruptRecordError(
                f"CRC mismatch at base offset {fields[0]}: stored {fields[4]:#010x}, "
                f"computed {actual:#010x}"
            )
    return _new_header(BatchHeader, fields)


def _raise_bad_counts(count: int, last_offset_delta: int, size: int) -> None:
    if count < 0:
        raise CorruptRecordError(f"negative recordsCount {count}")
    if count * 7 > size - HEADER_SIZE:
        raise CorruptRecordError(f"batch claims {count} records in {size - HEADER_SIZE} bytes")
    raise CorruptRecordError(
        f"lastOffsetDelta {last_offset_delta} is below recordsCount-1 ({count - 1})"
    )


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch in ``buf[pos:end]``; stops at a cut batch.

    No CRC check: callers that read their own validated log use this; recovery uses
    ``validate_batch`` instead.
    """
    end = len(buf) if end is None else end
    while end - pos >= HEADER_SIZE:
        header = _new_header(BatchHeader, _HEADER.unpack_from(buf, pos))
        size = header.batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end:
            return
        yield pos, header
        pos += size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place; it lies outside the CRC, so the CRC stays valid."""
    _INT64.pack_into(buf, pos, base_offset)


def log_append_time_header(buf: bytes | bytearray | memoryview, pos: int, size: int, time_ms: int) -> bytes:
    """The 61-byte header of the batch at ``pos`` restamped for a LogAppendTime topic: the
    timestamp type bit set, ``maxTimestamp = time_ms``, the CRC recomputed over the new header
    and the unchanged records (Kafka's ``setMaxTimestamp(LOG_APPEND_TIME, now)``: record-level
    timestamps stay; readers take every record's time from ``maxTimestamp``)."""
    view = memoryview(buf)
    header = bytearray(view[pos : pos + HEADER_SIZE])
    attributes = _INT16.unpack_from(header, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(header, ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(header, _MAX_TIMESTAMP_OFFSET, time_ms)
    crc = crc32c.crc32c(view[pos + HEADER_SIZE : pos + size], crc32c.crc32c(header[ATTRIBUTES_OFFSET:]))
    _UINT32.pack_into(header, CRC_OFFSET, crc)
    return bytes(header)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)
