"""Helpers shared by the test_records_arrow* modules (no tests here).

Rows are compared as tuples ``(offset, timestamp_ms, timestamp_type, key, value, headers)`` with
``headers`` a tuple of (str, bytes | None) pairs, whichever codec produced them: ours
(``decode_batches``), the reference (``broker.records.decode_batch``) or kafka-python's.
"""

from __future__ import annotations

import struct

import pyarrow as pa
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.records import decode_batch, iter_batches, set_base_offset
from broker.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, compute_crc

Row = tuple  # (offset, timestamp_ms, timestamp_type, key, value, headers)

# Compressible values, so kafka-python does not fall back to sending a batch uncompressed.
SAMPLE = [
    # (timestamp, key, value, headers)
    (1_700_000_000_000, b"key-0", b"value " * 20, (("trace", b"abc"), ("n", None))),
    (1_700_000_000_005, None, b"value " * 20, ()),
    (1_699_999_999_000, b"key-2", None, (("empty", b""),)),
    (1_700_000_000_010, b"", b"", ()),
    (1_700_000_000_011, b"\x00\xff" * 50, b"\x80" * 300, tuple((f"h{i}", b"v" * i) for i in range(5))),
    (1_700_000_000_012, b"k\xc3\xa9", "unicodé ✓".encode() * 10, (("ключ", b"\xff"),)),
]


def kafka_python_batch(records, codec: int = 0, *, base_offset: int = 0, transactional: bool = False,
                       producer_id: int = -1, producer_epoch: int = -1,
                       base_sequence: int = -1) -> bytes:
    """One batch built by kafka-python; ``records`` as SAMPLE; offsets = base_offset + index."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 22,
    )
    for delta, (timestamp, key, value, headers) in enumerate(records):
        assert builder.append(delta, timestamp, key, value, list(headers)) is not None
    buf = bytearray(builder.build())
    set_base_offset(buf, 0, base_offset)  # what the leader does on append (outside the CRC)
    return bytes(buf)


def kafka_python_rows(data: bytes) -> list[Row]:
    """Every record kafka-python reads from a run of batches, control batches skipped as consumers do."""
    rows = []
    for pos, header in iter_batches(data):
        batch = DefaultRecordBatch(bytearray(data[pos : pos + header.size]))
        assert batch.validate_crc(), "kafka-python rejects the CRC"
        if batch.is_control_batch:
            continue
        rows.extend((r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))
                    for r in batch)
    return rows


def reference_rows(data: bytes) -> list[Row]:
    """The same through broker.records.decode_batch (the per-record reference codec)."""
    rows = []
    for pos, header in iter_batches(data):
        if header.is_control:
            continue
        batch = decode_batch(data, pos)
        log_append = header.timestamp_type == 1
        rows.extend((r.offset, header.max_timestamp if log_append else r.timestamp,
                     header.timestamp_type, r.key, r.value, r.headers) for r in batch.records)
    return rows


def arrow_rows(batch: pa.RecordBatch) -> list[Row]:
    """Rows of a decode_batches result; without a headers column every row's headers are ()."""
    columns = batch.to_pydict()
    n = batch.num_rows
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(us % 1000 == 0 for us in micros), "Kafka timestamps are whole milliseconds"
    headers = columns.get("headers", [[]] * n)
    return [
        (columns["offset"][i], micros[i] // 1000, columns["timestampType"][i], columns["key"][i],
         columns["value"][i], tuple((h["key"], h["value"]) for h in headers[i]))
        for i in range(n)
    ]


def without_headers(rows: list[Row]) -> list[Row]:
    return [row[:5] + ((),) for row in rows]


def raw_batch(records: bytes, count: int, *, last_offset_delta: int | None = None, codec: int = 0,
              base_offset: int = 0, base_timestamp: int = 1_700_000_000_000,
              attributes: int = 0) -> bytes:
    """A batch around a hand-made records section, with a correct CRC (for malformed-record tests)."""
    last = count - 1 if last_offset_delta is None else last_offset_delta
    buf = bytearray(HEADER_SIZE + len(records))
    struct.pack_into(">qiibIhiqqqhii", buf, 0, base_offset, len(buf) - LOG_OVERHEAD, -1, 2, 0,
                     codec | attributes, last, base_timestamp, base_timestamp, -1, -1, -1, count)
    buf[HEADER_SIZE:] = records
    return recrc(buf)


def recrc(batch: bytes | bytearray) -> bytes:
    """Recompute the CRC of a batch whose bytes after ``attributes`` were changed."""
    buf = bytearray(batch)
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def set_attributes(batch: bytes, attributes: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attributes)
    return recrc(buf)
