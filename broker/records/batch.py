"""Encode and decode whole RecordBatch v2 batches, record by record.

This is the *reference* codec: clear, bounded and exact, used by tests, tools (``pylog dump-log``)
and control-record handling. The broker's hot path never calls it (it uses ``header``), and the
vectorized Arrow codec of the client replaces it where throughput matters.

Record layout (Kafka ``DefaultRecord``; every integer is a ZigZag varint)::

    length           bytes after this field
    attributes       int8, unused, 0
    timestampDelta   varlong, relative to baseTimestamp
    offsetDelta      varint, relative to baseOffset
    keyLength        -1 for a null key
    key
    valueLength      -1 for a null value
    value
    headersCount
    headers          each: keyLength (>= 0), UTF-8 key, valueLength (-1 = null), value
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Sequence

from broker.records import header as hdr
from broker.records.compression import Compression, check_supported, compress, decompress
from broker.records.errors import CorruptRecordError, InvalidRecordError
from broker.records.header import DEFAULT_LIMITS, BatchHeader, BatchLimits
from broker.records.varint import decode_varint, encode_varint

__all__ = [
    "Record",
    "RecordBatch",
    "ControlRecord",
    "ControlType",
    "encode_batch",
    "decode_batch",
    "encode_control_batch",
    "encode_retained_batch",
    "decode_control_record",
]

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Record:
    """One record with absolute offset and timestamp (deltas are a wire detail)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True)
class RecordBatch:
    header: BatchHeader
    records: list[Record] = field(default_factory=list)


class ControlType:
    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True)
class ControlRecord:
    """A transaction marker (Kafka ``EndTransactionMarker``): key (version, type), value (version, epoch)."""

    type: int
    coordinator_epoch: int
    version: int = 0


_SMALL_VARINTS = 2048  # ZigZag varints of 0..2047 (one or two bytes), looked up, not computed
_VARINT = [bytes(bytearray_varint) for bytearray_varint in (
    (lambda out: (encode_varint(n, out), out)[1])(bytearray()) for n in range(_SMALL_VARINTS))]


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytearray:
    """The records of a batch, each its length varint and body (Kafka ``DefaultRecord``).

    A small record (no headers, key and value present, every varint under ``_SMALL_VARINTS``:
    the group coordinator's offset commits) takes its varints from a table instead of
    ``encode_varint``: the general path was most of the coordinator's batch encoding per
    OffsetCommit (issue 14). Every other record takes the general path."""
    out = bytearray()
    body = bytearray()
    table, small = _VARINT, _SMALL_VARINTS
    for record in records:
        key, value = record.key, record.value
        timestamp_delta = record.timestamp - base_timestamp
        offset_delta = record.offset - base_offset
        if (not record.headers and key is not None and value is not None and 0 <= timestamp_delta < small
                and 0 <= offset_delta < small):
            fields = (table[timestamp_delta], table[offset_delta])
            key_size, value_size = len(key), len(value)
            size = 2 + len(fields[0]) + len(fields[1]) + key_size + value_size + (
                (1 if key_size < 64 else 2) + (1 if value_size < 64 else 2))
            if size < small:
                out += table[size]
                out.append(0)  # attributes
                out += fields[0]
                out += fields[1]
                out += table[key_size]
                out += key
                out += table[value_size]
                out += value
                out.append(0)  # no headers
                continue
        body.clear()
        body.append(0)  # attributes
        encode_varint(record.timestamp - base_timestamp, body)
        encode_varint(record.offset - base_offset, body)
        _encode_bytes(record.key, body)
        _encode_bytes(record.value, body)
        encode_varint(len(record.headers), body)
        for key, value in record.headers:
            _encode_bytes(key.encode("utf-8"), body)
            _encode_bytes(value, body)
        encode_varint(len(body), out)
        out += body
    return out


def _encode_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def encode_batch(
    records: Sequence[Record],
    *,
    compression: int = Compression.NONE,
    base_offset: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: int = 0,
) -> bytes:
    """Build one batch; offsets and timestamps of ``records`` are absolute.

    ``base_offset`` defaults to the first record's offset. Records must have increasing offsets.
    """
    assert records, "a batch holds at least one record"
    if base_offset is None:
        base_offset = records[0].offset
    check_supported(compression)
    base_timestamp = records[0].timestamp
    max_timestamp = max(r.timestamp for r in records)
    last_offset_delta = records[-1].offset - base_offset
    payload = compress(compression, encode_records(records, base_offset, base_timestamp))
    attributes = (
        compression
        | (hdr.TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (hdr.TRANSACTIONAL_MASK if transactional else 0)
        | (hdr.CONTROL_MASK if control else 0)
    )
    buf = bytearray(hdr.HEADER_SIZE + len(payload))
    struct.pack_into(
        ">qiibIhiqqqhii", buf, 0,
        base_offset, len(buf) - hdr.LOG_OVERHEAD, partition_leader_epoch, hdr.MAGIC, 0,
        attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records),
    )  # fmt: skip
    buf[hdr.HEADER_SIZE :] = payload
    struct.pack_into(">I", buf, hdr.CRC_OFFSET, hdr.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def encode_retained_batch(
    header: BatchHeader, records: Sequence[Record], *, delete_horizon_ms: int = -1
) -> bytes:
    """The log cleaner's rewrite of a batch down to ``records`` (a subset of its records, or none).

    What consumers, followers and producer-state recovery rely on stays as it was (Kafka
    ``MemoryRecords.filterTo``): base offset, lastOffsetDelta (so the batch spans the same
    offsets and the producer's last sequence survives), partition leader epoch, producer id,
    epoch, base sequence, codec (none for an empty batch), timestamp type and the transactional
    and control flags.
    maxTimestamp is that of the records kept (of the original batch when none is). With
    ``delete_horizon_ms`` >= 0 the delete-horizon attribute is set and baseTimestamp carries the
    horizon (KIP-534); record timestamps stay absolute, as deltas from it (they may be negative).
    """
    if records:
        assert header.base_offset <= records[0].offset and records[-1].offset <= header.last_offset
        max_timestamp = max(r.timestamp for r in records)
        base_timestamp = records[0].timestamp
    else:
        max_timestamp = base_timestamp = header.max_timestamp
    attributes = header.attributes & ~hdr.DELETE_HORIZON_MASK
    if not records:
        attributes &= ~hdr.COMPRESSION_MASK  # an empty batch has nothing to decompress (as Kafka writes it)
    if delete_horizon_ms >= 0:
        attributes |= hdr.DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    payload = b""
    if records:
        payload = compress(header.compression, encode_records(records, header.base_offset, base_timestamp))
    buf = bytearray(hdr.HEADER_SIZE + len(payload))
    struct.pack_into(
        ">qiibIhiqqqhii", buf, 0,
        header.base_offset, len(buf) - hdr.LOG_OVERHEAD, header.partition_leader_epoch, hdr.MAGIC, 0,
        attributes, header.last_offset_delta, base_timestamp, max_timestamp,
        header.producer_id, header.producer_epoch, header.base_sequence, len(records),
    )  # fmt: skip
    buf[hdr.HEADER_SIZE :] = payload
    struct.pack_into(">I", buf, hdr.CRC_OFFSET, hdr.compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    limits: BatchLimits = DEFAULT_LIMITS,
    check_crc: bool = True,
) -> RecordBatch:
    """Validate and fully decode the batch at ``pos``; every length is checked before use."""
    header = hdr.validate_batch(buf, pos, limits, check_crc)
    raw = memoryview(buf)[pos + hdr.HEADER_SIZE : pos + header.size]
    data = decompress(header.compression, raw, limits.decompressed_bytes_max)
    if header.compression and header.records_count * 7 > len(data):
        # The header's count check (``validate_batch``) can only see compressed batches' sizes
        # after decompression; the same rule as for uncompressed ones, and as ``arrow``'s decoder.
        raise CorruptRecordError(f"batch at base offset {header.base_offset} claims "
                                 f"{header.records_count} records in {len(data)} bytes")
    records = _decode_records(data, header, limits)
    return RecordBatch(header, records)


def _decode_records(data: bytes, header: BatchHeader, limits: BatchLimits) -> list[Record]:
    records: list[Record] = []
    pos = 0
    end = len(data)
    for _ in range(header.records_count):
        length, pos = decode_varint(data, pos, 5)
        if length < 0 or pos + length > end:
            raise CorruptRecordError(f"record length {length} overruns the batch ({end - pos} left)")
        record_end = pos + length
        records.append(_decode_record(data, pos + 1, record_end, header, limits))
        pos = record_end
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after {header.records_count} records")
    return records


def _decode_record(
    data: bytes, pos: int, end: int, header: BatchHeader, limits: BatchLimits
) -> Record:
    view = memoryview(data)[:end]  # bounds every read below to this record
    timestamp_delta, pos = decode_varint(view, pos, 10)
    offset_delta, pos = decode_varint(view, pos, 5)
    if not 0 <= offset_delta <= header.last_offset_delta:
        raise CorruptRecordError(
            f"record offsetDelta {offset_delta} outside [0, lastOffsetDelta {header.last_offset_delta}]"
        )
    key, pos = _decode_bytes(view, pos)
    value, pos = _decode_bytes(view, pos)
    count, pos = decode_varint(view, pos, 5)
    if count < 0 or count > limits.headers_per_record_max:
        raise InvalidRecordError(f"record has {count} headers, limit {limits.headers_per_record_max}")
    headers = []
    for _ in range(count):
        hkey, pos = _decode_bytes(view, pos)
        if hkey is None:
            raise CorruptRecordError("record header with a null key")
        hvalue, pos = _decode_bytes(view, pos)
        try:
            headers.append((hkey.decode("utf-8"), hvalue))
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from exc
    if pos != end:
        raise CorruptRecordError(f"record has {end - pos} unread bytes")
    return Record(
        header.base_offset + offset_delta,
        header.base_timestamp + timestamp_delta,
        key,
        value,
        tuple(headers),
    )


def _decode_bytes(view: memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(view, pos, 5)
    if length == -1:
        return None, pos
    if length < 0 or pos + length > len(view):
        raise CorruptRecordError(f"field length {length} overruns the record ({len(view) - pos} left)")
    return bytes(view[pos : pos + length]), pos + length


_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def encode_control_batch(
    control: ControlRecord,
    *,
    offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch: transactional|control, codec none, one record, baseSequence -1."""
    key = _CONTROL_KEY.pack(control.version, control.type)
    value = _CONTROL_VALUE.pack(control.version, control.coordinator_epoch)
    return encode_batch(
        [Record(offset, timestamp, key, value)],
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def decode_control_record(record: Record) -> ControlRecord:
    """Parse a marker; like librdkafka, require a 4-byte key with version 0."""
    if record.key is None or len(record.key) != 4:
        raise InvalidRecordError("control record key must be 4 bytes (version, type)")
    version, type_ = _CONTROL_KEY.unpack(record.key)
    if version != 0:
        raise InvalidRecordError(f"control record key version {version} is not supported")
    epoch = -1
    if record.value is not None and len(record.value) >= 6:
        _, epoch = _CONTROL_VALUE.unpack_from(record.value)
    return ControlRecord(type_, epoch, version)
