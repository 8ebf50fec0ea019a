"""Byte-level agreement of broker.records with kafka-python's independent RecordBatch v2 code."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.records import Compression, ControlRecord, ControlType, Record, decode_batch
from broker.records import encode_batch, encode_control_batch

CODECS = [
    pytest.param(Compression.NONE, id="none"),
    pytest.param(Compression.GZIP, id="gzip"),
    pytest.param(Compression.LZ4, id="lz4"),
]

# Compressible values, so kafka-python does not fall back to sending the batch uncompressed.
SAMPLE = [
    Record(0, 1_700_000_000_000, b"key-0", b"value " * 20, (("trace", b"abc"), ("n", None))),
    Record(1, 1_700_000_000_005, None, b"value " * 20),
    Record(2, 1_699_999_999_000, b"key-2", None, (("empty", b""),)),
    Record(3, 1_700_000_000_010, b"", b""),
    Record(4, 1_700_000_000_011, b"\x00\xff" * 50, b"\x80" * 300, tuple((f"h{i}", b"v" * i) for i in range(5))),
]


def kafka_python_build(records, codec, *, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                       transactional=False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, list(r.headers)) is not None
    return bytes(builder.build())


def kafka_python_records(buf: bytes):
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc(), "kafka-python rejects our CRC"
    return batch, [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_in_kafka_python(codec):
    buf = encode_batch(SAMPLE, compression=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    batch, records = kafka_python_records(buf)
    assert records == as_tuples(SAMPLE)
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 40)
    assert batch.first_timestamp == SAMPLE[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in SAMPLE)
    assert batch.last_offset_delta == 4


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_kafka_python_batches_decode_here(codec, transactional):
    buf = kafka_python_build(SAMPLE, codec, producer_id=99, producer_epoch=3, base_sequence=7,
                             transactional=transactional)
    batch = decode_batch(buf)
    assert as_tuples(batch.records) == as_tuples(SAMPLE)
    h = batch.header
    assert h.compression == codec
    assert h.is_transactional is transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (99, 3, 7)
    assert h.last_sequence == 7 + 4


def test_uncompressed_bytes_identical():
    """With no compression there is one right encoding; both implementations must produce it."""
    theirs = kafka_python_build(SAMPLE, 0, producer_id=5, producer_epoch=0, base_sequence=0)
    ours = encode_batch(SAMPLE, producer_id=5, producer_epoch=0, base_sequence=0, partition_leader_epoch=0)
    assert ours == theirs


def test_control_batch_read_by_kafka_python():
    buf = encode_control_batch(
        ControlRecord(ControlType.COMMIT, coordinator_epoch=12),
        offset=100, timestamp=5, producer_id=42, producer_epoch=1,
    )
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.commit and record.version == 0
    assert batch.base_offset == 100 and batch.producer_id == 42
