"""``Producer``: a simple, correct, blocking Kafka producer.

Shape (Java ``KafkaProducer`` without the I/O thread): ``send`` puts a record into the
accumulator's batch for its partition and returns a ``Delivery`` handle; batches go out when
full or older than ``linger_ms`` (checked on each ``send``), and ``flush`` sends everything and
waits for every answer. There is no background thread: I/O happens inside ``send`` (when a batch
is ready or the buffer is over ``buffer_bytes_max``), ``flush``, ``Delivery.get`` and ``close``.

One round (``_run_once``): take the ready head batches (at most one per partition, see
``accumulator``), group them by leader, send one Produce request per leader (all leaders in
parallel), then read every answer. Per partition the answer is: success (offsets are the base
offset + index), a retriable error (the same batch, same bytes, goes again after
``retry_backoff_ms``; NOT_LEADER_OR_FOLLOWER & co. refresh metadata first), or a final error
(every record of the batch gets it). ``retries`` and ``delivery_timeout_ms`` bound the retries.

Idempotence (KIP-98, reference section 4): InitProducerId (no transactional id) to any broker
gives a producer id and epoch; each partition's batches carry consecutive base sequences,
assigned when the batch is first encoded and kept through retries, so a retry of a batch the
broker had already written is answered as a duplicate with the original offset instead of being
written twice. DUPLICATE_SEQUENCE_NUMBER (46) counts as success with an unknown offset, as both
reference clients do. When a batch that holds sequence numbers fails for good, whether the
broker wrote it is unknown, so later batches cannot continue its sequence: the producer takes a
fresh producer id (sequences restart at 0) before the next batch, which is always safe.
Errors are never swallowed: each failed record's ``Delivery.error`` is set, and the next
``flush`` raises ``DeliveryFailed`` with all failures not reported yet.
"""

from __future__ import annotations

import random
from collections import defaultdict

from broker.client.accumulator import PendingRecord, ProducerBatch, RecordAccumulator, record_size_max
from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.errors import (
    DeliveryFailed,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from broker.client.metadata import Cluster
from broker.client.partitioner import StickyPartitioner, partition_for_key
from broker.records import Compression, Record, encode_batch
from broker.records.compression import check_supported
from broker.wire import ApiKey, ErrorCode

__all__ = ["Producer", "Delivery", "parse_acks"]

_SEQUENCE_MOD = 1 << 31
_RESPONSE_MARGIN_MS = 1000  # the broker answers REQUEST_TIMED_OUT at timeout_ms; wait a bit longer


def parse_acks(acks) -> int:
    """-1/"all", 0 or 1 (Kafka's ``acks``)."""
    if isinstance(acks, str):
        acks = acks.strip().lower()
        acks = -1 if acks == "all" else acks
    try:
        value = int(acks)
    except (TypeError, ValueError):
        value = None
    if value not in (-1, 0, 1):
        raise ValueError(f"invalid acks {acks!r}: use all (-1), 0 or 1")
    return value


def _parse_compression(compression) -> Compression:
    codec = Compression.from_name(compression) if isinstance(compression, str) else Compression(compression)
    try:
        return check_supported(codec)
    except Exception as exc:  # the records package's typed error, as a config mistake
        raise ValueError(str(exc)) from None


class Delivery:
    """The outcome of one ``send``: ``offset`` (and ``timestamp_ms``) once acknowledged, or
    ``error``. ``offset`` is -1 for acks=0 and for duplicates the broker did not re-number."""

    __slots__ = ("topic", "partition", "offset", "timestamp_ms", "error", "done", "_producer", "_reported")

    def __init__(self, producer: "Producer", topic: str, partition: int, timestamp_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        self.timestamp_ms = timestamp_ms
        self.offset = -1
        self.error: KafkaError | None = None
        self.done = False
        self._producer = producer
        self._reported = False

    def __repr__(self) -> str:
        state = "pending" if not self.done else (f"error={self.error}" if self.error else f"offset={self.offset}")
        return f"Delivery({self.topic}-{self.partition}, {state})"

    @property
    def succeeded(self) -> bool:
        return self.done and self.error is None

    def get(self) -> "Delivery":
        """Wait until this record is acknowledged (sending what is buffered); raise its error."""
        if not self.done:
            self._producer._drive_until_done(self)
        assert self.done, "the producer stopped driving before the record finished"
        if self.error is not None:
            self._reported = True
            raise self.error
        return self


class Producer:
    """Not thread-safe: one owner. ``close()`` (or ``with``) flushes and closes connections."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        acks: int | str = -1,
        compression: str | int = "none",
        enable_idempotence: bool = True,
        linger_ms: int = 5,
        batch_bytes_max: int = 16_384,
        request_bytes_max: int = 1_048_576,
        buffer_bytes_max: int = 33_554_432,
        retries: int = 2_147_483_647,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int | None = None,
        max_block_ms: int = 60_000,
        client_id: str | None = None,
        config: ClientConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        self._acks = parse_acks(acks)
        if enable_idempotence and self._acks != -1:
            raise ValueError("enable_idempotence requires acks=all (-1); "
                             "pass enable_idempotence=False for acks 0 or 1")
        if retries < 0 or linger_ms < 0 or delivery_timeout_ms <= 0 or buffer_bytes_max <= 0:
            raise ValueError("retries and linger_ms must be >= 0, delivery_timeout_ms and "
                             "buffer_bytes_max > 0")
        if request_bytes_max <= 0:
            raise ValueError(f"request_bytes_max must be positive, got {request_bytes_max}")
        self._compression = _parse_compression(compression)
        config = config or ClientConfig()
        if request_timeout_ms is not None:
            config = config.with_(request_timeout_ms=request_timeout_ms)
        if client_id is not None:
            config = config.with_(client_id=client_id)
        self._cluster = cluster or Cluster(bootstrap_servers, config, clock, rng)
        self._config = self._cluster.config
        self._clock = self._cluster.clock
        self._idempotent = enable_idempotence
        self._retries = retries
        self._delivery_timeout_ms = delivery_timeout_ms
        self._request_bytes_max = request_bytes_max
        self._buffer_bytes_max = buffer_bytes_max
        self._max_block_ms = max_block_ms
        self._accumulator = RecordAccumulator(batch_bytes_max, linger_ms)
        self._sticky = StickyPartitioner(rng)
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._unreported: list[Delivery] = []
        self._closed = False
        self._stats = defaultdict(int)

    # ------------------------------------------------------------------ public API

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    def statistics(self) -> dict:
        return dict(self._stats, bytes_buffered=self._accumulator.bytes_buffered,
                    records_buffered=self._accumulator.records_buffered,
                    buffer_bytes_max=self._buffer_bytes_max)

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers=None,
        timestamp_ms: int | None = None,
    ) -> Delivery:
        """Queue one record; returns its ``Delivery``. Raises at once for what can never
        succeed: a closed producer, wrong types, an unknown topic or partition, a record larger
        than ``request_bytes_max`` (MESSAGE_TOO_LARGE)."""
        assert not self._closed, "send() on a closed Producer"
        key, value = _as_bytes(key, "key"), _as_bytes(value, "value")
        headers = _as_headers(headers)
        num_partitions = len(self._cluster.topic(topic, wait_ms=self._max_block_ms).partitions)
        size = record_size_max(key, value, headers)
        if size + 61 > self._request_bytes_max:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"record of about {size} bytes is larger than request_bytes_max "
                             f"({self._request_bytes_max})")
        partition = self._choose_partition(topic, key, partition, num_partitions, size)
        timestamp = self._clock.time_ms() if timestamp_ms is None else int(timestamp_ms)
        delivery = Delivery(self, topic, partition, timestamp)
        record = PendingRecord(key, value, headers, timestamp, delivery)
        self._accumulator.append((topic, partition), record, size, self._clock.monotonic_ms())
        self._stats["records_queued"] += 1
        self._run_once(force=False)
        while self._accumulator.bytes_buffered > self._buffer_bytes_max:
            self._step(force=True)  # back-pressure: the caller waits while the buffer drains
        return delivery

    def flush(self) -> None:
        """Send everything buffered and wait for every answer. Raises ``DeliveryFailed`` with
        the records that failed since the last flush (each also has ``Delivery.error``)."""
        while not self._accumulator.empty:
            self._step(force=True)
        failures = [d for d in self._unreported if not d._reported]
        self._unreported.clear()
        for d in failures:
            d._reported = True
        if failures:
            raise DeliveryFailed(failures)

    def close(self, flush: bool = True) -> None:
        """Flush (unless ``flush=False``: buffered records are then dropped unsent and get a
        KafkaError), then close every connection, even if the flush raised. Idempotent."""
        if self._closed:
            return
        try:
            if flush:
                self.flush()
            else:
                self._abandon_buffered()
        finally:
            self._closed = True
            self._cluster.close()

    def _abandon_buffered(self) -> None:
        error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer closed before the record was sent")
        for batch in list(self._accumulator.batches()):
            self._accumulator.remove(batch)
            for record in batch.records:
                record.delivery.error = error
                record.delivery.done = True

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ partitioning

    def _choose_partition(self, topic: str, key, partition, num_partitions: int, size: int) -> int:
        if partition is not None:
            if not 0 <= partition < num_partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic!r} has no partition {partition} "
                                 f"({num_partitions} partitions)")
            return partition
        if key is not None:
            return partition_for_key(key, num_partitions)
        current = self._sticky.partition(topic, num_partitions)
        tp = (topic, current)
        if self._accumulator.has_batches(tp) and self._accumulator.would_open_batch(tp, size):
            return self._sticky.next_partition(topic, num_partitions)  # KIP-480: batch is full, move on
        return current

    # ------------------------------------------------------------------ the send loop

    def _drive_until_done(self, delivery: Delivery) -> None:
        while not delivery.done:
            self._step(force=True)

    def _step(self, force: bool) -> None:
        """One round; if nothing could be sent, sleep until the next batch becomes ready."""
        if self._run_once(force):
            return
        now = self._clock.monotonic_ms()
        wake = self._accumulator.next_wakeup_ms(now, force)
        if wake is not None:
            self._clock.sleep_ms(max(wake - now, 1))

    def _run_once(self, force: bool) -> bool:
        """Send the ready batches and read every answer; True if a request went out."""
        now = self._clock.monotonic_ms()
        self._expire(now)
        ready = self._accumulator.ready(now, force)
        if not ready:
            return False
        if self._idempotent and self._producer_id < 0 and not self._init_producer_id(ready):
            return False
        by_leader = self._group_by_leader(ready, now)
        waiting = []
        for node, batches in by_leader.items():
            sent = self._send_to(node, batches)
            if sent is not None:
                waiting.append(sent)
        for conn, batches in waiting:
            try:
                response = conn.receive()
            except KafkaError as exc:
                self._cluster.invalidate()
                self._retry_or_fail(batches, exc)
                continue
            self._handle_response(batches, response)
        return bool(by_leader)

    def _group_by_leader(self, ready: list[ProducerBatch], now: float) -> dict[int, list[ProducerBatch]]:
        by_leader: dict[int, list[ProducerBatch]] = defaultdict(list)
        for batch in ready:
            topic, partition = batch.tp
            try:
                leader = self._cluster.leader_for(topic, partition)
            except KafkaError as exc:
                leader, error = -1, exc
            else:
                error = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
            if leader < 0:
                self._cluster.invalidate(topic)
                batch.last_error = error
                batch.retry_at_ms = now + self._config.retry_backoff_ms  # waits; expires by delivery timeout
                continue
            by_leader[leader].append(batch)
        return by_leader

    def _send_to(self, node: int, batches: list[ProducerBatch]):
        """Encode and send one Produce request to ``node``; returns (connection, batches) when an
        answer is expected. Batches past ``request_bytes_max`` wait for the next round."""
        try:
            conn = self._cluster.connection(node)
            version = conn.version_for(ApiKey.PRODUCE)
        except KafkaError as exc:
            self._retry_or_fail(batches, exc)
            return None
        chosen, total = [], 0
        for batch in batches:
            payload = self._encode(batch)
            if chosen and total + len(payload) > self._request_bytes_max:
                break
            chosen.append(batch)
            total += len(payload)
        request = self._produce_request(chosen)
        timeout = self._config.request_timeout_ms + _RESPONSE_MARGIN_MS
        try:
            conn.send(ApiKey.PRODUCE, request, version, expect_response=self._acks != 0, timeout_ms=timeout)
        except KafkaError as exc:
            self._retry_or_fail(chosen, exc)
            return None
        self._stats["requests_sent"] += 1
        self._stats["batches_sent"] += len(chosen)
        for batch in chosen:
            batch.in_flight = True
        if self._acks == 0:
            for batch in chosen:
                self._succeed(batch, -1, -1)
            return None
        return conn, chosen

    def _encode(self, batch: ProducerBatch) -> bytes:
        if batch.payload is not None:
            return batch.payload  # a retry: the very same bytes, same sequence numbers
        if self._idempotent:
            batch.producer_id, batch.producer_epoch = self._producer_id, self._producer_epoch
            batch.base_sequence = self._sequences.get(batch.tp, 0)
            self._sequences[batch.tp] = (batch.base_sequence + batch.record_count) % _SEQUENCE_MOD
        records = [Record(i, r.timestamp_ms, r.key, r.value, r.headers) for i, r in enumerate(batch.records)]
        batch.payload = encode_batch(
            records,
            compression=self._compression,
            base_offset=0,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
        )
        return batch.payload

    def _produce_request(self, batches: list[ProducerBatch]) -> dict:
        topics: dict[str, list[dict]] = defaultdict(list)
        for batch in batches:
            topics[batch.tp[0]].append({"index": batch.tp[1], "records": batch.payload})
        return {
            "transactional_id": None,
            "acks": self._acks,
            "timeout_ms": self._config.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in topics.items()],
        }

    def _handle_response(self, batches: list[ProducerBatch], response) -> None:
        answers = {
            (topic.name, p.index): p
            for topic in response.responses
            for p in topic.partition_responses
        }
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                self._fail(batch, KafkaProtocolError(f"Produce response has no answer for {_tp(batch.tp)}"))
                continue
            code = answer.error_code
            if code == ErrorCode.NONE:
                self._succeed(batch, answer.base_offset, answer.log_append_time_ms)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._succeed(batch, -1, -1)  # written before; the broker no longer knows where
            else:
                self._cluster.on_partition_error(batch.tp[0], code)
                self._retry_or_fail([batch], KafkaError(code, _produce_error_text(batch, answer)))

    # ------------------------------------------------------------------ outcomes

    def _succeed(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        self._accumulator.remove(batch)
        for index, record in enumerate(batch.records):
            delivery = record.delivery
            delivery.offset = base_offset + index if base_offset >= 0 else -1
            if log_append_time_ms is not None and log_append_time_ms >= 0:
                delivery.timestamp_ms = log_append_time_ms
            delivery.done = True
        self._stats["records_acknowledged"] += batch.record_count

    def _retry_or_fail(self, batches: list[ProducerBatch], error: KafkaError) -> None:
        now = self._clock.monotonic_ms()
        for batch in batches:
            batch.in_flight = False
            batch.attempts += 1
            batch.last_error = error
            expired = now - batch.created_ms >= self._delivery_timeout_ms
            if error.retriable and batch.attempts <= self._retries and not expired:
                batch.retry_at_ms = now + self._config.retry_backoff_ms
                self._stats["retries"] += 1
            else:
                self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        self._accumulator.remove(batch)
        if batch.payload is not None and self._idempotent:
            # The broker may or may not hold this batch: its sequence numbers cannot be reused
            # or skipped, so start over with a fresh producer id (sequences from 0).
            self._producer_id, self._producer_epoch = -1, -1
            self._sequences.clear()
        for record in batch.records:
            record.delivery.error = error
            record.delivery.done = True
            self._unreported.append(record.delivery)
        self._stats["records_failed"] += batch.record_count

    def _expire(self, now: float) -> None:
        """Fail batches older than ``delivery_timeout_ms`` that are not in flight."""
        expired = [b for b in self._accumulator.batches()
                   if not b.in_flight and now - b.created_ms >= self._delivery_timeout_ms]
        for batch in expired:
            cause = f": last error {batch.last_error}" if batch.last_error else ""
            self._fail(batch, KafkaTimeoutError(
                f"{_tp(batch.tp)}: {batch.record_count} record(s) not delivered within "
                f"delivery_timeout_ms ({self._delivery_timeout_ms}){cause}"))

    def _init_producer_id(self, ready: list[ProducerBatch]) -> bool:
        """InitProducerId without a transactional id; on failure the ready batches retry (or
        fail, if the error is final) and False is returned."""
        try:
            conn = self._cluster.any_connection()
            version = conn.version_for(ApiKey.INIT_PRODUCER_ID)
            response = conn.request(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None,
                "transaction_timeout_ms": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            }, version)
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(response.error_code, "InitProducerId failed")
        except KafkaError as exc:
            self._retry_or_fail(ready, exc)
            return False
        self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
        self._sequences.clear()
        self._stats["producer_ids"] += 1
        return True


def _tp(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def _produce_error_text(batch: ProducerBatch, answer) -> str:
    parts = [f"{_tp(batch.tp)}"]
    if answer.error_message:
        parts.append(answer.error_message)
    for err in answer.record_errors or ():
        parts.append(f"record {err.batch_index}: {err.batch_index_error_message or 'invalid'}")
    if len(parts) == 1:
        parts.append(KafkaError(answer.error_code).message)
    return ": ".join(parts)


def _as_bytes(value, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"record {what} must be bytes or None, not {type(value).__name__}")


def _as_headers(headers) -> tuple:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for hkey, hvalue in items:
        if not isinstance(hkey, str):
            raise TypeError(f"header key must be str, not {type(hkey).__name__}")
        out.append((hkey, _as_bytes(hvalue, "header value")))
    return tuple(out)
