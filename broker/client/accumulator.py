"""The producer's record accumulator: per partition, a queue of batches in send order.

Pure bookkeeping, no I/O, no lock of its own: the producer calls it with its lock held (user
threads append, the sender thread drains and completes). Tested on its own.

A partition's queue holds, in the order the records were given:

- at most one *open* batch, at the tail, that ``send`` adds records to (kept as columns: lists
  of values and timestamps, keys once one record has a key (``has_keys``; until then
  ``keys`` is empty and every key is null), headers by index; encoded once when the batch is
  first sent);
- *sealed* batches: an open batch that filled up (``batch_bytes_max``, estimated with Kafka's
  worst-case record size) or was drained, and the pre-encoded batches of ``send_arrow``.

``open_batches`` maps a partition to its open tail batch, if it has one: ``Producer.send``
appends to it directly (its fast path: no queue walk, no function call) when the record fits
without filling it; every other case goes through ``append_record``. A batch leaves
``open_batches`` whenever it is sealed (``_seal``) or removed.

Bounds: ``bytes_buffered`` counts every batch until it is acknowledged or failed, which
``Producer`` holds under ``buffer_bytes_max``. An open batch is charged its ``limit`` from the
moment it opens (``reserve_bytes``: batch.size, or the buffer if smaller; more for one record
larger than that), as Java's ``BufferPool`` hands a new batch batch.size bytes; once sealed it is
charged its estimated size, once encoded its encoded size. So a record that joins an open
batch's room changes no buffer count: ``Producer.send``'s fast path checks one bound, not two
(measured: ~50 ns of ~550 per record).

Ordering and retries (reference section 4): every batch of a partition goes to the same leader
and carries consecutive sequence numbers in queue order. Several batches of one partition may be
in flight at once (pipelining, up to the connection's ``max_in_flight``); ``next_sendable``
returns batches strictly in queue order. When a batch fails with a retriable error it moves to
RETRY; from then on nothing more of that partition is sent until every in-flight batch of it has
come back, and then the unacknowledged batches go again from the first, in order and one at a
time while any of them still awaits its retry (Java's ``RecordAccumulator`` does the same), with
the very same bytes (same producer id, epoch and sequences), so the broker deduplicates what it
already wrote and accepts the rest in sequence. Pipelining resumes once the retries are done.

A batch is *ready* to send when it is sealed, when ``linger_ms`` passed since it opened, when a
flush covers it (``force_serial``: every batch with a serial up to it), or when its retry
backoff passed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

__all__ = [
    "BATCH_OVERHEAD", "ProducerBatch", "RecordAccumulator", "record_size_max",
    "QUEUED", "IN_FLIGHT", "RETRY",
]

BATCH_OVERHEAD = 61  # RecordBatch v2 header

TopicPartition = tuple[str, int]

QUEUED, IN_FLIGHT, RETRY = "queued", "in_flight", "retry"


def record_size_max(key: bytes | None, value: bytes | None, headers) -> int:
    """Upper bound of one record's encoded size: length and five varints at their widest
    (``DefaultRecord.sizeInBytes`` with maximal deltas), plus the payloads."""
    size = 5 + 1 + 10 + 5 + 5 + 5 + 5  # length, attributes, ts delta, offset delta, key/value len, count
    size += len(key) if key is not None else 0
    size += len(value) if value is not None else 0
    for hkey, hvalue in headers:
        size += 10 + len(hkey.encode("utf-8")) + (len(hvalue) if hvalue is not None else 0)
    return size


@dataclass(eq=False)
class ProducerBatch:
    tp: TopicPartition
    serial: int  # position in the producer's append order (flush waits by serial)
    created_ms: float
    # The records of a ``send`` batch as columns (emptied once encoded); a pre-encoded
    # ``send_arrow`` batch has none, and its one ``BatchDelivery`` is ``delivery``.
    keys: list = field(default_factory=list)  # complete only when has_keys
    values: list = field(default_factory=list)
    # Epoch *nanoseconds* (a given timestamp_ms times 10^6): ``time.time_ns()`` as it is, since
    # its floor division to ms on a 61-bit int cost 40 ns per record (measured); the encoder
    # floors them to ms per batch, vectorized.
    timestamps: list = field(default_factory=list)
    headers: dict = field(default_factory=dict)  # record index -> headers, only records that have some
    callbacks: list | None = None  # (record index, timestamp ns, on_delivery) of ``produce`` records with one
    has_keys: bool = False
    delivery: object = None
    record_count: int = 0
    size_bytes: int = BATCH_OVERHEAD  # estimated (encoded, once encoded) size
    limit: int = 0  # while open: the size it may grow to, charged against buffer_bytes_max
    sealed: bool = False
    payload: bytes | None = None  # encoded; for idempotence stamped once, then never changed
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1  # -1 until stamped
    state: str = QUEUED
    attempts: int = 0  # sends that got an answer or failed on the wire
    retry_at_ms: float = 0.0
    last_error: Exception | None = None
    outcome_unknown: bool = False  # an attempt may have been written (timeout, dropped connection)
    first_sent_ms: float | None = None
    # The outcome, read by every Delivery of the batch (set once, by the sender, lock held).
    done: bool = False
    error: Exception | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    completed_ms: float | None = None
    producer: object = None  # the Producer whose handles read this batch (for waiting)

    @property
    def stamped(self) -> bool:
        return self.base_sequence >= 0


def append_key(batch: ProducerBatch, key) -> None:
    """Record ``key`` (the batch's newest record's) in ``batch.keys``, which stays empty while
    every key is null: most batches have no key, and this saves a list append per record."""
    if key is not None:
        if not batch.has_keys:
            batch.keys = [None] * batch.record_count
            batch.has_keys = True
        batch.keys.append(key)
    elif batch.has_keys:
        batch.keys.append(None)


class RecordAccumulator:
    def __init__(self, batch_bytes_max: int, linger_ms: float, owner: object = None,
                 reserve_bytes: int | None = None) -> None:
        assert batch_bytes_max > BATCH_OVERHEAD, "batch_bytes_max must exceed the batch header"
        self.owner = owner
        self.batch_bytes_max = batch_bytes_max
        # What a new batch is charged (its limit): batch_bytes_max, unless the buffer is smaller.
        self.reserve_bytes = batch_bytes_max if reserve_bytes is None else min(batch_bytes_max, reserve_bytes)
        self.linger_ms = linger_ms
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.open_batches: dict[TopicPartition, ProducerBatch] = {}  # the unsealed tail batches
        self._retrying: dict[TopicPartition, int] = {}  # batches in RETRY per partition
        self._in_flight: dict[TopicPartition, int] = {}
        self._next_serial = 0
        self._pending: dict[int, None] = {}  # serials of unfinished batches, in creation order
        self.bytes_buffered = 0
        self.batches_buffered = 0

    # ---------------------------------------------------------------- queries

    @property
    def records_buffered(self) -> int:
        """Records not yet acknowledged or failed (summed when asked: ``send`` does not count)."""
        return sum(batch.record_count for batch in self.batches())

    @property
    def empty(self) -> bool:
        return self.batches_buffered == 0

    @property
    def last_serial(self) -> int:
        """Serial of the last batch created (-1 before any)."""
        return self._next_serial - 1

    def oldest_serial(self) -> float:
        """Serial of the oldest unfinished batch (infinity when none): ``flush`` waits until
        it passes the last serial the flush covers."""
        return next(iter(self._pending), float("inf"))

    def batches(self) -> Iterator[ProducerBatch]:
        for queue in self._queues.values():
            yield from queue

    def partitions(self) -> list[TopicPartition]:
        return list(self._queues)

    def has_batches(self, tp: TopicPartition) -> bool:
        return bool(self._queues.get(tp))

    def would_open_batch(self, tp: TopicPartition, size: int) -> bool:
        """True when a record of ``size`` bytes for ``tp`` cannot join the tail batch."""
        queue = self._queues.get(tp)
        return not queue or not self._fits(queue[-1], size)

    def in_flight_count(self, tp: TopicPartition) -> int:
        return self._in_flight.get(tp, 0)

    # ---------------------------------------------------------------- appending

    def append_record(self, tp: TopicPartition, key, value, timestamp_ms: int, headers, size: int,
                      now_ms) -> tuple[ProducerBatch, bool]:
        """Add one record; returns (its batch, True if a batch was sealed by this append: there
        is something to send). The record's index in the batch is ``batch.record_count - 1``
        right after. ``now_ms`` is the time, or a function returning it (called only when a
        batch opens: the hot path skips the clock)."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        sealed_one = False
        batch = queue[-1] if queue else None
        if batch is None or batch.sealed or (batch.record_count and batch.size_bytes + size > batch.limit):
            if batch is not None and not batch.sealed:
                self._seal(batch)
                sealed_one = True
            batch = self._new_batch(tp, now_ms() if callable(now_ms) else now_ms,
                                    max(self.reserve_bytes, BATCH_OVERHEAD + size))
            queue.append(batch)
            self.open_batches[tp] = batch
        batch.values.append(value)
        batch.timestamps.append(timestamp_ms * 1_000_000)
        append_key(batch, key)
        if headers:
            batch.headers[batch.record_count] = headers
        batch.record_count += 1
        batch.size_bytes += size
        if batch.size_bytes >= batch.limit:
            self._seal(batch)
            sealed_one = True
        return batch, sealed_one

    def append_encoded(self, tp: TopicPartition, payload: bytes, record_count: int, delivery,
                       now_ms: float) -> ProducerBatch:
        """Queue one pre-encoded batch behind everything queued for ``tp`` (the open batch is
        sealed first, so records keep the order they were given in)."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        if queue and not queue[-1].sealed:
            self._seal(queue[-1])
        batch = self._new_batch(tp, now_ms, len(payload))
        batch.payload = payload
        batch.record_count = record_count
        batch.size_bytes = len(payload)
        batch.delivery = delivery
        batch.sealed = True
        queue.append(batch)
        return batch

    def _new_batch(self, tp: TopicPartition, now_ms: float, limit: int) -> ProducerBatch:
        batch = ProducerBatch(tp, self._next_serial, now_ms)
        batch.producer = self.owner
        batch.limit = limit
        self._pending[batch.serial] = None
        self._next_serial += 1
        self.bytes_buffered += limit
        self.batches_buffered += 1
        return batch

    def _seal(self, batch: ProducerBatch) -> None:
        if not batch.sealed:  # its reservation shrinks to what it holds
            self.bytes_buffered -= batch.limit - batch.size_bytes
            batch.limit = batch.size_bytes
        batch.sealed = True
        if self.open_batches.get(batch.tp) is batch:
            del self.open_batches[batch.tp]

    def _fits(self, batch: ProducerBatch, size: int) -> bool:
        # A sealed batch takes nothing more; an empty batch takes any one record, even an oversize one.
        if batch.sealed:
            return False
        return batch.record_count == 0 or batch.size_bytes + size <= batch.limit

    # ---------------------------------------------------------------- draining

    def next_sendable(self, tp: TopicPartition, now_ms: float, force_serial: int) -> ProducerBatch | None:
        """The next batch of ``tp`` to put on the wire, in queue order, or None."""
        queue = self._queues.get(tp)
        if not queue:
            return None
        if self._retrying.get(tp) and self._in_flight.get(tp):
            return None  # resend in order only once everything in flight has come back
        for batch in queue:
            if batch.state == IN_FLIGHT:
                continue
            if batch.state == RETRY:
                return batch if batch.retry_at_ms <= now_ms else None
            if self._ready(batch, now_ms, force_serial):
                return batch
            return None
        return None

    def _ready(self, batch: ProducerBatch, now_ms: float, force_serial: int) -> bool:
        return (batch.sealed or batch.serial <= force_serial
                or now_ms - batch.created_ms >= self.linger_ms)

    def next_wakeup_ms(self, now_ms: float, force_serial: int) -> float | None:
        """The earliest time a batch not sendable now becomes sendable by time (linger or
        backoff), or None when only an answer or an append can make progress."""
        times = []
        for tp, queue in self._queues.items():
            if self._retrying.get(tp) and self._in_flight.get(tp):
                continue
            for batch in queue:
                if batch.state == IN_FLIGHT:
                    continue
                if batch.state == RETRY:
                    times.append(batch.retry_at_ms)
                elif not self._ready(batch, now_ms, force_serial):
                    times.append(batch.created_ms + self.linger_ms)
                else:
                    times.append(now_ms)
                break
        return min(times) if times else None

    def oldest_waiting(self) -> Iterator[ProducerBatch]:
        """Per partition, the oldest batch not in flight (later ones are younger: a delivery
        timeout check needs to look at these only)."""
        for queue in self._queues.values():
            for batch in queue:
                if batch.state != IN_FLIGHT:
                    yield batch
                    break

    def mark_in_flight(self, batch: ProducerBatch, now_ms: float) -> None:
        if batch.state == RETRY:
            self._retrying[batch.tp] -= 1
        self._seal(batch)
        batch.state = IN_FLIGHT
        self._in_flight[batch.tp] = self._in_flight.get(batch.tp, 0) + 1
        if batch.first_sent_ms is None:
            batch.first_sent_ms = now_ms

    def mark_retry(self, batch: ProducerBatch, retry_at_ms: float) -> None:
        """An in-flight batch came back with a retriable error (or never came back)."""
        assert batch.state == IN_FLIGHT, f"retry of a batch in state {batch.state}"
        self._in_flight[batch.tp] -= 1
        batch.state = RETRY
        batch.retry_at_ms = retry_at_ms
        self._retrying[batch.tp] = self._retrying.get(batch.tp, 0) + 1

    def requeue(self, batch: ProducerBatch) -> None:
        """A RETRY batch goes back to QUEUED (after a producer id reset, to be stamped anew)."""
        if batch.state == RETRY:
            self._retrying[batch.tp] -= 1
        batch.state = QUEUED

    def remove(self, batch: ProducerBatch) -> None:
        """Take a finished (acknowledged or failed) batch out."""
        if not batch.sealed:
            self._seal(batch)  # failed while open (expired, abandoned): nothing joins it any more
        queue = self._queues[batch.tp]
        if queue and queue[0] is batch:
            queue.popleft()
        else:
            queue.remove(batch)
        if batch.state == IN_FLIGHT:
            self._in_flight[batch.tp] -= 1
        elif batch.state == RETRY:
            self._retrying[batch.tp] -= 1
        if not queue:
            del self._queues[batch.tp]
            self._retrying.pop(batch.tp, None)
            self._in_flight.pop(batch.tp, None)
        del self._pending[batch.serial]
        self.bytes_buffered -= batch.size_bytes
        self.batches_buffered -= 1

    def resize(self, batch: ProducerBatch, size_bytes: int) -> None:
        """Charge the encoded size instead of the estimate (the batch is sealed: in flight)."""
        assert batch.sealed, "only a sealed batch is encoded"
        self.bytes_buffered += size_bytes - batch.size_bytes
        batch.size_bytes = batch.limit = size_bytes
