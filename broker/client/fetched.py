"""Turning one partition's fetched bytes into the records a consumer returns. Pure.

What a Fetch answer holds for a partition: whole RecordBatch v2 batches, possibly followed by a
cut-off batch (the broker stops at ``partition_max_bytes``; a cut tail is normal and is fetched
again next time), possibly starting *before* the fetch offset (the broker returns whole batches,
and a batch's base offset can be below the offset asked for, e.g. inside a compressed batch or
after a seek), so records below the fetch offset are dropped.

Control batches (transaction markers) are never returned but their offsets are consumed: the
next fetch offset moves past them.

read_committed (reference section 3; Java ``CompletedFetch.nextFetchedRecord``, librdkafka
``rdkafka_msgset_reader.c``): the broker sends data below the last stable offset and the list of
aborted transactions ``(producer_id, first_offset)`` that overlap it. Walking the batches in
offset order, every aborted entry whose first offset is <= the batch's last offset is "open" for
its producer; a transactional data batch from a producer with an open aborted transaction is
dropped; that producer's ABORT marker closes it. One producer can have several aborted (and
committed) transactions in one fetch (reference pitfall 9): the entries are consumed in order, so
each ABORT marker closes exactly the transaction it ends, and a COMMIT marker changes nothing.
"""

from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass
from typing import Iterable

from broker.client.errors import KafkaError
from broker.records import (
    ControlType,
    RecordsError,
    decode_batch,
    decode_control_record,
    iter_batches,
)
from broker.records.header import BatchHeader, BatchLimits
from broker.wire import ErrorCode

__all__ = ["ConsumerRecord", "FetchedPartition", "AbortedTransactionFilter", "decode_fetched",
           "aborted_batch_offsets"]

# The response frame limit already bounds a batch; these bound what one batch may expand to.
FETCH_LIMITS = BatchLimits(batch_bytes_max=0x7FFFFFFF)
_MAGIC_OFFSET = 16  # magic sits at byte 16 in RecordBatch v2 and in the old MessageSet v0/v1


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    leader_epoch: int = -1


@dataclass(frozen=True)
class FetchedPartition:
    records: list[ConsumerRecord]
    next_offset: int  # where the next fetch starts: past every complete batch seen
    truncated_bytes: int = 0  # bytes of a cut-off batch at the end (fetched again next time)


class AbortedTransactionFilter:
    """Call ``is_aborted`` for every data batch and ``on_control`` for every control batch, in
    offset order. ``aborted`` is the fetch answer's AbortedTransactions (None: none)."""

    def __init__(self, aborted: Iterable[tuple[int, int]] | None) -> None:
        # (first_offset, producer_id), smallest first offset on top
        self._pending = [(first, pid) for pid, first in (aborted or ())]
        heapq.heapify(self._pending)
        self._open: set[int] = set()  # producers with an aborted transaction in progress

    def _open_up_to(self, last_offset: int) -> None:
        while self._pending and self._pending[0][0] <= last_offset:
            _, pid = heapq.heappop(self._pending)
            self._open.add(pid)

    def is_aborted(self, header: BatchHeader) -> bool:
        if header.producer_id < 0:
            return False
        self._open_up_to(header.last_offset)
        return header.is_transactional and header.producer_id in self._open

    def on_control(self, header: BatchHeader, control_type: int) -> None:
        if header.producer_id < 0:
            return
        self._open_up_to(header.last_offset)
        if control_type == ControlType.ABORT:
            self._open.discard(header.producer_id)


def decode_fetched(
    topic: str,
    partition: int,
    records,
    fetch_offset: int,
    *,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    read_committed: bool = False,
    check_crcs: bool = True,
    limits: BatchLimits = FETCH_LIMITS,
) -> FetchedPartition:
    """The records at or after ``fetch_offset`` in ``records`` (bytes of whole batches), minus
    control batches and, with ``read_committed``, aborted transactional batches."""
    buf = memoryview(records if records is not None else b"")
    out: list[ConsumerRecord] = []
    txn_filter = AbortedTransactionFilter(aborted_transactions) if read_committed else None
    next_offset = fetch_offset
    end = 0
    for pos, header in iter_batches(buf):
        end = pos + header.size
        _check_magic(header.magic, topic, partition, header.base_offset)
        if header.next_offset <= fetch_offset:
            continue  # entirely before the position (no aborted-list bookkeeping needed there)
        next_offset = header.next_offset
        if header.is_control:
            if txn_filter is not None:
                txn_filter.on_control(header, _control_type(buf, pos, topic, partition, check_crcs, limits))
            continue
        if txn_filter is not None and txn_filter.is_aborted(header):
            continue
        batch = _decode(buf, pos, topic, partition, check_crcs, limits)
        epoch = header.partition_leader_epoch
        log_append_time = header.max_timestamp if header.timestamp_type else None
        for record in batch.records:
            if record.offset >= fetch_offset:
                # LogAppendTime: every record reads the broker's stamp, the batch's max timestamp.
                timestamp = record.timestamp if log_append_time is None else log_append_time
                out.append(ConsumerRecord(topic, partition, record.offset, timestamp,
                                          header.timestamp_type, record.key, record.value,
                                          record.headers, epoch))
    if end == 0 and len(buf) > _MAGIC_OFFSET:
        _check_magic(buf[_MAGIC_OFFSET], topic, partition, fetch_offset)
    return FetchedPartition(out, next_offset, len(buf) - end)


def _check_magic(magic: int, topic: str, partition: int, offset: int) -> None:
    if magic != 2:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"{topic}-{partition} at offset {offset}: message format magic {magic}; "
            f"this client reads only RecordBatch v2 (magic 2)",
        )


def _decode(buf, pos: int, topic: str, partition: int, check_crcs: bool, limits: BatchLimits):
    try:
        return decode_batch(buf, pos, limits, check_crc=check_crcs)
    except RecordsError as exc:
        base = struct.unpack_from(">q", buf, pos)[0]
        raise KafkaError(exc.kafka_error_code,
                         f"{topic}-{partition}: batch at offset {base}: {exc}") from exc


def _control_type(buf, pos: int, topic: str, partition: int, check_crcs: bool, limits: BatchLimits) -> int:
    batch = _decode(buf, pos, topic, partition, check_crcs, limits)
    if not batch.records:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{topic}-{partition}: empty control batch")
    try:
        return decode_control_record(batch.records[0]).type
    except RecordsError as exc:
        raise KafkaError(exc.kafka_error_code, f"{topic}-{partition}: {exc}") from exc


def aborted_batch_offsets(records, aborted_transactions, tp: tuple[str, int], check_crcs: bool = True,
                          limits: BatchLimits = FETCH_LIMITS) -> set[int]:
    """Base offsets of the data batches in ``records`` that belong to aborted transactions:
    the same walk as ``decode_fetched`` (headers and control records only, no data record is
    decoded), for a vectorized decoder's ``batch_filter``."""
    if not aborted_transactions:
        return set()
    buf = memoryview(records)
    txn_filter = AbortedTransactionFilter(aborted_transactions)
    out = set()
    for pos, header in iter_batches(buf):
        if header.is_control:
            txn_filter.on_control(header, _control_type(buf, pos, tp[0], tp[1], check_crcs, limits))
        elif txn_filter.is_aborted(header):
            out.add(header.base_offset)
    return out
