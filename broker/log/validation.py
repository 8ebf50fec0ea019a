"""Checks on an append's records buffer, all done before a byte is written, and offset assignment.

Pure functions over the caller's buffer: nothing here touches a file, and nothing copies the
batches. A leader's offsets are assigned by building a ``pwritev`` vector of a fresh 16-byte
prefix (baseOffset, batchLength, partitionLeaderEpoch: all outside the CRC) per batch followed by a
view of the rest of the batch, so a 1 MiB produce is written from the request buffer as it came.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.log.config import INT32_MAX
from broker.log.errors import (
    InvalidOffsetError,
    NonMonotonicAppendError,
    RecordListTooLargeError,
)
from broker.log.segment import BatchInfo
from broker.records import (
    HEADER_SIZE,
    BatchHeader,
    BatchLimits,
    InvalidRecordError,
    log_append_time_header,
    validate_batch,
)

__all__ = ["PreparedAppend", "prepare_leader_append", "prepare_follower_append"]

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
PREFIX_SIZE = _PREFIX.size  # 16


class PreparedAppend(NamedTuple):
    """An append checked in full and ready to write; nothing was written to make it."""

    buffers: list[bytes | memoryview]  # the pwritev vector: exactly the batches as stored
    batches: list[BatchInfo]
    size: int  # bytes of all batches
    max_timestamp: int
    offset_of_max_timestamp: int  # last offset of the first batch carrying max_timestamp


def prepare_leader_append(
    view: memoryview,
    limits: BatchLimits,
    segment_bytes: int,
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int = -1,
) -> PreparedAppend | None:
    """Validate every batch of a produce and lay out its write with offsets from
    ``first_offset`` and ``leader_epoch`` stamped in fresh 16-byte prefixes. None if empty.

    ``log_append_time_ms`` >= 0 (a LogAppendTime topic) restamps each batch's whole 61-byte
    header instead (``log_append_time_header``: timestamp type, max timestamp, CRC); the
    records themselves are still written from the caller's buffer.

    Raises the first bad batch's ``RecordsError`` (``validate_batch`` with CRC, then the
    leader's own rules), then ``RecordListTooLargeError`` if the append exceeds a segment.
    """
    buffers: list[bytes | memoryview] = []
    infos: list[BatchInfo] = []
    offset, max_timestamp, offset_of_max = first_offset, -1, -1
    position, end = 0, len(view)
    while position < end:
        header = validate_batch(view, position, limits, check_crc=True)
        _check_leader_batch(header)
        size = header.size
        last = offset + header.last_offset_delta
        batch_max_timestamp = header.max_timestamp
        if log_append_time_ms >= 0:
            batch_max_timestamp = log_append_time_ms
            restamped = log_append_time_header(view, position, size, log_append_time_ms)
            buffers.append(_PREFIX.pack(offset, header.batch_length, leader_epoch) + restamped[PREFIX_SIZE:])
            buffers.append(view[position + HEADER_SIZE : position + size])
        else:
            buffers.append(_PREFIX.pack(offset, header.batch_length, leader_epoch))
            buffers.append(view[position + PREFIX_SIZE : position + size])
        infos.append(BatchInfo(offset, last, batch_max_timestamp, size))
        if batch_max_timestamp > max_timestamp or offset_of_max < 0:
            max_timestamp, offset_of_max = batch_max_timestamp, last
        offset, position = last + 1, position + size
    _check_fits_segment(end, segment_bytes)
    return PreparedAppend(buffers, infos, end, max_timestamp, offset_of_max) if infos else None


def prepare_follower_append(
    view: memoryview, limits: BatchLimits, segment_bytes: int, log_end_offset: int
) -> PreparedAppend | None:
    """Validate every batch of a replicated append, which keeps the leader's offsets and
    epochs: written as it came, in one buffer. None if empty.

    After the batch checks: the first batch may not start below the log end offset (gaps above
    it are legal, e.g. after compaction on the leader: ``InvalidOffsetError``), each batch must
    start after the previous one's last offset (``NonMonotonicAppendError``), and the append
    must span at most 2^31-1 offsets so that it fits one segment's relative offsets.
    """
    infos: list[BatchInfo] = []
    max_timestamp, offset_of_max = -1, -1
    position, end = 0, len(view)
    while position < end:
        header = validate_batch(view, position, limits, check_crc=True)
        infos.append(
            BatchInfo(header.base_offset, header.last_offset, header.max_timestamp, header.size)
        )
        if header.max_timestamp > max_timestamp or offset_of_max < 0:
            max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
        position += header.size
    _check_fits_segment(end, segment_bytes)
    if not infos:
        return None
    _check_follower_offsets(infos, log_end_offset)
    return PreparedAppend([view], infos, end, max_timestamp, offset_of_max)


def _check_fits_segment(size: int, segment_bytes: int) -> None:
    """Kafka refuses an append larger than a segment (``validRecords.sizeInBytes >
    config.segmentSize``) with RECORD_LIST_TOO_LARGE."""
    if size > segment_bytes:
        raise RecordListTooLargeError(
            f"append of {size} bytes is larger than a segment (segment.bytes={segment_bytes})"
        )


def _check_leader_batch(header: BatchHeader) -> None:
    """What a leader requires of a client's v2 batch beyond ``validate_batch`` (Kafka
    ``LogValidator.validateBatch``): at least one record, and offset deltas 0..count-1, so
    the offsets the leader assigns are exactly the records' (no holes, no overflow)."""
    count = header.records_count
    if count <= 0:
        raise InvalidRecordError(f"invalid reported count for record batch: {count}")
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range: lastOffsetDelta {header.last_offset_delta} "
            f"and count of records {count}"
        )


def _check_follower_offsets(infos: list[BatchInfo], log_end_offset: int) -> None:
    first = infos[0].base_offset
    if first < log_end_offset:
        raise InvalidOffsetError(
            f"follower append starts at offset {first}, below the log end offset {log_end_offset}"
        )
    previous_last = first - 1
    for info in infos:
        if info.base_offset <= previous_last:
            raise NonMonotonicAppendError(
                f"batch at offset {info.base_offset} does not follow offset {previous_last}"
            )
        previous_last = info.last_offset
    if previous_last - first > INT32_MAX:
        raise InvalidOffsetError(
            f"follower append spans offsets {first}..{previous_last}, more than one segment holds"
        )
