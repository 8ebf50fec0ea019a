"""The producer's record accumulator: records grouped into one open batch per partition.

Pure bookkeeping, no I/O, tested on its own. Per partition a deque of ``ProducerBatch``; records
go to the tail batch while it has room (``batch_bytes_max``, estimated with Kafka's worst-case
record size), else a new batch opens behind it. Only the head batch of a partition is ever sent,
and it stays at the head while in flight, so a partition has at most one batch in flight: a
retried batch is resent with the same bytes (same producer id, epoch and base sequence) before
any later batch, which is what lets the broker deduplicate it (reference section 4) and keeps
records in order without Java's in-flight reordering logic.

A head batch is *ready* when it is full (another batch waits behind it, or it reached
``batch_bytes_max``), when ``linger_ms`` passed since it opened, when it is a retry whose backoff
passed, or when the caller forces it (flush).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

__all__ = ["PendingRecord", "ProducerBatch", "RecordAccumulator", "record_size_max", "BATCH_OVERHEAD"]

BATCH_OVERHEAD = 61  # RecordBatch v2 header

TopicPartition = tuple[str, int]


def record_size_max(key: bytes | None, value: bytes | None, headers) -> int:
    """Upper bound of one record's encoded size: length and five varints at their widest
    (``DefaultRecord.sizeInBytes`` with maximal deltas), plus the payloads."""
    size = 5 + 1 + 10 + 5 + 5 + 5 + 5  # length, attributes, ts delta, offset delta, key/value len, count
    size += len(key) if key is not None else 0
    size += len(value) if value is not None else 0
    for hkey, hvalue in headers:
        size += 10 + len(hkey.encode("utf-8")) + (len(hvalue) if hvalue is not None else 0)
    return size


@dataclass(slots=True)
class PendingRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp_ms: int
    delivery: object  # the caller's Delivery handle


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    created_ms: float
    records: list[PendingRecord] = field(default_factory=list)
    size_bytes: int = BATCH_OVERHEAD
    attempts: int = 0  # sends that got an answer or failed on the wire
    in_flight: bool = False
    retry_at_ms: float = 0.0
    payload: bytes | None = None  # encoded on first send, never re-encoded (dedup needs the same bytes)
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    last_error: Exception | None = None

    @property
    def record_count(self) -> int:
        return len(self.records)


class RecordAccumulator:
    def __init__(self, batch_bytes_max: int, linger_ms: float) -> None:
        assert batch_bytes_max > BATCH_OVERHEAD, "batch_bytes_max must exceed the batch header"
        self.batch_bytes_max = batch_bytes_max
        self.linger_ms = linger_ms
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.bytes_buffered = 0
        self.records_buffered = 0

    @property
    def empty(self) -> bool:
        return self.records_buffered == 0

    def batches(self) -> Iterator[ProducerBatch]:
        for queue in self._queues.values():
            yield from queue

    def would_open_batch(self, tp: TopicPartition, size: int) -> bool:
        """True when a record of ``size`` bytes for ``tp`` cannot join the tail batch."""
        queue = self._queues.get(tp)
        return not queue or not self._fits(queue[-1], size)

    def has_batches(self, tp: TopicPartition) -> bool:
        return bool(self._queues.get(tp))

    def append(self, tp: TopicPartition, record: PendingRecord, size: int, now_ms: float) -> ProducerBatch:
        queue = self._queues.setdefault(tp, deque())
        if not queue or not self._fits(queue[-1], size):
            queue.append(ProducerBatch(tp, now_ms))
        batch = queue[-1]
        batch.records.append(record)
        batch.size_bytes += size
        self.bytes_buffered += size
        self.records_buffered += 1
        return batch

    def _fits(self, batch: ProducerBatch, size: int) -> bool:
        # A sent batch is frozen; an empty batch takes any one record, even an oversize one.
        if batch.payload is not None or batch.in_flight:
            return False
        return not batch.records or batch.size_bytes + size <= self.batch_bytes_max

    def ready(self, now_ms: float, force: bool = False) -> list[ProducerBatch]:
        """The head batches that may be sent now (at most one per partition)."""
        out = []
        for queue in self._queues.values():
            if not queue:
                continue
            head = queue[0]
            if head.in_flight or head.retry_at_ms > now_ms:
                continue
            if (force or head.attempts > 0 or len(queue) > 1 or head.payload is not None
                    or head.size_bytes >= self.batch_bytes_max
                    or now_ms - head.created_ms >= self.linger_ms):
                out.append(head)
        return out

    def next_wakeup_ms(self, now_ms: float, force: bool = False) -> float | None:
        """The earliest time a head batch not in flight becomes ready, or None."""
        times = []
        for queue in self._queues.values():
            if not queue or queue[0].in_flight:
                continue
            head = queue[0]
            at = head.retry_at_ms if (force or head.attempts or head.payload is not None) else max(
                head.retry_at_ms, head.created_ms + self.linger_ms)
            times.append(at)
        return min(times) if times else None

    def remove(self, batch: ProducerBatch) -> None:
        """Take a finished (acknowledged or failed) batch out."""
        queue = self._queues[batch.tp]
        if queue and queue[0] is batch:
            queue.popleft()
        else:
            queue.remove(batch)
        if not queue:
            del self._queues[batch.tp]
        self.bytes_buffered -= batch.size_bytes - BATCH_OVERHEAD
        self.records_buffered -= len(batch.records)
