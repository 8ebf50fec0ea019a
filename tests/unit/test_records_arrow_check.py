"""check_batches: what a leader checks before it accepts a producer's batch."""

from __future__ import annotations

import struct

import pytest

from broker.records import (
    BatchLimits,
    Compression,
    ControlRecord,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatchTooLargeError,
    encode_batch,
    encode_control_batch,
)
from broker.records.arrow import check_batches
from broker.records.header import CRC_OFFSET, HEADER_SIZE, compute_crc

CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4]


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def rows(n: int, value: bytes = b"v" * 100) -> list[Record]:
    return [Record(i, 1000 + i, b"k%d" % i, value, (("h", b"x"),)) for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
def test_valid_batches_pass_and_count(codec):
    data = encode_batch(rows(30), compression=codec) + encode_batch(rows(5), compression=codec)
    assert check_batches(data) == 35


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4])
def test_compressed_garbage_with_valid_crc(codec):
    batch = bytearray(encode_batch(rows(40), compression=codec))
    batch[HEADER_SIZE + 12:HEADER_SIZE + 30] = b"\xff" * 18
    with pytest.raises(CorruptRecordError):
        check_batches(recrc(batch))


def test_record_overrunning_its_batch_with_valid_crc():
    batch = bytearray(encode_batch(rows(3)))
    batch[HEADER_SIZE] = 0x7E  # the first record's length now overruns the batch
    with pytest.raises(CorruptRecordError, match="overruns"):
        check_batches(recrc(batch))


def test_bad_crc_is_reported_before_records():
    batch = bytearray(encode_batch(rows(3)))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        check_batches(bytes(batch))


def test_decompression_bomb_is_capped():
    bomb = encode_batch([Record(0, 0, None, bytes(4 << 20))], compression=Compression.LZ4)
    with pytest.raises(RecordBatchTooLargeError):
        check_batches(bomb, limits=BatchLimits(decompressed_bytes_max=1 << 20))


def test_control_batch_from_a_client_is_refused():
    marker = encode_control_batch(ControlRecord(1, 0), offset=0, timestamp=0,
                                  producer_id=1, producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="transaction coordinator"):
        check_batches(marker)
