"""``pylog dump-log SEGMENT``: list the batches of a segment file with their CRC status.

Like Kafka's ``kafka-dump-log.sh``: one line per batch (position, offsets, count, timestamps,
codec, producer, CRC valid or not), optionally every record. It stops at the first batch that
fails validation and says where, which is exactly where crash recovery would truncate.

A segment the log cleaner wrote shows what compaction did, the way a reader meets it:

- ``gap: offsets 5..9 (5) cleaned away`` before a batch that does not start where the previous
  one (or the segment's base offset, from its file name) ended; offsets missing inside a batch
  show in ``--print-records`` and in the summary's count;
- ``deleteHorizonMs: <ms> (<UTC>)`` on a batch the cleaner stamped (KIP-534: the delete-horizon
  attribute bit; the base timestamp is then the time after which its tombstones and markers go);
- ``empty: ...`` on a batch without records, which the cleaner keeps either for its producer
  (the last batch of an idempotent producer carries its sequence state) or for the segment's
  offset span (a cleaned segment ends where its group of segments ended).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Callable, TextIO

from broker.records import BatchHeader, Compression, RecordsError, decode_batch, validate_batch
from broker.records.header import DELETE_HORIZON_MASK, BatchLimits

_SCAN_LIMITS = BatchLimits(batch_bytes_max=2**31 - 1)


def _timestamp(ms: int) -> str:
    if ms < 0:
        return str(ms)
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def dump_segment(path: str, out: TextIO, print_records: bool = False,
                 read: Callable[[str], bytes] | None = None) -> int:
    """Write the dump to ``out``; return 0 if every byte belongs to a valid batch, else 1."""
    data = read(path) if read else _read_file(path)
    pos, batches, records, empty = 0, 0, 0, 0
    expected = _base_offset_of(path)  # the next offset a gapless log would hold
    between = within = 0  # offsets without a record: between batches, inside batches
    print(f"Dumping {path} ({len(data)} bytes)", file=out)
    while pos < len(data):
        try:
            header = validate_batch(data, pos, _SCAN_LIMITS)
        except RecordsError as exc:
            print(f"INVALID at position {pos}: {exc} "
                  f"({len(data) - pos} bytes from here would be truncated by recovery)", file=out)
            return 1
        if expected is not None and header.base_offset > expected:
            missing = header.base_offset - expected
            print(f"gap: offsets {expected}..{header.base_offset - 1} ({missing}) cleaned away", file=out)
            between += missing
        print(_batch_line(header, pos), file=out)
        if print_records:
            for record in decode_batch(data, pos, _SCAN_LIMITS).records:
                print(f"| offset: {record.offset} timestamp: {_timestamp(record.timestamp)} "
                      f"key: {record.key!r} value: {_preview(record.value)} "
                      f"headers: {list(record.headers)}", file=out)
        pos += header.size
        batches += 1
        records += header.records_count
        empty += header.records_count == 0
        within += header.last_offset - header.base_offset + 1 - header.records_count
        expected = header.last_offset + 1
    cleaned = (f", {between + within} offsets without a record ({between} between batches, {within} inside)"
               if between + within else "")
    empties = f" ({empty} empty)" if empty else ""
    print(f"{batches} batches{empties}, {records} records{cleaned}, all CRCs valid", file=out)
    return 0


def _batch_line(header: BatchHeader, pos: int) -> str:
    line = (f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.records_count} position: {pos} size: {header.size} "
            f"baseTimestamp: {_timestamp(header.base_timestamp)} "
            f"maxTimestamp: {_timestamp(header.max_timestamp)} "
            f"compression: {Compression(header.compression).name.lower()} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"baseSequence: {header.base_sequence} isTransactional: {header.is_transactional} "
            f"isControl: {header.is_control} leaderEpoch: {header.partition_leader_epoch} "
            f"crc: {header.crc:#010x} crcValid: true")
    if header.attributes & DELETE_HORIZON_MASK:
        line += f" deleteHorizonMs: {header.base_timestamp} ({_timestamp(header.base_timestamp)})"
    if header.records_count == 0:
        line += (f" empty: kept for producer {header.producer_id}'s sequence state" if header.producer_id >= 0
                 else " empty: kept for the segment's offset span")
    return line


def _base_offset_of(path: str) -> int | None:
    """The segment's base offset from its name (``00000000000000000100.log``), if it has one."""
    stem = os.path.basename(path).split(".")[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


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
