"""``Producer``: a Kafka producer with a background I/O thread, batching, pipelining and
idempotence, for single records (``send`` with a handle each, ``produce`` in confluent-kafka's
shape with an optional callback) and Arrow tables (``send_arrow``).

Threading model (``sender`` has the details): the methods here may be called from any thread;
they append to the accumulator under the producer's lock and wait on its condition. One I/O
thread, started on first use, owns the timers, metadata and producer id, and sends, retries and
completes batches; a thread that fills a batch sends it itself when no other thread is doing
I/O at that moment (this avoids a GIL convoy). ``close()`` (or ``with``) flushes and stops the
I/O thread.

Bounds (Java producer config in brackets): ``batch_bytes_max`` [batch.size] caps a batch built
from ``send`` (an Arrow batch is cut at the same size by ``encode_batches``; it is lowered to
``request_bytes_max`` if larger, so that a batch fits a request); ``linger_ms``
[linger.ms] is how long a batch that is not full waits for more records; ``buffer_bytes_max``
[buffer.memory] caps the bytes queued and in flight: ``send``/``send_arrow`` block while it is
full, at most ``max_block_ms`` [max.block.ms], then raise ``KafkaTimeoutError`` (the record
is not queued); ``request_bytes_max`` [max.request.size] caps one Produce request and one record;
``max_in_flight_requests`` [max.in.flight.requests.per.connection] caps pipelined requests per
broker (at most 5 with idempotence: the broker remembers the last 5 batches per producer, which
is what makes a retry of any of them a recognised duplicate); ``retries`` and
``delivery_timeout_ms`` [delivery.timeout.ms] bound the retries of a batch.

Idempotence is on by default (as in Kafka 3.0+) and needs acks=all; when it is not set
explicitly and acks is 0 or 1 it is off (KIP-679), when it is set with acks 0 or 1 that is a
configuration error.

Transactions: with ``transactional_id`` the producer is transactional (Kafka's
``init_transactions``/``begin_transaction``/``send_offsets_to_transaction``/``commit_transaction``/
``abort_transaction``, plus ``prepare_transaction``/``complete_transaction`` for a transaction
completed later by another process); ``broker.client.transactions`` has the semantics. Call the
transactional methods from one thread at a time (as Java); they hold the I/O lock during their
coordinator round trips, so the I/O thread pauses meanwhile.

Errors are never swallowed: each failed record's ``Delivery.error`` (or ``BatchDelivery.error``)
is set, ``Delivery.get`` raises it, a ``produce`` record's ``on_delivery`` callback gets it, and
the next ``flush``/``close`` raises ``DeliveryFailed`` with every failure not reported by one of
those yet.
"""

from __future__ import annotations

import random
import time

from broker.client.accumulator import QUEUED, RecordAccumulator, append_key, record_size_max
from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock, SystemClock
from broker.client.delivery import ArrowDeliveries, BatchDelivery, Delivery, failed_deliveries
from broker.client.errors import DeliveryFailed, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster
from broker.client.partitioner import StickyPartitioner, partition_for_key
from broker.client.properties import producer_options_from_properties
from broker.client.sender import ProducerSettings, ProducerState, Sender
from broker.client.producer_arrow import ArrowSend
from broker.client.transactions import PreparedTransaction, TransactionCalls, Transactions
from broker.records import Compression
from broker.records.compression import check_supported
from broker.wire import ErrorCode

__all__ = ["Producer", "Delivery", "BatchDelivery", "ArrowDeliveries", "PreparedTransaction", "parse_acks",
           "producer_options_from_properties"]

_IDEMPOTENT_IN_FLIGHT_MAX = 5
# At linger_ms=0 the thread that opens a batch sends it itself (``Sender.help``) only while its
# partition has fewer batches than this in flight; otherwise the batch takes the records that
# follow until the next answer, whose turn sends it (that answer is certain: the batches in
# flight are answered, time out or fail their connection, and each of those ends in a turn
# that collects). Measured in ``pylog perf e2e`` at 10,000 records/s on two shared cores:
# sending every opened batch at once made one-record requests up to max_in_flight (5), and
# the broker's and client's per-request CPU then delayed every record behind them.
_HELP_IN_FLIGHT_MAX = 2


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


class Producer(ArrowSend, TransactionCalls):
    """Thread-safe. ``close()`` (or ``with``) flushes, stops the I/O thread and closes sockets."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        acks: int | str = -1,
        compression: str | int = "none",
        enable_idempotence: bool | None = None,
        linger_ms: int = 5,
        batch_bytes_max: int = 16_384,
        request_bytes_max: int = 1_048_576,
        buffer_bytes_max: int = 33_554_432,
        retries: int = 2_147_483_647,
        delivery_timeout_ms: int = 120_000,
        request_timeout_ms: int | None = None,
        max_block_ms: int = 60_000,
        max_in_flight_requests: int = 5,
        client_id: str | None = None,
        config: ClientConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        cluster: Cluster | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        self._acks = parse_acks(acks)
        idempotent = self._acks == -1 if enable_idempotence is None else bool(enable_idempotence)
        if transactional_id is not None and not idempotent:
            raise ValueError("transactional_id requires idempotence (enable_idempotence and acks=all)")
        if idempotent and self._acks != -1:
            raise ValueError("enable_idempotence requires acks=all (-1); "
                             "pass enable_idempotence=False for acks 0 or 1")
        if idempotent and max_in_flight_requests > _IDEMPOTENT_IN_FLIGHT_MAX:
            raise ValueError(f"max_in_flight_requests must be <= {_IDEMPOTENT_IN_FLIGHT_MAX} with "
                             f"idempotence, got {max_in_flight_requests}")
        if retries < 0 or linger_ms < 0 or delivery_timeout_ms <= 0 or buffer_bytes_max <= 0 \
                or max_block_ms < 0 or max_in_flight_requests <= 0:
            raise ValueError("retries, linger_ms and max_block_ms must be >= 0; delivery_timeout_ms, "
                             "buffer_bytes_max and max_in_flight_requests > 0")
        if request_bytes_max <= 0:
            raise ValueError(f"request_bytes_max must be positive, got {request_bytes_max}")
        compression = _parse_compression(compression)
        config = config or ClientConfig()
        if request_timeout_ms is not None:
            config = config.with_(request_timeout_ms=request_timeout_ms)
        if client_id is not None:
            config = config.with_(client_id=client_id)
        if config.inflight_requests_max < max_in_flight_requests:
            config = config.with_(inflight_requests_max=max_in_flight_requests)
        self._cluster = cluster or Cluster(bootstrap_servers, config, clock, rng)
        self._clock = self._cluster.clock
        self._settings = ProducerSettings(
            acks=self._acks, idempotent=idempotent, compression=int(compression), retries=retries,
            delivery_timeout_ms=delivery_timeout_ms, request_bytes_max=request_bytes_max,
            max_in_flight=max_in_flight_requests, config=self._cluster.config,
            transactional_id=transactional_id)
        self._compression = compression
        # A batch must fit one request: a larger one would be refused whole, and retried until
        # delivery_timeout_ms (Java splits it after the broker's MESSAGE_TOO_LARGE; capping it
        # here means that never happens).
        batch_bytes_max = min(batch_bytes_max, request_bytes_max)
        self._batch_bytes_max = batch_bytes_max
        self._request_bytes_max = request_bytes_max
        self._buffer_bytes_max = buffer_bytes_max
        self._max_block_ms = max_block_ms
        self._state = ProducerState(RecordAccumulator(batch_bytes_max, linger_ms, owner=self,
                                                        reserve_bytes=buffer_bytes_max))
        self._acc = self._state.accumulator
        self._linger_ms = linger_ms
        self._sticky = StickyPartitioner(rng)
        self._sender = Sender(self._cluster, self._state, self._settings)
        self._sender_started = False
        self._monotonic_ms = self._clock.monotonic_ms
        # Wall-clock ns for record timestamps: time.time_ns itself for the system clock, so send()
        # reads the time without a Python-level call; an injected clock is asked in ms.
        clock = self._clock
        self._wall_ns = time.time_ns if isinstance(clock, SystemClock) else lambda: clock.time_ms() * 1_000_000
        self._lock = self._state.lock
        self._lock_acquire, self._lock_release = self._lock.acquire, self._lock.release
        self._partition_counts = self._state.partitions  # topic -> count, filled by the I/O thread
        self._open_batches = self._acc.open_batches  # (topic, partition) -> its open batch
        self._sticky_current = self._sticky.current  # topic -> keyless records' partition
        self._record_bytes_max = min(request_bytes_max, buffer_bytes_max)
        self._closed = False
        self._txn = None if transactional_id is None else \
            Transactions(self, transactional_id, transaction_timeout_ms)

    # ------------------------------------------------------------------ properties

    @property
    def producer_id(self) -> int:
        return self._sender.producer_id

    @property
    def producer_epoch(self) -> int:
        return self._sender.producer_epoch

    @property
    def idempotent(self) -> bool:
        return self._settings.idempotent

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waits for its metadata up to ``max_block_ms``)."""
        return list(range(self._state.partitions.get(topic) or self._partition_count(topic)))

    def statistics(self) -> dict:
        with self._state.lock:
            return dict(self._state.stats, bytes_buffered=self._acc.bytes_buffered,
                        records_buffered=self._acc.records_buffered,
                        batches_buffered=self._acc.batches_buffered,
                        buffer_bytes_max=self._buffer_bytes_max,
                        max_in_flight_requests=self._settings.max_in_flight)

    # ------------------------------------------------------------------ single records

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
        than ``request_bytes_max`` (MESSAGE_TOO_LARGE); ``KafkaTimeoutError`` when the buffer
        stayed full for ``max_block_ms``."""
        # The fast path (most calls): the record joins its partition's open batch without
        # filling it, under the buffer bound. Nothing becomes sendable, so there is no one to
        # wake; this is ``RecordAccumulator.append_record`` inlined (measured: the calls and
        # queue walks it skips were ~40% of the per-record cost). Finding an open batch for
        # the partition proves the partition exists, and fitting it proves the record fits a
        # request (batch_bytes_max <= request_bytes_max); everything else -- validation, a new
        # batch, KIP-480's sticky switch -- is ``_send_slow``. It needs no check of a dead I/O
        # thread: that thread's last act fails every batch, so none is open afterwards.
        if type(value) is not bytes and value is not None:
            value = _as_bytes(value, "value")
        chosen = partition
        if key is None:
            size = 36 + len(value) if value is not None else 36
            if chosen is None:
                chosen = self._sticky_current.get(topic)
        else:
            if type(key) is not bytes:
                key = _as_bytes(key, "key")
            size = 36 + len(key) + (len(value) if value is not None else 0)
            if chosen is None:
                num_partitions = self._partition_counts.get(topic)
                chosen = partition_for_key(key, num_partitions) if num_partitions else None
        if not headers and not self._closed:
            self._lock_acquire()  # (acquire/release: 60 ns less than ``with`` per record, measured)
            try:
                batch = self._open_batches.get((topic, chosen))
                if batch is not None and batch.size_bytes + size < batch.limit:  # (its room is charged)
                    timestamp = self._wall_ns() if timestamp_ms is None else _timestamp_ns(timestamp_ms)
                    index = batch.record_count
                    batch.values.append(value)
                    batch.timestamps.append(timestamp)
                    if key is not None or batch.has_keys:
                        append_key(batch, key)
                    batch.record_count = index + 1
                    batch.size_bytes += size
                    return Delivery(batch, index, timestamp)
            finally:
                self._lock_release()
        return self._send_slow(topic, value, key, partition, _as_headers(headers), timestamp_ms)

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        on_delivery=None,
        timestamp_ms: int | None = None,
        headers=None,
    ) -> None:
        """Queue one record like ``send``, in confluent-kafka's shape: no handle is returned,
        and ``partition`` -1 means "let the partitioner choose" (as None).
        ``on_delivery(error, delivery)`` (optional) is called once the record's outcome is
        known, on the producer's I/O thread (as Java's ``Callback``; keep it short, and do
        not call ``flush`` from it), with ``error`` None or the ``KafkaError`` and
        ``delivery`` the record's ``Delivery``; callbacks of one partition run in send order,
        and ``flush`` returns only after every callback of the records it flushed ran. A
        failure is never swallowed: with a callback it goes to the callback, without one the
        next ``flush``/``close`` raises it in ``DeliveryFailed``. Raises at once as ``send``
        does.

        The per-record fast path: no handle object per record (``send``'s ``Delivery`` and
        its bookkeeping: 650 vs 470 ns per call, measured), and ``send``'s inlined append to the open batch."""
        # This body repeats ``send``'s on purpose: sharing it through a helper costs a call
        # and a tuple per record (~100 ns of the ~550 measured in bench/client_produce_consume).
        if type(value) is not bytes and value is not None:
            value = _as_bytes(value, "value")
        chosen = partition
        if key is None:
            size = 36 + len(value) if value is not None else 36
            if chosen is None:
                chosen = self._sticky_current.get(topic)
        else:
            if type(key) is not bytes:
                key = _as_bytes(key, "key")
            size = 36 + len(key) + (len(value) if value is not None else 0)
            if chosen is None:
                num_partitions = self._partition_counts.get(topic)
                chosen = partition_for_key(key, num_partitions) if num_partitions else None
        if on_delivery is None and not headers and not self._closed:
            self._lock_acquire()
            try:
                batch = self._open_batches.get((topic, chosen))
                if batch is not None and batch.size_bytes + size < batch.limit:  # (its room is charged)
                    timestamp = self._wall_ns() if timestamp_ms is None else _timestamp_ns(timestamp_ms)
                    batch.values.append(value)
                    batch.timestamps.append(timestamp)
                    if key is not None or batch.has_keys:
                        append_key(batch, key)
                    batch.record_count += 1
                    batch.size_bytes += size
                    return
            finally:
                self._lock_release()
        if on_delivery is not None and not callable(on_delivery):
            raise TypeError(f"on_delivery must be callable(error, delivery), not {type(on_delivery).__name__}")
        self._send_slow(topic, value, key, None if partition == -1 else partition, _as_headers(headers),
                        timestamp_ms, on_delivery)

    def _send_slow(self, topic: str, value, key, partition, headers: tuple, timestamp_ms,
                   callback=None) -> Delivery:
        """``send``/``produce`` of a record that does not join an open batch's room: headers,
        a callback, a topic without metadata yet, a new batch, an oversize record, an unknown
        partition, a closed producer."""
        self._check_open()
        size = record_size_max(key, value, headers)
        num_partitions = self._state.partitions.get(topic) or self._partition_count(topic)
        if size + 61 > self._record_bytes_max:
            self._check_record_size(size)
        timestamp = self._clock.time_ms() if timestamp_ms is None else _timestamp_ns(timestamp_ms) // 1_000_000
        partition = self._choose_partition(topic, key, partition, num_partitions, size)
        return self._append(topic, partition, value, key, headers, size, timestamp, callback)

    def _append(self, topic: str, partition: int, value, key, headers: tuple, size: int,
                timestamp: int, callback=None) -> Delivery:
        """Queue one record whose partition is chosen: reserve buffer space, open or seal
        batches as needed, and wake (or be) the I/O thread when something became sendable."""
        state, acc = self._state, self._acc
        self._raise_fatal()
        with state.lock:
            # A record that opens a batch needs the batch's whole reservation free (as Java's
            # BufferPool): under back-pressure batches stay full-sized, not one record each.
            need = max(acc.reserve_bytes, size + 61)
            if acc.bytes_buffered + need > self._buffer_bytes_max and acc.batches_buffered \
                    and acc.would_open_batch((topic, partition), size):
                self._reserve(need)
            if not self._sender_started:
                self._ensure_sender()
            batch, sealed = acc.append_record((topic, partition), key, value, timestamp, headers, size,
                                              self._monotonic_ms)
            if callback is not None:  # under the lock: the batch cannot complete before this
                if batch.callbacks is None:
                    batch.callbacks = []
                batch.callbacks.append((batch.record_count - 1, timestamp * 1_000_000, callback))
            opened = batch.record_count == 1
            txn_added = self._sender.txn_added
            if opened and txn_added is not None and (topic, partition) not in txn_added:
                state.wake()  # AddPartitionsToTxn now, while the batch lingers (I/O thread only)
            elif opened and not sealed and self._linger_ms:
                # The I/O thread sends the batch when linger_ms is up, unless it fills first.
                state.wake(unless_awake_by_ms=batch.created_ms + self._linger_ms)
            send_now = opened and not self._linger_ms and (
                acc.in_flight_count((topic, partition)) < _HELP_IN_FLIGHT_MAX)
            if opened and not self._linger_ms and not send_now:
                state.stats["batches_left_to_answers"] += 1
        if sealed or send_now:
            self._sender.help()  # something is ready now: send it from this thread if possible
        return Delivery(batch, batch.record_count - 1, timestamp * 1_000_000)

    # ------------------------------------------------------------------ flush and close

    def flush(self, timeout_ms: float | None = None) -> None:
        """Send everything queued now, linger or not, and wait for every answer and for the
        ``on_delivery`` callbacks they call. Raises ``DeliveryFailed`` with the records that
        failed since the last flush and were not reported (by ``Delivery.get`` or a callback;
        each also has its ``error``), ``KafkaTimeoutError`` if ``timeout_ms`` passes first."""
        state = self._state
        if self._sender.on_io_thread():
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "flush() called from a delivery callback: it would wait for itself")
        with state.cond:
            target = self._acc.last_serial
            self._wait_serial(target, timeout_ms,
                              until=lambda: (self._acc.oldest_serial() > target
                                             and not state.callbacks_due and not state.callbacks_running))
            failures = [d for batch in state.unreported for d in failed_deliveries(batch)
                        if d not in state.reported]
            state.unreported.clear()
            state.reported.clear()
        if failures:
            raise DeliveryFailed(failures)

    def close(self, flush: bool = True, timeout_ms: float | None = None) -> None:
        """Flush (unless ``flush=False``: records not yet sent fail with a KafkaError; batches
        already in flight still get their answer), then stop the I/O thread and close every
        connection, even if the flush raised. Idempotent. A transactional producer first ends
        an incomplete transaction as Java's does on a graceful close: aborts an open one,
        finishes a commit or abort under way; a prepared transaction is left as it is."""
        if self._closed:
            return
        if self._sender.on_io_thread():
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "close() called from a delivery callback: it would wait for itself")
        abandon = not flush
        if flush and self._txn is not None:
            self._txn.end_on_close(timeout_ms)
        try:
            if flush and self._sender.started:
                try:
                    self.flush(timeout_ms)
                except KafkaTimeoutError:
                    abandon = True  # out of time: what is not in flight is dropped, with an error
                    raise
        finally:
            self._closed = True
            with self._state.cond:
                self._state.closing = True
                self._state.abandon = abandon
                self._state.wake()
            if self._sender.started:
                self._sender.join()
            else:
                self._cluster.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ waiting (lock held)

    def _wait_for(self, batch, timeout_ms: float | None) -> None:
        with self._state.cond:
            if not batch.done:
                self._wait_serial(batch.serial, timeout_ms, until=lambda: batch.done)

    def _wait_serial(self, serial: int, timeout_ms: float | None, until=None) -> None:
        """Make batches up to ``serial`` ready and wait until none of them is left (or
        ``until()``); the state's lock is held by the caller."""
        state = self._state
        if serial > state.force_serial:
            state.force_serial = serial
            if any(b.state == QUEUED and b.serial <= serial for b in self._acc.batches()):
                state.wake()  # batches that linger would hold: the I/O thread sends them now
        self._ensure_sender()
        deadline = None if timeout_ms is None else self._clock.monotonic_ms() + timeout_ms
        while not (until() if until else self._acc.oldest_serial() > serial):
            self._raise_fatal()
            if not self._sender_alive():
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the producer's I/O thread is not running")
            remaining = None if deadline is None else deadline - self._clock.monotonic_ms()
            if remaining is not None and remaining <= 0:
                raise KafkaTimeoutError(f"records still unacknowledged after {timeout_ms} ms")
            state.cond.wait(None if remaining is None else remaining / 1000)

    def _reserve(self, size: int) -> None:
        """Wait (lock held) until ``size`` more bytes fit under ``buffer_bytes_max``."""
        acc, state = self._acc, self._state
        if acc.bytes_buffered + size <= self._buffer_bytes_max or acc.empty:
            self._ensure_sender()
            return
        if self._sender.on_io_thread():  # a delivery callback: the thread that would drain is this one
            raise KafkaTimeoutError(
                f"buffer_bytes_max ({self._buffer_bytes_max}) is full and this is a delivery "
                "callback, which runs on the producer's I/O thread: nothing drains the buffer "
                "until it returns; produce from another thread, or raise buffer_bytes_max")
        deadline = self._clock.monotonic_ms() + self._max_block_ms
        state.buffer_waiters += 1
        try:
            state.wake()
            self._ensure_sender()
            while acc.bytes_buffered + size > self._buffer_bytes_max and not acc.empty:
                self._raise_fatal()
                remaining = deadline - self._clock.monotonic_ms()
                if remaining <= 0:
                    state.stats["buffer_full_timeouts"] += 1
                    raise KafkaTimeoutError(
                        f"buffer_bytes_max ({self._buffer_bytes_max}) stayed full for max_block_ms "
                        f"({self._max_block_ms}); the record was not queued")
                state.cond.wait(remaining / 1000)
        finally:
            state.buffer_waiters -= 1

    def _ensure_sender(self) -> None:
        if not self._sender_started:
            self._sender_started = True
            self._sender.start()

    def _sender_alive(self) -> bool:
        return self._sender.started and self._sender._thread.is_alive()

    def _raise_fatal(self) -> None:
        if self._state.fatal is not None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"producer I/O thread failed: {self._state.fatal!r}") from self._state.fatal

    # ------------------------------------------------------------------ metadata and partitions

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "send on a closed Producer")
        self._raise_fatal()
        if self._txn is not None:
            self._txn.check_send()

    def _check_record_size(self, size: int) -> None:
        if size + 61 > self._request_bytes_max:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"record of about {size} bytes is larger than request_bytes_max "
                             f"({self._request_bytes_max})")
        if size + 61 > self._buffer_bytes_max:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"record of about {size} bytes is larger than buffer_bytes_max "
                             f"({self._buffer_bytes_max})")

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count, asking the I/O thread for metadata (up to max_block_ms)."""
        state = self._state
        with state.cond:
            if topic in state.partitions:
                return state.partitions[topic]
            state.metadata_wanted.add(topic)
            state.metadata_errors.pop(topic, None)
            state.wake()
            self._ensure_sender()
            deadline = self._clock.monotonic_ms() + self._max_block_ms
            while topic not in state.partitions:
                self._raise_fatal()
                error = state.metadata_errors.pop(topic, None)
                if error is not None:
                    raise KafkaError(error.code, error.message)
                remaining = deadline - self._clock.monotonic_ms()
                if remaining <= 0:
                    state.metadata_wanted.discard(topic)
                    raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after "
                                            f"max_block_ms ({self._max_block_ms})")
                state.cond.wait(remaining / 1000)
            return state.partitions[topic]

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
        if self._acc.has_batches(tp) and self._acc.would_open_batch(tp, size):
            return self._sticky.next_partition(topic, num_partitions)  # KIP-480: batch is full, move on
        return current


# ---------------------------------------------------------------------- helpers


def _as_bytes(value, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"record {what} must be bytes or None, not {type(value).__name__}")


_TIMESTAMP_MS_MAX = (1 << 63) // 1_000_000 - 1  # the batch keeps nanoseconds in an int64


def _timestamp_ns(timestamp_ms) -> int:
    """A record's given timestamp (epoch ms) in ns; ``ValueError`` for a negative one (as
    Java's ``ProducerRecord``) or one past the year 2262."""
    ms = int(timestamp_ms)
    if not 0 <= ms <= _TIMESTAMP_MS_MAX:
        raise ValueError(f"invalid timestamp_ms {timestamp_ms!r}: must be 0..{_TIMESTAMP_MS_MAX} "
                         f"(epoch milliseconds), or None for the send time")
    return ms * 1_000_000


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
