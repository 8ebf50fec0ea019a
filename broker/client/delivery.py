"""The handles ``Producer.send`` and ``send_arrow`` return: views of the batch a record went
into, read once the batch has its outcome (set by the producer's I/O, see ``sender``).

A ``Delivery`` costs three slots per record; its offset, error and completion time live on the
batch (one write per batch, not per record). Two handles of one record compare equal, so the
records a ``DeliveryFailed`` lists can be matched against the handles a caller kept.
"""

from __future__ import annotations

from broker.client.errors import DeliveryFailed

__all__ = ["Delivery", "BatchDelivery", "ArrowDeliveries", "failed_deliveries"]


class Delivery:
    """The outcome of one ``send``, a view of its batch: ``offset`` (and ``timestamp_ms``) once
    acknowledged, or ``error``. ``offset`` is -1 for acks=0 and for duplicates the broker did
    not re-number. ``completed_ms`` is the producer clock's monotonic time of the outcome.
    Two handles of the same record compare equal."""

    __slots__ = ("_batch", "_index", "_timestamp_ns")

    def __init__(self, batch, index: int, timestamp_ns: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp_ns = timestamp_ns  # (ns as the batch keeps it: ``send`` divides nothing)

    def __repr__(self) -> str:
        state = "pending" if not self.done else (f"error={self.error}" if self.error else f"offset={self.offset}")
        return f"Delivery({self.topic}-{self.partition}, {state})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Delivery) and other._batch is self._batch and other._index == self._index

    def __hash__(self) -> int:
        return hash((id(self._batch), self._index))

    topic = property(lambda self: self._batch.tp[0])
    partition = property(lambda self: self._batch.tp[1])
    done = property(lambda self: self._batch.done)
    error = property(lambda self: self._batch.error)
    completed_ms = property(lambda self: self._batch.completed_ms)

    @property
    def offset(self) -> int:
        base = self._batch.base_offset
        return base + self._index if base >= 0 and self._batch.error is None else -1

    @property
    def timestamp_ms(self) -> int:
        appended = self._batch.log_append_time_ms
        return appended if appended >= 0 else self._timestamp_ns // 1_000_000

    @property
    def succeeded(self) -> bool:
        return self._batch.done and self._batch.error is None

    def get(self, timeout_ms: float | None = None) -> "Delivery":
        """Wait until this record is acknowledged (its batch is sent now, linger or not);
        raise its error, or ``KafkaTimeoutError`` after ``timeout_ms``."""
        producer = self._batch.producer
        producer._wait_for(self._batch, timeout_ms)
        if self.error is not None:
            producer._state.reported.add(self)
            raise self.error
        return self


class BatchDelivery:
    """The outcome of one record batch of a ``send_arrow`` call: the ``record_count`` rows
    ``rows`` of the table (a range, or an array of row numbers when the table's rows were
    spread over partitions) got offsets ``offset .. offset + record_count - 1``, or ``error``."""

    __slots__ = ("_batch", "rows")

    def __init__(self, rows) -> None:
        self._batch = None  # set when queued
        self.rows = rows

    def __repr__(self) -> str:
        state = "pending" if not self.done else (f"error={self.error}" if self.error else f"offset={self.offset}")
        return f"BatchDelivery({self.topic}-{self.partition}, {self.record_count} records, {state})"

    topic = property(lambda self: self._batch.tp[0])
    partition = property(lambda self: self._batch.tp[1])
    record_count = property(lambda self: self._batch.record_count)
    done = property(lambda self: self._batch.done)
    error = property(lambda self: self._batch.error)
    completed_ms = property(lambda self: self._batch.completed_ms)

    @property
    def offset(self) -> int:
        return self._batch.base_offset if self._batch.error is None else -1

    @property
    def succeeded(self) -> bool:
        return self._batch.done and self._batch.error is None

    def get(self, timeout_ms: float | None = None) -> "BatchDelivery":
        producer = self._batch.producer
        producer._wait_for(self._batch, timeout_ms)
        if self.error is not None:
            producer._state.reported.add(self)
            raise self.error
        return self


class ArrowDeliveries(list):
    """The ``BatchDelivery`` of every batch one ``send_arrow`` call queued."""

    @property
    def record_count(self) -> int:
        return sum(d.record_count for d in self)

    @property
    def done(self) -> bool:
        return all(d.done for d in self)

    def get(self, timeout_ms: float | None = None) -> "ArrowDeliveries":
        """Wait for every batch; raise ``DeliveryFailed`` with the failed ones."""
        for delivery in self:
            delivery._batch.producer._wait_for(delivery._batch, timeout_ms)
        failed = [d for d in self if d.error is not None]
        if failed:
            failed[0]._batch.producer._state.reported.update(failed)
            raise DeliveryFailed(failed)
        return self


def failed_deliveries(batch) -> list:
    if batch.delivery is not None:
        return [batch.delivery]
    return [Delivery(batch, index, -1) for index in range(batch.record_count)]
