"""broker.records: CRC vectors, header view, limits and bad input."""

from __future__ import annotations

import struct

import crc32c
import pytest

from broker.records import (
    BatchLimits,
    Compression,
    ControlRecord,
    ControlType,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatchTooLargeError,
    UnsupportedCompressionError,
    decode_batch,
    decode_control_record,
    encode_batch,
    encode_control_batch,
    iter_batches,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)
from broker.records.compression import compress
from broker.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, compute_crc


@pytest.mark.parametrize(
    "data, expected",
    [
        pytest.param(b"123456789", 0xE3069283, id="check-value"),
        pytest.param(bytes(32), 0x8A9136AA, id="rfc3720-zeros"),
        pytest.param(b"\xff" * 32, 0x62A8AB43, id="rfc3720-ones"),
        pytest.param(bytes(range(32)), 0x46DD794E, id="rfc3720-incrementing"),
        pytest.param(bytes(range(31, -1, -1)), 0x113FDB5C, id="rfc3720-decrementing"),
    ],
)
def test_crc32c_known_answers(data, expected):
    assert crc32c.crc32c(data) == expected


def records(n, start=0, value=b"v" * 100):
    return [Record(start + i, 1000 + i, b"k%d" % i, value) for i in range(n)]


def recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return buf


def test_header_view_matches_fields():
    buf = encode_batch(records(3, 10), compression=Compression.LZ4, producer_id=8,
                       producer_epoch=1, base_sequence=2147483646, transactional=True)
    h = read_header(buf)
    assert (h.base_offset, h.records_count, h.last_offset_delta) == (10, 3, 2)
    assert (h.last_offset, h.next_offset, h.size) == (12, 13, len(buf))
    assert h.compression == Compression.LZ4 and h.is_transactional and not h.is_control
    assert h.last_sequence == 0  # 2147483646 + 2 wraps past INT32_MAX to 0
    assert h.crc == crc32c.crc32c(buf[ATTRIBUTES_OFFSET:])


def test_rewrite_offset_and_epoch_keeps_crc_valid():
    buf = bytearray(encode_batch(records(5)))
    set_base_offset(buf, 0, 1_000_000)
    set_partition_leader_epoch(buf, 0, 17)
    h = validate_batch(buf)
    assert (h.base_offset, h.partition_leader_epoch) == (1_000_000, 17)
    assert [r.offset for r in decode_batch(buf).records] == list(range(1_000_000, 1_000_005))


def test_iter_batches_stops_at_cut_batch():
    a, b = encode_batch(records(2)), encode_batch(records(3, 2))
    buf = a + b + b[:40]
    found = [(pos, h.base_offset) for pos, h in iter_batches(buf)]
    assert found == [(0, 0), (len(a), 2)]


def test_bad_crc():
    buf = bytearray(encode_batch(records(2)))
    buf[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC mismatch") as exc:
        validate_batch(buf)
    assert exc.value.kafka_error_code == 2


def test_wrong_magic():
    buf = bytearray(encode_batch(records(1)))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        validate_batch(buf)


@pytest.mark.parametrize("delta, message", [(+1, "only"), (-1000, "below the v2 header")])
def test_inconsistent_length(delta, message):
    buf = bytearray(encode_batch(records(2)))
    struct.pack_into(">i", buf, 8, len(buf) - 12 + delta)
    with pytest.raises(CorruptRecordError, match=message):
        validate_batch(buf)


def test_over_limit_size():
    buf = encode_batch(records(50))
    with pytest.raises(RecordBatchTooLargeError) as exc:
        validate_batch(buf, limits=BatchLimits(batch_bytes_max=len(buf) - 1))
    assert exc.value.kafka_error_code == 10


@pytest.mark.parametrize("codec", [Compression.SNAPPY, Compression.ZSTD])
def test_unsupported_compression(codec):
    buf = bytearray(encode_batch(records(2)))
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, codec)
    with pytest.raises(UnsupportedCompressionError, match="unsupported compression") as exc:
        validate_batch(recrc(buf))
    assert exc.value.kafka_error_code == 76
    with pytest.raises(UnsupportedCompressionError):
        encode_batch(records(1), compression=codec)


def test_invalid_codec_id_is_corrupt():
    buf = bytearray(encode_batch(records(2)))
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, 6)
    with pytest.raises(CorruptRecordError, match="invalid compression codec"):
        validate_batch(recrc(buf))


def test_record_count_over_what_bytes_can_hold():
    buf = bytearray(encode_batch(records(2)))
    struct.pack_into(">i", buf, 57, 10_000)
    with pytest.raises(CorruptRecordError, match="claims 10000 records"):
        validate_batch(recrc(buf))


def test_record_count_limit():
    buf = encode_batch(records(20, value=b""))
    with pytest.raises(InvalidRecordError, match="limit 10"):
        validate_batch(buf, limits=BatchLimits(records_per_batch_max=10))


def test_decompression_bomb_is_capped():
    bomb = [Record(0, 0, None, bytes(8 * 1024 * 1024))]
    buf = encode_batch(bomb, compression=Compression.GZIP)
    assert len(buf) < 64 * 1024
    with pytest.raises(RecordBatchTooLargeError, match="decompression bomb"):
        decode_batch(buf, limits=BatchLimits(decompressed_bytes_max=1024 * 1024))


def test_header_count_limit():
    buf = encode_batch([Record(0, 0, None, b"x", tuple((f"h{i}", b"") for i in range(5)))])
    with pytest.raises(InvalidRecordError, match="5 headers"):
        decode_batch(buf, limits=BatchLimits(headers_per_record_max=4))


def test_truncated_compressed_payload():
    good = encode_batch(records(30), compression=Compression.LZ4)
    payload = compress(Compression.LZ4, b"x" * 1000)[:-6]
    buf = bytearray(good[:HEADER_SIZE]) + payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    with pytest.raises(CorruptRecordError):
        decode_batch(recrc(buf))


def test_record_overrunning_batch_is_corrupt():
    buf = bytearray(encode_batch(records(2)))
    buf[HEADER_SIZE] = 0x7E  # first record's length varint now claims 63 bytes more than it has
    with pytest.raises(CorruptRecordError, match="overruns"):
        decode_batch(recrc(buf))


@pytest.mark.parametrize("cut", range(0, 140, 7))
def test_every_truncation_raises_typed_error(cut):
    buf = encode_batch(records(2))
    with pytest.raises(CorruptRecordError):
        decode_batch(buf[:cut])


@pytest.mark.parametrize("kind", [ControlType.ABORT, ControlType.COMMIT])
def test_control_batch_round_trip(kind):
    buf = encode_control_batch(ControlRecord(kind, 9), offset=50, timestamp=1,
                               producer_id=3, producer_epoch=4)
    batch = decode_batch(buf)
    h = batch.header
    assert h.is_control and h.is_transactional and h.base_sequence == -1
    assert h.attributes == 0x30
    assert decode_control_record(batch.records[0]) == ControlRecord(kind, 9)


def test_control_record_with_bad_key_rejected():
    with pytest.raises(InvalidRecordError, match="4 bytes"):
        decode_control_record(Record(0, 0, b"\x00\x00\x01", b""))
    with pytest.raises(InvalidRecordError, match="version 3"):
        decode_control_record(Record(0, 0, b"\x00\x03\x00\x01", b""))


def test_int32_varint_out_of_range_is_corrupt():
    from broker.records.varint import decode_varint

    with pytest.raises(CorruptRecordError, match="int32"):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0, 5)
    assert decode_varint(b"\xfe\xff\xff\xff\x0f", 0, 5) == (2**31 - 1, 5)


def test_record_offset_delta_beyond_last_offset_delta_is_corrupt():
    gapped = [Record(0, 0, None, b"a"), Record(5, 0, None, b"b")]  # lastOffsetDelta 5
    buf = bytearray(encode_batch(gapped))
    struct.pack_into(">i", buf, 23, 1)  # claim lastOffsetDelta 1: still >= recordsCount - 1
    with pytest.raises(CorruptRecordError, match="offsetDelta 5 outside"):
        decode_batch(recrc(buf))


@pytest.mark.parametrize("key_size,value_size", [(0, 0), (10, 20), (63, 0), (64, 64), (1000, 1000),
                                                 (2000, 100), (3000, 5)])
def test_small_records_table_path_round_trips_at_its_bounds(key_size, value_size):
    """encode_records' table path (varints under 2048 looked up) against decode_batch, at the
    one/two-byte varint bounds and past the table (general path); offset and timestamp deltas
    inside and outside it, a negative timestamp delta, a record with headers, a null key."""
    deltas = [(0, 0), (1, 63), (63, 64), (64, 2047), (2047, 2048), (2048, -5)]
    records = [Record(100 + offset, 1_000_000 + timestamp, b"k" * key_size, b"v" * value_size)
               for offset, timestamp in deltas]
    records.append(Record(100 + 3000, 1_000_000, None, b"v" * value_size))
    records.append(Record(100 + 3001, 1_000_000, b"k", b"v", [("h", b"x")]))
    decoded = decode_batch(encode_batch(records, base_offset=100))
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded.records] == [
        (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]
