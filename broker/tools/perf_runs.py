"""One measured run of each ``pylog perf`` mode: produce, consume, end-to-end latency.

Each runner takes plain options and a ready client configuration, returns a ``RunResult`` and
leaves printing to ``broker.tools.perf``. Time comes from ``time.monotonic`` (the clients'
``SYSTEM_CLOCK`` uses the same clock, so a delivery's ``completed_ms`` is comparable).

- produce: the Arrow path (``Producer.send_arrow`` of ``batch_rows``-row chunks, the default) or
  one call per record (``--api record``, what Kafka's perf tool does): ``Producer.produce``, and
  ``Producer.send`` for the records sampled for latency (about ``_LATENCY_SAMPLES``). Latency of a
  record = acknowledgement time - the time its send call started; the Arrow path has one sample
  per encoded batch, weighted by its records.
- consume: ``Consumer.poll_arrow`` (or ``poll``) from the beginning (or the end) of every
  partition until ``messages`` records arrived or nothing came for ``timeout_ms``; the latency
  reported is the time of each poll call that returned data.
- e2e: a producer sends ``num_records`` records at ``throughput`` records/s, each value starting
  with its send time (8 bytes, big-endian monotonic nanoseconds, taken just before ``produce``, as
  Kafka's tool takes its start time); a consumer thread polls them and records, per record, the
  time ``poll_arrow`` returned it minus its send time. At a fixed rate the numbers include the
  queueing a busy application sees; ``extra["send_rate"]`` is the rate the sender really kept
  (a run whose sender fell behind its schedule did not measure the rate it was asked for).
  ``throughput`` <= 0 is Kafka's ``EndToEndLatency`` exactly: one record at a time on one
  thread, ``send(...).get()`` (the acknowledgement), then poll until that record arrives; the
  latency is that whole round.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from broker.client import Consumer, Producer
from broker.tools.perf_stats import LatencySamples, Progress, RunResult, Throttle

__all__ = ["ProduceOptions", "ConsumeOptions", "E2EOptions", "run_produce", "run_consume", "run_e2e",
           "make_payload", "warm_up_codec"]

_NS = struct.Struct(">q")


def _now_ms() -> float:
    return time.monotonic() * 1000.0


def warm_up_codec() -> None:
    """Load the Arrow codec's compiled kernels before the clock starts: the first call in a
    process loads them (hundreds of ms), which is set-up, not what a run measures."""
    import pyarrow as pa

    from broker.records.arrow import decode_batches, encode_batches

    (batch,) = encode_batches(pa.array([b"warm-up"], pa.binary()), now_ms=0)
    decode_batches(batch.data, topic="warm-up", partition=0)


def make_payload(size: int, seed: int = 7) -> bytes:
    """``size`` random uppercase letters, as Kafka's producer perf test sends."""
    rng = np.random.default_rng(seed)
    return rng.integers(65, 91, size=size, dtype=np.uint8).tobytes()


@dataclass
class ProduceOptions:
    topic: str
    num_records: int
    record_size: int
    throughput: float = -1
    api: str = "arrow"
    batch_rows: int = 10_000
    partition: int | None = None


@dataclass
class ConsumeOptions:
    topic: str
    messages: int
    api: str = "arrow"
    from_latest: bool = False
    timeout_ms: int = 10_000


@dataclass
class E2EOptions:
    topic: str
    num_records: int
    record_size: int = 100
    throughput: float = 10_000
    timeout_ms: int = 30_000


# ---------------------------------------------------------------------------------- produce


def run_produce(bootstrap: str, options: ProduceOptions, producer_options: dict, progress: Progress,
                timeline: list | None = None) -> RunResult:
    payload = make_payload(options.record_size)
    samples = LatencySamples()
    warm_up_codec()
    with Producer(bootstrap, **producer_options) as producer:
        producer.partitions_for(options.topic)  # metadata before the clock starts, as Kafka's tool
        start = time.monotonic()
        if options.api == "arrow":
            _produce_arrow(producer, options, payload, samples, progress, timeline)
        else:
            _produce_records(producer, options, payload, samples, progress, timeline)
        producer.flush()
        elapsed = time.monotonic() - start
        stats = producer.statistics()
    progress.update(options.num_records, force=True)
    progress.close()
    return RunResult(options.num_records, options.num_records * options.record_size, elapsed,
                     samples.percentiles(), {"requests": stats.get("requests_sent", 0),
                                             "retries": stats.get("retries", 0), "api": options.api},
                     samples.values())


def _produce_arrow(producer, options: ProduceOptions, payload: bytes, samples, progress, timeline) -> None:
    import pyarrow as pa

    chunk = options.batch_rows
    if options.throughput > 0:
        chunk = max(1, min(chunk, int(options.throughput // 100)))  # about 100 calls a second
    table = pa.table({"value": pa.array([payload] * chunk, pa.binary())})
    throttle = Throttle(options.throughput)
    pending: deque = deque()
    sent = 0
    while sent < options.num_records:
        rows = min(chunk, options.num_records - sent)
        started = _now_ms()
        pending.append((started, producer.send_arrow(options.topic, table.slice(0, rows),
                                                     partition=options.partition)))
        sent += rows
        _collect_batches(pending, samples, timeline, finished=False)
        throttle.wait(sent)
        progress.update(sent)
    producer.flush()
    _collect_batches(pending, samples, timeline, finished=True)


def _collect_batches(pending: deque, samples: LatencySamples, timeline, finished: bool) -> None:
    while pending and (finished or pending[0][1].done):
        started, deliveries = pending.popleft()
        for delivery in deliveries:
            samples.add(delivery.completed_ms - started, delivery.record_count)
            if timeline is not None:
                timeline.append((delivery.completed_ms, delivery.record_count))


# Records sampled for latency in ``--api record`` runs: each costs a ``send`` with its handle and
# a clock read (measured: 500,000 of 2,000,000, Kafka's cap, held the run to 0.6 M records/s).
# 100,000 still leave 100 samples beyond the 99.9th percentile.
_LATENCY_SAMPLES = 100_000


def _produce_records(producer, options: ProduceOptions, payload: bytes, samples, progress, timeline) -> None:
    stride = max(1, options.num_records // _LATENCY_SAMPLES)
    throttle = Throttle(options.throughput)
    sampled = []
    send, produce, topic, partition = producer.send, producer.produce, options.topic, options.partition
    throttled, n, i, next_progress = options.throughput > 0, options.num_records, 0, 0
    while i < n:  # per stride: one sampled record (it keeps a handle for its latency), the rest bare
        started = _now_ms()
        end = min(i + stride, n)
        sampled.append((started, send(topic, payload, partition=partition), end - i))
        if throttled:
            throttle.wait(i + 1)
            for j in range(i + 2, end + 1):
                produce(topic, payload, partition=partition)
                throttle.wait(j)
        else:
            for _ in range(end - i - 1):
                produce(topic, payload, partition=partition)
        i = end
        if i >= next_progress:
            progress.update(i)
            next_progress = i + 0x4000
    producer.flush()
    for started, delivery, weight in sampled:  # a sample stands for its stride's records
        samples.add(delivery.completed_ms - started, weight)
        if timeline is not None:
            timeline.append((delivery.completed_ms, weight))


# ---------------------------------------------------------------------------------- consume


def run_consume(bootstrap: str, options: ConsumeOptions, consumer_options: dict, progress: Progress,
                timeline: list | None = None) -> RunResult:
    import pyarrow.compute as pc

    samples = LatencySamples()
    warm_up_codec()
    count = size = 0
    consumer_options = {"auto_offset_reset": "latest" if options.from_latest else "earliest",
                        **consumer_options}
    with Consumer(bootstrap, **consumer_options) as consumer:
        consumer.assign([(options.topic, p) for p in consumer.partitions_for(options.topic)])
        consumer.seek_to_end() if options.from_latest else consumer.seek_to_beginning()
        start = last_data = time.monotonic()
        while count < options.messages:
            before = time.monotonic()
            if options.api == "arrow":
                batch = consumer.poll_arrow(timeout_ms=100, max_records=options.messages - count)
                got = batch.num_rows
                if got:
                    size += sum(pc.sum(pc.binary_length(batch.column(c))).as_py() or 0
                                for c in ("key", "value"))
            else:
                records = consumer.poll(timeout_ms=100, max_records=min(10_000, options.messages - count))
                got = len(records)
                size += sum(len(r.value or b"") + len(r.key or b"") for r in records)
            now = time.monotonic()
            if got:
                count += got
                last_data = now
                samples.add((now - before) * 1000.0)
                if timeline is not None:
                    timeline.append((now * 1000.0, got))
                progress.update(count)
            elif (now - last_data) * 1000.0 > options.timeout_ms:
                break
        elapsed = time.monotonic() - start
        stats = consumer.statistics()
    progress.update(count, force=True)
    progress.close()
    return RunResult(count, size, elapsed, samples.percentiles(),
                     {"fetches": stats.get("fetches_sent", 0), "api": options.api,
                      "timed_out": count < options.messages}, samples.values())


# ---------------------------------------------------------------------------------- end to end


def run_e2e(bootstrap: str, options: E2EOptions, producer_options: dict, consumer_options: dict,
            progress: Progress, timeline: list | None = None) -> RunResult:
    if options.record_size < 8:
        raise ValueError("--record-size must be at least 8 for end-to-end latency (the send time)")
    samples = LatencySamples()
    warm_up_codec()
    consumer = Consumer(bootstrap, **{"fetch_max_wait_ms": 100, **consumer_options})
    try:
        consumer.assign([(options.topic, p) for p in consumer.partitions_for(options.topic)])
        consumer.seek_to_end()
        for tp in consumer.assignment():
            consumer.position(tp)
        if options.throughput <= 0:
            return _e2e_one_at_a_time(bootstrap, consumer, options, producer_options, samples, progress,
                                      timeline)
        receiver = _Receiver(consumer, options.num_records, samples, timeline)
        thread = threading.Thread(target=receiver.run, name="pylog-perf-e2e-consumer", daemon=True)
        thread.start()
        start = time.monotonic()
        send_rate = _send_timestamped(bootstrap, options, producer_options, progress)
        thread.join(options.timeout_ms / 1000)
        receiver.stop = True
        thread.join()
        elapsed = time.monotonic() - start
    finally:
        consumer.close()
    progress.close()
    if receiver.error is not None:
        raise receiver.error
    return RunResult(receiver.count, receiver.count * options.record_size, elapsed, samples.percentiles(),
                     {"sent": options.num_records, "received": receiver.count,
                      "timed_out": receiver.count < options.num_records, "send_rate": send_rate},
                     samples.values())


def _send_timestamped(bootstrap: str, options: E2EOptions, producer_options: dict, progress: Progress) -> float:
    """Send at the target rate; returns the rate achieved (records/s)."""
    filler = make_payload(options.record_size - 8)
    throttle = Throttle(options.throughput)
    with Producer(bootstrap, **{"linger_ms": 0, **producer_options}) as producer:
        producer.partitions_for(options.topic)
        produce, topic, pack = producer.produce, options.topic, _NS.pack
        start = time.monotonic()
        for i in range(options.num_records):
            produce(topic, pack(time.monotonic_ns()) + filler)
            throttle.wait(i + 1)
            if not i & 0x3FF:
                progress.update(i)
        return options.num_records / max(time.monotonic() - start, 1e-9)


def _e2e_one_at_a_time(bootstrap: str, consumer: Consumer, options: E2EOptions, producer_options: dict,
                       samples: LatencySamples, progress: Progress, timeline) -> RunResult:
    """Kafka's ``EndToEndLatency``: send one record and wait for its acknowledgement, then poll
    until the consumer returns it; latency = that round. One thread, one record in flight."""
    filler = make_payload(options.record_size - 8)
    received = 0
    with Producer(bootstrap, **{"linger_ms": 0, **producer_options}) as producer:
        producer.partitions_for(options.topic)
        start = time.monotonic()
        for i in range(options.num_records):
            began = time.monotonic_ns()
            stamp = _NS.pack(began)
            producer.send(options.topic, stamp + filler).get(options.timeout_ms)
            deadline = time.monotonic() + options.timeout_ms / 1000
            found = False
            while not found:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"record {i} was acknowledged but not consumed within "
                                       f"{options.timeout_ms} ms")
                batch = consumer.poll_arrow(timeout_ms=options.timeout_ms)
                if batch.num_rows:
                    found = bool((send_times_ns(batch.column("value")) == began).any())
                    received += batch.num_rows
            now = time.monotonic_ns()
            samples.add((now - began) / 1e6)
            if timeline is not None:
                timeline.append((now / 1e6, 1))
            if not i & 0x3FF:
                progress.update(i)
        elapsed = time.monotonic() - start
    progress.close()
    return RunResult(options.num_records, options.num_records * options.record_size, elapsed,
                     samples.percentiles(), {"sent": options.num_records, "received": received,
                                             "timed_out": False, "mode": "one_at_a_time"},
                     samples.values())


class _Receiver:
    """The consumer side of e2e: latency of each record = its receive time - its send time."""

    def __init__(self, consumer: Consumer, expected: int, samples: LatencySamples, timeline) -> None:
        self.consumer = consumer
        self.expected = expected
        self.samples = samples
        self.timeline = timeline
        self.count = 0
        self.stop = False
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.count < self.expected and not self.stop:
                batch = self.consumer.poll_arrow(timeout_ms=50)
                received = time.monotonic_ns()
                if batch.num_rows:
                    sent = send_times_ns(batch.column("value"))
                    self.samples.add_many((received - sent) / 1e6)
                    self.count += batch.num_rows
                    if self.timeline is not None:
                        self.timeline.append((received / 1e6, batch.num_rows))
        except BaseException as exc:  # handed to the main thread, which raises it
            self.error = exc


def send_times_ns(values) -> np.ndarray:
    """The big-endian int64 at the start of every value of a binary column (values >= 8 bytes)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset:values.offset + len(values)]
    data = np.frombuffer(values.buffers()[2], np.uint8)
    stamps = data[offsets[:, None] + np.arange(8)]
    return np.ascontiguousarray(stamps).view(">i8").ravel().astype(np.int64)
