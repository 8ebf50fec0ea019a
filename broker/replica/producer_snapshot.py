"""Producer-state snapshot files: ``<offset>.snapshot`` in the partition's log directory.

A snapshot holds the producer state of every batch with an offset below ``offset`` (the log end
offset when it was taken); the file name is ``offset`` as 20 zero-padded digits, like Kafka's
``00000000000000001234.snapshot``, so the log loader leaves it alone. Loading takes the newest
snapshot whose offset is within [log start offset, log end offset] and replays the batch headers
from that offset to the log end (``broker.replica.producer_recovery``).

Format (big-endian; pylog's own, version 1 — Kafka's v1 keeps only the last batch per producer,
this keeps all five so duplicates of any cached batch are still recognised after a restart)::

    version                   int16   1
    crc                       uint32  CRC-32C of every byte after this field
    producer_count            int32
    per producer:
      producer_id             int64
      producer_epoch          int16
      coordinator_epoch       int32
      current_txn_first_offset int64  -1 when no transaction is open
      last_append_ms          int64   broker clock of its newest append
      batch_count             int8    0..5 (0: a producer known only by its markers, e.g.
                                      after a marker at a bumped epoch cleared its batches)
      per batch, oldest first:
        first_seq             int32
        last_seq              int32
        last_offset           int64
        offset_delta          int32
        timestamp             int64

After a crash a file is either complete or absent: it is written to ``<name>.tmp``, fsynced,
renamed and the directory fsynced. A file that fails any check (size, version, CRC, counts) is
reported by ``SnapshotError``; the loader deletes it and falls back to an older snapshot or to
the start of the log, which only costs a longer scan.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from pathlib import Path
from typing import Iterable

import crc32c

from broker.log.fileio import fsync_dir, open_rw, pwrite_all
from broker.replica.producer_state import BATCHES_RETAINED, BatchMetadata, ProducerEntry

__all__ = [
    "SNAPSHOT_SUFFIX",
    "SnapshotError",
    "encode_snapshot",
    "decode_snapshot",
    "snapshot_path",
    "list_snapshots",
    "write_snapshot",
    "read_snapshot",
]

SNAPSHOT_SUFFIX = ".snapshot"
_VERSION = 1
_PREFIX = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqiq")


class SnapshotError(ValueError):
    """A snapshot file that does not parse; the message says which check failed."""


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    body = bytearray()
    entries = [e for e in entries if e.batches or e.coordinator_epoch >= 0 or e.current_txn_first_offset >= 0]
    body += _COUNT.pack(len(entries))
    for e in entries:
        body += _ENTRY.pack(e.producer_id, e.producer_epoch, e.coordinator_epoch,
                            e.current_txn_first_offset, e.last_append_ms, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.last_offset, b.offset_delta, b.timestamp)
    return _PREFIX.pack(_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """Parse a snapshot; every length is checked against the bytes left before it is used."""
    if len(data) < _PREFIX.size + _COUNT.size:
        raise SnapshotError(f"{len(data)} bytes is shorter than the snapshot header")
    version, crc = _PREFIX.unpack_from(data, 0)
    if version != _VERSION:
        raise SnapshotError(f"version {version} is not {_VERSION}")
    body = memoryview(data)[_PREFIX.size:]
    if crc32c.crc32c(body) != crc:
        raise SnapshotError("CRC mismatch")
    (count,) = _COUNT.unpack_from(body, 0)
    if count < 0 or count * _ENTRY.size > len(body) - _COUNT.size:
        raise SnapshotError(f"producer count {count} does not fit {len(body)} bytes")
    pos = _COUNT.size
    entries = []
    for _ in range(count):
        entry, pos = _decode_entry(body, pos)
        entries.append(entry)
    if pos != len(body):
        raise SnapshotError(f"{len(body) - pos} trailing bytes")
    return entries


def _decode_entry(body: memoryview, pos: int) -> tuple[ProducerEntry, int]:
    if len(body) - pos < _ENTRY.size:
        raise SnapshotError("truncated producer entry")
    pid, epoch, coordinator_epoch, txn_first, last_ts, batch_count = _ENTRY.unpack_from(body, pos)
    pos += _ENTRY.size
    if not 0 <= batch_count <= BATCHES_RETAINED or len(body) - pos < batch_count * _BATCH.size:
        raise SnapshotError(f"producer {pid}: batch count {batch_count} is invalid or truncated")
    batches: deque = deque(maxlen=BATCHES_RETAINED)
    for _ in range(batch_count):
        batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
        pos += _BATCH.size
    if pid < 0 or epoch < 0:
        raise SnapshotError(f"producer id {pid} / epoch {epoch} cannot be stored")
    return ProducerEntry(pid, epoch, batches, last_ts, coordinator_epoch, txn_first), pos


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    """(offset, path) of every snapshot file in ``directory``, oldest first."""
    found = []
    for name in os.listdir(directory):
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            found.append((int(stem), directory / name))
    return sorted(found)


def write_snapshot(directory: Path, offset: int, entries: Iterable[ProducerEntry]) -> Path:
    """Write the snapshot for ``offset`` atomically and durably (see the module docstring)."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    fd = open_rw(tmp)
    try:
        os.ftruncate(fd, 0)
        pwrite_all(fd, encode_snapshot(entries), 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)
    return path


def read_snapshot(path: Path) -> list[ProducerEntry]:
    return decode_snapshot(path.read_bytes())
