"""``pylog dump-log SEGMENT``: list the batches of a segment file with their CRC status.

Like Kafka's ``kafka-dump-log.sh``: one line per batch (position, offsets, count, timestamps,
codec, producer, CRC valid or not), optionally every record. It stops at the first batch that
fails validation and says where, which is exactly where crash recovery would truncate.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Callable, TextIO

from broker.records import Compression, RecordsError, decode_batch, validate_batch
from broker.records.header import BatchLimits

_SCAN_LIMITS = BatchLimits(batch_bytes_max=2**31 - 1)


def _timestamp(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def dump_segment(path: str, out: TextIO, print_records: bool = False,
                 read: Callable[[str], bytes] | None = None) -> int:
    """Write the dump to ``out``; return 0 if every byte belongs to a valid batch, else 1."""
    data = read(path) if read else _read_file(path)
    pos, batches, records = 0, 0, 0
    print(f"Dumping {path} ({len(data)} bytes)", file=out)
    while pos < len(data):
        try:
            header = validate_batch(data, pos, _SCAN_LIMITS)
        except RecordsError as exc:
            print(f"INVALID at position {pos}: {exc} "
                  f"({len(data) - pos} bytes from here would be truncated by recovery)", file=out)
            return 1
        print(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} position: {pos} size: {header.size} "
            f"baseTimestamp: {_timestamp(header.base_timestamp)} "
            f"maxTimestamp: {_timestamp(header.max_timestamp)} "
            f"compression: {Compression(header.compression).name.lower()} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"baseSequence: {header.base_sequence} isTransactional: {header.is_transactional} "
            f"isControl: {header.is_control} leaderEpoch: {header.partition_leader_epoch} "
            f"crc: {header.crc:#010x} crcValid: true",
            file=out,
        )
        if print_records:
            for record in decode_batch(data, pos, _SCAN_LIMITS).records:
                print(f"| offset: {record.offset} timestamp: {_timestamp(record.timestamp)} "
                      f"key: {record.key!r} value: {_preview(record.value)} "
                      f"headers: {list(record.headers)}", file=out)
        pos += header.size
        batches += 1
        records += header.records_count
    print(f"{batches} batches, {records} records, all CRCs valid", file=out)
    return 0


def _preview(value: bytes | None, limit: int = 60) -> str:
    if value is None:
        return "null"
    text = repr(value[:limit])
    return text + (f"... ({len(value)} bytes)" if len(value) > limit else "")


def _read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)
