"""A history of client operations on unique values, and its checker (the Jepsen/Redpanda idea,
reliability.md sections 1.4 and 2).

Writers record every send as *invoked*, then *ok* (acknowledged at a partition and offset),
*fail* (definitely not written: the client says so) or *info* (indefinite: a timeout, a lost
connection); readers record every record they consume (partition, offset, value). Values are
unique per send, so a partition's offsets are the version order and a value's offsets tell its
fate. ``check`` reports, per the anomalies of Jepsen's Kafka checker and Redpanda's consistency
checker:

- ``lost``: acknowledged, yet never read though the final read covered the whole partition;
- ``duplicated``: one value at two offsets (read twice, or acked at one offset and read at
  another);
- ``inconsistent_offsets``: one offset holding two values (acked one, read another; or read
  differently twice);
- ``reordered``: two acknowledged sends of one writer to one partition whose offsets are in the
  opposite order of the sends (an idempotent producer keeps order per partition);
- ``unexpected``: a value read that nobody sent;
- ``aborted_read`` (G1a): a value read whose send definitely failed;
- ``nonmonotonic_read``: a reader's offsets in one partition not strictly increasing.

Thread-safe: confluent-kafka calls delivery callbacks from ``poll``/``flush`` in the producing
thread, our consumer runs in another.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

__all__ = ["History", "Report"]


@dataclass
class _Send:
    value: str
    writer: str
    partition: int
    sequence: int  # invocation order of this writer
    status: str = "invoke"  # invoke | ok | fail | info
    offset: int = -1
    error: str | None = None
    invoked_s: float = 0.0
    completed_s: float = 0.0


@dataclass
class Report:
    sends: int = 0
    acked: int = 0
    failed: int = 0
    indefinite: int = 0
    reads: int = 0
    lost: list = field(default_factory=list)
    duplicated: list = field(default_factory=list)
    inconsistent_offsets: list = field(default_factory=list)
    reordered: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)
    aborted_read: list = field(default_factory=list)
    nonmonotonic_read: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)  # error text -> count, of failed/indefinite sends

    ANOMALIES = ("lost", "duplicated", "inconsistent_offsets", "reordered", "unexpected",
                 "aborted_read", "nonmonotonic_read")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.ANOMALIES)

    def summary(self) -> str:
        parts = [f"sends={self.sends} acked={self.acked} failed={self.failed} "
                 f"indefinite={self.indefinite} reads={self.reads}"]
        for name in self.ANOMALIES:
            found = getattr(self, name)
            if found:
                parts.append(f"{name}={len(found)} e.g. {found[:5]}")
        if self.errors:
            parts.append(f"send errors: {dict(list(self.errors.items())[:5])}")
        return "; ".join(parts)


class History:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sends: dict[str, _Send] = {}
        self._sequences: dict[str, int] = defaultdict(int)
        self._reads: list[tuple[str, int, int, str]] = []  # (reader, partition, offset, value)

    # -------------------------------------------------------------------------- writers

    def invoke(self, writer: str, value: str, partition: int) -> None:
        with self._lock:
            assert value not in self._sends, f"values must be unique: {value}"
            sequence = self._sequences[writer]
            self._sequences[writer] += 1
            self._sends[value] = _Send(value, writer, partition, sequence, invoked_s=time.monotonic())

    def ok(self, value: str, partition: int, offset: int | None) -> None:
        """Acknowledged; ``offset`` None or -1 when the broker did not say (a duplicate answered
        DUPLICATE_SEQUENCE_NUMBER): the value must then be read exactly once, anywhere."""
        self._complete(value, "ok", partition=partition, offset=-1 if offset is None else offset)

    def fail(self, value: str, error: str) -> None:
        self._complete(value, "fail", error=error)

    def info(self, value: str, error: str) -> None:
        self._complete(value, "info", error=error)

    def _complete(self, value: str, status: str, partition: int | None = None, offset: int = -1,
                  error: str | None = None) -> None:
        with self._lock:
            send = self._sends[value]
            assert send.status == "invoke", f"{value} completed twice ({send.status}, then {status})"
            send.status, send.offset, send.error = status, offset, error
            send.completed_s = time.monotonic()
            if partition is not None:
                send.partition = partition

    def pending(self) -> int:
        with self._lock:
            return sum(1 for s in self._sends.values() if s.status == "invoke")

    def acked_without_offset(self) -> int:
        with self._lock:
            return sum(1 for s in self._sends.values() if s.status == "ok" and s.offset < 0)

    def highest_acked_offsets(self) -> dict[int, int]:
        with self._lock:
            out: dict[int, int] = {}
            for send in self._sends.values():
                if send.status == "ok" and send.offset >= 0:
                    out[send.partition] = max(out.get(send.partition, -1), send.offset)
            return out

    def acked(self) -> int:
        with self._lock:
            return sum(1 for s in self._sends.values() if s.status == "ok")

    # -------------------------------------------------------------------------- readers

    def read(self, reader: str, partition: int, offset: int, value: str) -> None:
        with self._lock:
            self._reads.append((reader, partition, offset, value))

    # -------------------------------------------------------------------------- checker

    def check(self) -> Report:
        with self._lock:
            sends = dict(self._sends)
            reads = list(self._reads)
        report = Report(sends=len(sends), reads=len(reads))
        for send in sends.values():
            if send.status == "ok":
                report.acked += 1
            elif send.status == "fail":
                report.failed += 1
            elif send.status in ("info", "invoke"):
                report.indefinite += 1
            if send.error:
                report.errors[send.error] = report.errors.get(send.error, 0) + 1
        _check_reads(report, sends, reads)
        _check_order(report, sends)
        return report


def _check_reads(report: Report, sends: dict[str, _Send], reads) -> None:
    at_offset: dict[tuple[int, int], str] = {}
    offsets_of: dict[str, set[tuple[int, int]]] = defaultdict(set)
    last_by_reader: dict[tuple[str, int], int] = {}
    for reader, partition, offset, value in reads:
        key = (partition, offset)
        seen = at_offset.setdefault(key, value)
        if seen != value:
            report.inconsistent_offsets.append((partition, offset, seen, value))
        offsets_of[value].add(key)
        previous = last_by_reader.get((reader, partition))
        if previous is not None and offset <= previous:
            report.nonmonotonic_read.append((reader, partition, previous, offset))
        last_by_reader[(reader, partition)] = offset
        send = sends.get(value)
        if send is None:
            report.unexpected.append((partition, offset, value))
        elif send.status == "fail":
            report.aborted_read.append((partition, offset, value, send.error))
    for value, keys in offsets_of.items():
        if len(keys) > 1:
            report.duplicated.append((value, sorted(keys)))
    for send in sends.values():
        if send.status != "ok":
            continue
        key = (send.partition, send.offset)
        read_here = at_offset.get(key) if send.offset >= 0 else None
        if read_here is not None and read_here != send.value:
            report.inconsistent_offsets.append((send.partition, send.offset, send.value, read_here))
        if send.value not in offsets_of:
            report.lost.append((send.partition, send.offset, send.value))
        elif send.offset >= 0 and key not in offsets_of[send.value]:
            report.duplicated.append((send.value, [key, *sorted(offsets_of[send.value])]))


def _check_order(report: Report, sends: dict[str, _Send]) -> None:
    by_stream: dict[tuple[str, int], list[_Send]] = defaultdict(list)
    for send in sends.values():
        if send.status == "ok" and send.offset >= 0:
            by_stream[(send.writer, send.partition)].append(send)
    for (writer, partition), stream in by_stream.items():
        stream.sort(key=lambda s: s.sequence)
        for earlier, later in zip(stream, stream[1:]):
            if later.offset <= earlier.offset:
                report.reordered.append((writer, partition, earlier.value, earlier.offset,
                                         later.value, later.offset))


# ------------------------------------------------------------------------------- workloads


class ProducerWorkload:
    """An idempotent acks=all confluent-kafka (librdkafka) producer in a thread, sending unique
    values round-robin over the partitions at about ``rate_per_s``, recording every send and
    its outcome in ``history``. Retries are librdkafka's (idempotence keeps them exact and
    ordered); only a delivery error that survives them reaches the history, as *info*."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History,
                 writer: str = "w", rate_per_s: float = 400.0, **config) -> None:
        self.topic, self.partitions, self.history, self.writer = topic, partitions, history, writer
        self.rate_per_s = rate_per_s
        self.config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                       "linger.ms": 5, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
                       "topic.metadata.refresh.interval.ms": 2_000, **config}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{writer}", daemon=True)
        self.sent = 0
        self.unflushed = -1

    def start(self) -> "ProducerWorkload":
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the producer did not finish flushing"

    def wait_for_acks(self, count: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.history.acked() < count:
            assert time.monotonic() < deadline, f"only {self.history.acked()} of {count} acks"
            time.sleep(0.05)

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(self.config)
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                value = f"{self.writer}-{self.sent}"
                partition = self.sent % self.partitions
                self.history.invoke(self.writer, value, partition)
                self._produce(producer, value, partition)
                self.sent += 1
                producer.poll(0)
                ahead_s = self.sent / self.rate_per_s - (time.monotonic() - started)
                if ahead_s > 0:
                    time.sleep(ahead_s)
        finally:
            self.unflushed = producer.flush(120)

    def _produce(self, producer, value: str, partition: int) -> None:
        history = self.history

        def delivered(err, msg, value=value) -> None:
            if err is None:
                history.ok(value, msg.partition(), msg.offset())
            else:
                history.info(value, f"{err.name()}: {err.str()}")

        while True:
            try:
                producer.produce(self.topic, value=value.encode(), partition=partition,
                                 on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.05)


def read_all(bootstrap: str, topic: str, partitions: int, history: History, reader: str = "final",
             timeout_s: float = 60.0) -> dict[int, int]:
    """Read every partition from offset 0 to its high watermark (librdkafka consumer,
    read_committed), recording each record; returns the high watermarks."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"history-{reader}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})

    def high_watermark(partition: int) -> int:
        """Retried: a leadership may be moving (a preferred-leader election after a heal)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)[1]
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    try:
        # At least past every acknowledged offset: a new leader's high watermark may lag its
        # predecessor's for a moment (Kafka's too), and a consumer then waits for it.
        acked = history.highest_acked_offsets()
        ends = {p: max(high_watermark(p), acked.get(p, -1) + 1) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        positions = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while True:
            while any(positions[p] < ends[p] for p in range(partitions)):
                assert time.monotonic() < deadline, f"read {positions} of {ends}"
                for message in consumer.consume(10_000, 0.5):
                    if message.error() is not None:
                        continue  # e.g. partition EOF; a real loss shows as a missing value
                    history.read(reader, message.partition(), message.offset(), message.value().decode())
                    positions[message.partition()] = message.offset() + 1
            latest = {p: max(ends[p], high_watermark(p)) for p in range(partitions)}
            if latest == ends:
                return ends
            ends = latest
    finally:
        consumer.close()
