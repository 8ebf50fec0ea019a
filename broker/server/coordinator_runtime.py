"""What the group and the transaction coordinator shells share: the deadline timer, the wait on
a partition's purgatory, and the load of an internal partition (wait for the high watermark,
read it in chunks, decode its records).

Both shells (``broker.server.group_coordinator``, ``broker.server.txn_coordinator``) serve a pure
core the same way: a core exposes ``next_deadline()`` and ``tick(now_ms)``, and a partition led
here is loaded from its log before its core answers for it. Kept here once so a fix to either
(e.g. the load's retry) reaches both.

- ``DeadlineTimer``: one task that sleeps until the core's next deadline and calls ``on_due``;
  ``deadline_added`` wakes it early when a core call brought the deadline forward.
- ``read_for_load``: waits until the partition's high watermark reaches the log end it found
  (a new leader's high watermark trails its log until the followers fetch again; reading only
  below it means the state built cannot be truncated away), then reads. A failed read
  (``LogError``: a segment closed or swapped under it, an I/O error; ``RecordsError``: a batch
  that does not decode) is retried after a backoff that doubles from ``LoadRetry.backoff_ms`` up to
  ``backoff_max_ms``, for as long as the partition is led here: a partition whose load gave up
  would answer COORDINATOR_LOAD_IN_PROGRESS forever, while a retried one recovers once the cause
  goes (and its error is logged each time, so an operator sees a lasting one).
- ``read_chunks``/``decode_chunks``/``decode_records``: the partition's whole batches from its log
  start, and their (key, value) pairs (large chunks decoded on a worker thread).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass
from typing import Awaitable, Callable

import crc32c

from broker.coordinator.group.shard import TxnMarker, TxnRecord
from broker.log import LogError
from broker.records import HEADER_SIZE, LOG_OVERHEAD, CorruptRecordError, RecordsError, decode_batch
from broker.records.header import ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_MASK, TRANSACTIONAL_MASK

__all__ = ["DeadlineTimer", "LoadRetry", "decode_chunks", "decode_records", "read_chunks", "read_for_load",
           "wait_for_partition"]

logger = logging.getLogger(__name__)

_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # RecordBatch v2 header, 61 bytes
DECODE_IN_THREAD_BYTES_MIN = 256 * 1024  # smaller chunks decode on the loop (a thread hop costs ~50 us)


class DeadlineTimer:
    """Calls ``on_due()`` whenever ``next_deadline()`` (ms on ``now_ms``'s clock, None: none) is
    due; ``run`` is the task, owned by the shell's task group."""

    def __init__(self, next_deadline: Callable[[], int | None], now_ms: Callable[[], int],
                 on_due: Callable[[], None]) -> None:
        self._next_deadline = next_deadline
        self._now_ms = now_ms
        self._on_due = on_due
        self._wake = asyncio.Event()
        self._sleeping_until: int | None = None

    def deadline_added(self, deadline: int | None) -> None:
        """A core call may have brought the next deadline forward: wake the timer if so."""
        if deadline is not None and (self._sleeping_until is None or deadline < self._sleeping_until):
            self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            deadline = self._next_deadline()
            self._sleeping_until = deadline
            if deadline is None:
                await self._wake.wait()
                continue
            delay_ms = deadline - self._now_ms()
            if delay_ms > 0:
                try:
                    async with asyncio.timeout(delay_ms / 1000):
                        await self._wake.wait()
                except TimeoutError:
                    pass
                continue
            self._sleeping_until = None
            self._on_due()
            await asyncio.sleep(0)  # a deadline still due after a tick must not starve the loop


async def wait_for_partition(replicas, key: tuple[str, int], timeout_s: float, poll_ms: int) -> None:
    """Until the partition's purgatory is notified (its high watermark may have moved) or
    ``timeout_s``; when the purgatory is full or closed (shutdown), at most ``poll_ms``."""
    waiter = replicas.purgatory.watch([key])
    if waiter is None:
        await asyncio.sleep(min(max(timeout_s, 0), poll_ms / 1000))
        return
    with waiter:
        await waiter.wait(timeout_s)


@dataclass(frozen=True)
class LoadRetry:
    backoff_ms: int = 100  # the first retry of a failed load read
    backoff_max_ms: int = 10_000  # doubling stops here


async def read_for_load(replicas, key: tuple[str, int], read: Callable[[object, int], Awaitable],
                        poll_ms: int, retry: LoadRetry, sleep=asyncio.sleep):
    """``(end_offset, await read(partition, end_offset))`` once the high watermark reaches the log
    end found at the start, retried after a failed read (see the module doc); None when the
    partition is no longer led here (the shell's unload follows from its listener)."""
    partition = replicas.get(*key)
    if partition is None:
        return None
    target = partition.log.log_end_offset
    backoff_ms = retry.backoff_ms
    while True:
        while partition.high_watermark < target:
            await wait_for_partition(replicas, key, 1.0, poll_ms)
            if replicas.get(*key) is not partition or not partition.is_leader:
                return None
        try:
            return target, await read(partition, target)
        except (LogError, RecordsError) as exc:
            logger.error("%s-%d: loading failed, retrying in %d ms: %s", key[0], key[1], backoff_ms, exc)
        await sleep(backoff_ms / 1000)
        if replicas.get(*key) is not partition or not partition.is_leader:
            return None
        backoff_ms = min(backoff_ms * 2, retry.backoff_max_ms)


async def read_chunks(partition, end_offset: int, buffer_bytes: int) -> list[tuple[int, bytes]]:
    """(first offset, whole batches) read from the log start to ``end_offset`` in reads of
    ``buffer_bytes``; on the loop (the cleaner may swap segments between reads, never during one),
    letting requests in between chunks."""
    chunks: list = []
    offset = partition.log.log_start_offset
    while offset < end_offset:
        data = partition.log.read(offset, buffer_bytes, end_offset, True)
        if data.batches == 0:
            break
        chunks.append((offset, data.records))
        offset = data.next_offset
        await asyncio.sleep(0)
    return chunks


async def decode_chunks(chunks: list[tuple[int, bytes]]) -> list:
    """``decode_records`` of every chunk, in order; a large chunk on a worker thread."""
    records: list = []
    for chunk_offset, chunk in chunks:
        if len(chunk) >= DECODE_IN_THREAD_BYTES_MIN:
            records.extend(await asyncio.to_thread(decode_records, chunk, chunk_offset))
        else:
            records.extend(decode_records(chunk, chunk_offset))
    return records


def decode_records(data: bytes, from_offset: int = 0) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of every data record at or after ``from_offset`` in ``data`` (whole batches,
    as ``Log.read`` returns them); keyless records are skipped. A transactional batch's records
    come as ``(None, TxnRecord)``, a COMMIT/ABORT marker as ``(None, TxnMarker)`` (what
    ``core.load_partition`` takes); other control batches are skipped. Pure, so it may run on a
    worker thread.

    A coordinator taking over reads every record of its partition, so this is the load's hot
    loop: uncompressed batches (what coordinators write) are checked (bounds, magic, CRC-32C) and
    walked here without building ``Record`` objects, about 10x faster than ``decode_batch``;
    compressed ones (another writer's) go through ``decode_batch``. A batch that does not parse
    raises ``CorruptRecordError``."""
    data = bytes(data)
    view = memoryview(data)
    out: list = []
    append = out.append
    position, end = 0, len(data)
    while end - position >= HEADER_SIZE:
        (base_offset, batch_length, _, magic, crc, attributes, _, _, _, producer_id, _, _,
         count) = _BATCH_HEADER.unpack_from(data, position)
        size = batch_length + LOG_OVERHEAD
        if size < HEADER_SIZE or position + size > end:
            break  # a cut batch at the end of a read
        if magic != 2 or crc32c.crc32c(view[position + ATTRIBUTES_OFFSET:position + size]) != crc:
            raise CorruptRecordError(f"batch at offset {base_offset}: bad magic or CRC")
        if attributes & TRANSACTIONAL_MASK:
            _append_transactional(data, position, from_offset, producer_id, bool(attributes & CONTROL_MASK),
                                  append)
        elif not attributes & CONTROL_MASK:
            if attributes & COMPRESSION_MASK:
                for record in decode_batch(data, position).records:
                    if record.offset >= from_offset and record.key is not None:
                        append((record.key, record.value))
            else:
                _walk_records(data, position + HEADER_SIZE, position + size, count, base_offset,
                              from_offset, append)
        position += size
    return out


def _append_transactional(data: bytes, position: int, from_offset: int, producer_id: int, control: bool,
                          append) -> None:
    """The records of a transactional batch (TxnOffsetCommit's) or its producer's marker."""
    for record in decode_batch(data, position).records:
        if record.offset < from_offset or record.key is None:
            continue
        if not control:
            append((None, TxnRecord(producer_id, bytes(record.key), record.value and bytes(record.value))))
        elif len(record.key) == 4 and record.key[:2] == b"\x00\x00" and record.key[2:] in (b"\x00\x00", b"\x00\x01"):
            append((None, TxnMarker(producer_id, record.key[3] == 1)))


def _walk_records(data: bytes, pos: int, end: int, count: int, base_offset: int, from_offset: int,
                  append) -> None:
    """The records of one uncompressed batch. Varints of one byte (nearly all of them in
    coordinator records) are read inline: this loop is the load's cost per record."""
    try:
        for _ in range(count):
            b = data[pos]
            length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptRecordError(f"batch at offset {base_offset}: a record runs past its batch")
            pos += 1  # attributes
            b = data[pos]
            pos = pos + 1 if b < 0x80 else _varint(data, pos)[1]  # timestamp delta
            b = data[pos]
            offset_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
            b = data[pos]
            key_length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
            key = None if key_length < 0 else data[pos:pos + key_length]
            pos += max(key_length, 0)
            b = data[pos]
            value_length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else _varint(data, pos)
            value = None if value_length < 0 else data[pos:pos + value_length]
            pos += max(value_length, 0)
            if pos > record_end:
                raise CorruptRecordError(f"batch at offset {base_offset}: a record's key or value runs past it")
            if key is not None and base_offset + offset_delta >= from_offset:
                append((key, value))
            pos = record_end  # headers are not needed
    except IndexError:
        raise CorruptRecordError(f"batch at offset {base_offset}: a record is cut") from None
    if pos != end:
        raise CorruptRecordError(f"batch at offset {base_offset}: {end - pos} bytes after its records")


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (at most 10 bytes); IndexError past the data becomes CorruptRecordError."""
    try:
        byte = data[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        value, shift = byte & 0x7F, 7
        for index in range(pos + 1, pos + 10):
            byte = data[index]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (value >> 1) ^ -(value & 1), index + 1
            shift += 7
    except IndexError:
        pass
    raise CorruptRecordError(f"a varint at byte {pos} is cut or longer than 10 bytes")
