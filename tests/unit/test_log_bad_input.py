"""Bad appends: the typed error with Kafka's code, and not one byte written."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable

import pytest

from broker.log import (
    InvalidOffsetError,
    Log,
    LogConfig,
    NonMonotonicAppendError,
    RecordListTooLargeError,
)
from broker.records import (
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatchTooLargeError,
    UnsupportedCompressionError,
    encode_batch,
)
from broker.records.header import CRC_OFFSET, compute_crc

T0 = 1_700_000_000_000


def batch(
    count: int = 3, value: bytes = b"v" * 50, compression=Compression.NONE, base: int = 0
) -> bytes:
    return encode_batch(
        [Record(base + i, T0 + i, b"k", value) for i in range(count)], compression=compression
    )


def with_fixed_crc(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, CRC_OFFSET, compute_crc(raw, 0, len(raw)))
    return bytes(raw)


def bad_crc() -> bytes:
    raw = bytearray(batch())
    raw[-5] ^= 0x40  # inside the records: covered by the CRC
    return bytes(raw)


def bad_magic() -> bytes:
    raw = bytearray(batch())
    raw[16] = 1
    return bytes(raw)


def length_too_big() -> bytes:
    raw = bytearray(batch())
    struct.pack_into(">i", raw, 8, len(raw) - 12 + 10)
    return bytes(raw)


def length_too_small() -> bytes:
    raw = bytearray(batch())
    struct.pack_into(">i", raw, 8, len(raw) - 12 - 7)
    return bytes(raw)


def length_below_header() -> bytes:
    raw = bytearray(batch())
    struct.pack_into(">i", raw, 8, 20)
    return bytes(raw)


def negative_length() -> bytes:
    raw = bytearray(batch())
    struct.pack_into(">i", raw, 8, -1)
    return bytes(raw)


def codec(codec_id: int) -> Callable[[], bytes]:
    def build() -> bytes:
        raw = bytearray(batch())
        attributes = struct.unpack_from(">h", raw, 21)[0]
        struct.pack_into(">h", raw, 21, (attributes & ~0x07) | codec_id)
        return with_fixed_crc(raw)

    return build


def records_count(count: int, last_offset_delta: int | None = None) -> Callable[[], bytes]:
    def build() -> bytes:
        raw = bytearray(batch(3))
        struct.pack_into(">i", raw, 57, count)
        if last_offset_delta is not None:
            struct.pack_into(">i", raw, 23, last_offset_delta)
        return with_fixed_crc(raw)

    return build


def over_message_max() -> bytes:
    return batch(1, value=b"x" * 1_100_000)


def truncated_tail() -> bytes:
    return batch()[:-1]


def trailing_garbage() -> bytes:
    return batch() + b"\x00\x01\x02\x03\x04"


CASES = [
    ("bad crc", bad_crc, CorruptRecordError, 2),
    ("wrong magic", bad_magic, CorruptRecordError, 2),
    ("batchLength too big", length_too_big, CorruptRecordError, 2),
    ("batchLength too small", length_too_small, CorruptRecordError, 2),
    ("batchLength below header", length_below_header, CorruptRecordError, 2),
    ("negative batchLength", negative_length, CorruptRecordError, 2),
    ("cut batch", truncated_tail, CorruptRecordError, 2),
    ("trailing garbage", trailing_garbage, CorruptRecordError, 2),
    ("over message.max.bytes", over_message_max, RecordBatchTooLargeError, 10),
    ("snappy", codec(2), UnsupportedCompressionError, 76),
    ("zstd", codec(4), UnsupportedCompressionError, 76),
    ("codec id 7", codec(7), CorruptRecordError, 2),
    ("zero records", records_count(0, 0), InvalidRecordError, 87),
    ("lastOffsetDelta beyond count", records_count(2), InvalidRecordError, 87),
    ("more records than the bytes hold", records_count(1000, 999), CorruptRecordError, 2),
]


def snapshot(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(directory.iterdir())}


@pytest.fixture
def log(tmp_path: Path):
    log = Log.open(tmp_path / "t-0", LogConfig(), lambda: T0)
    log.append_as_leader(batch(), 0)  # something already there
    yield log
    log.close()


def assert_nothing_written(log: Log, before: dict[str, int], end: int) -> None:
    assert log.log_end_offset == end
    assert snapshot(log.directory) == before
    assert log.read(0, 1 << 20).next_offset == end


@pytest.mark.parametrize("name, build, error, code", CASES, ids=[c[0] for c in CASES])
def test_bad_batch_is_refused(log: Log, name, build, error, code) -> None:
    before, end = snapshot(log.directory), log.log_end_offset
    with pytest.raises(error) as info:
        log.append_as_leader(build(), 0)
    assert info.value.kafka_error_code == code
    assert_nothing_written(log, before, end)


@pytest.mark.parametrize("name, build, error, code", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("as_type", [bytes, bytearray, memoryview])
def test_third_bad_batch_refuses_all_three(log: Log, name, build, error, code, as_type) -> None:
    before, end = snapshot(log.directory), log.log_end_offset
    records = as_type(batch(compression=Compression.GZIP) + batch(2) + build())
    with pytest.raises(error) as info:
        log.append_as_leader(records, 0)
    assert info.value.kafka_error_code == code
    assert_nothing_written(log, before, end)


@pytest.mark.parametrize("name, build, error, code",
                         [c for c in CASES if c[3] != 87], ids=[c[0] for c in CASES if c[3] != 87])
def test_follower_refuses_bad_batches_too(log: Log, name, build, error, code) -> None:
    raw = bytearray(build())
    if len(raw) >= 8:
        struct.pack_into(">q", raw, 0, log.log_end_offset)
    before, end = snapshot(log.directory), log.log_end_offset
    with pytest.raises(error):
        log.append_as_follower(bytes(raw))
    assert_nothing_written(log, before, end)


def test_append_larger_than_a_segment(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=500), lambda: T0)
    before = snapshot(log.directory)
    with pytest.raises(RecordListTooLargeError) as info:
        log.append_as_leader(batch(1, value=b"x" * 600), 0)
    assert info.value.kafka_error_code == 18
    # several batches that fit one by one but not together: refused as a whole too
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(batch(1, value=b"x" * 200) * 2, 0)
    assert_nothing_written(log, before, 0)
    assert log.append_as_leader(batch(1, value=b"x" * 200), 0).first_offset == 0
    log.close()


def test_topic_max_message_bytes_applies(tmp_path: Path) -> None:
    config = LogConfig.from_properties({}, {"max.message.bytes": "300"})
    log = Log.open(tmp_path / "t-0", config, lambda: T0)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(batch(1, value=b"x" * 300), 0)
    assert log.append_as_leader(batch(1, value=b"x" * 100), 0).last_offset == 0
    log.close()


def test_follower_offset_checks(log: Log) -> None:
    before, end = snapshot(log.directory), log.log_end_offset
    assert end == 3
    with pytest.raises(InvalidOffsetError):
        log.append_as_follower(batch(2, base=2))  # starts below the log end offset
    with pytest.raises(NonMonotonicAppendError):
        log.append_as_follower(batch(2, base=3) + batch(2, base=4))  # 4 <= last offset 4
    assert_nothing_written(log, before, end)
    info = log.append_as_follower(batch(2, base=3) + batch(1, base=10))  # a gap is legal
    assert (info.first_offset, info.last_offset, info.batches) == (3, 10, 2)
    assert log.log_end_offset == 11


def test_leader_input_buffer_is_not_modified(log: Log) -> None:
    raw = bytearray(batch())
    copy = bytes(raw)
    info = log.append_as_leader(raw, 42)
    assert bytes(raw) == copy
    stored = log.read(info.first_offset, 1 << 20).records
    assert struct.unpack_from(">qii", stored, 0) == (3, len(copy) - 12, 42)
    assert stored[16:] == copy[16:]


def test_empty_append_writes_nothing(log: Log) -> None:
    before = snapshot(log.directory)
    info = log.append_as_leader(b"", 0)
    assert (info.first_offset, info.batches, info.valid_bytes) == (-1, 0, 0)
    assert snapshot(log.directory) == before
