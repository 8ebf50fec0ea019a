"""The producer's I/O thread: drains the accumulator into pipelined Produce requests.

Threading model. ``Producer`` methods run on the caller's threads and touch the accumulator
only under ``ProducerState.lock``. The sender's state (the ``Cluster`` with every socket and the
metadata cache, requests in flight, producer id and sequences) is owned by whoever holds the
sender's *I/O lock* and runs a *turn*. One background thread per producer (started on first use)
runs turns whenever something is due: it sleeps in ``select`` on its connections, on the next
linger/backoff/timeout deadline, and on a wake-up socket the user threads write a byte to when
they open a batch; it alone does the blocking set-up work (metadata, InitProducerId) and owns
every timer. A user thread that has just filled a batch also runs a non-blocking turn itself when
the I/O lock is free (``Sender.help``): with the GIL, an I/O thread woken by the kernel waits up
to the switch interval (5 ms) for a thread that is busy appending, so handing every send to it
would cap throughput at a few batches per switch interval (measured: 30-40 k records/s with
16 KiB batches); sending from the appending thread removes that convoy. At linger 0 a thread
that opens a batch helps only while its partition has fewer than two batches in flight (see
``producer._HELP_IN_FLIGHT_MAX``); if it finds the I/O thread mid-turn it sets
``ProducerState.turn_wanted`` and that turn is followed by another at once. Neither lock is held
across a blocking wait; ``ProducerState.lock`` is never held across I/O or encoding. Waiting user
threads (a full buffer, ``flush``, ``Delivery.get``, a topic's first metadata) sleep on the
state's condition, which every turn notifies when a batch finishes.

One turn: answer metadata requests (I/O thread only); expire batches past
``delivery_timeout_ms``; get a producer id if needed (I/O thread only); for each leader, while its
connection has fewer than
``max_in_flight_requests`` Produce requests outstanding, build one request with the next
sendable batch of each partition it leads (``accumulator.next_sendable``: strictly in order)
up to ``request_bytes_max``, stamp producer id / epoch / sequence into batches sent for the
first time, and send it; then take every answer that has already arrived. Responses come back in
order per connection; each partition's answer acknowledges, retries (same bytes, after
``retry_backoff_ms``) or fails its batch.

Transactions (``ProducerSettings.transactional_id``): the producer id comes from
``init_transactions`` (``set_producer``), not from this thread; a batch is sent only once its
partition is in the open transaction (``txn_added``): the I/O thread's turn first sends one
AddPartitionsToTxn for every partition with queued batches that is not (a user thread's turn
leaves that to it); Produce requests carry the transactional id and batches the transactional
bit; a batch that fails for good records ``txn_failure`` (the transaction must be aborted)
instead of taking a new producer id.

Idempotence, sequences and what happens to a batch once its request is answered or lost:
``broker.client.batch_outcomes`` (the base class of ``Sender``).
"""

from __future__ import annotations

import selectors
import socket
import threading
from collections import defaultdict, deque
from dataclasses import dataclass

from broker.client.accumulator import ProducerBatch
from broker.client.batch_outcomes import BatchOutcomes, format_tp
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster
from broker.client.produce_request import encode_records, produce_request, stamp_producer
# Defined in producer_state.py; imported from here by producer.py and tests (``__all__``).
from broker.client.producer_state import ProducerSettings, ProducerState
from broker.wire import ApiKey, ErrorCode

__all__ = ["ProducerSettings", "ProducerState", "Sender"]

_SEQUENCE_MOD = 1 << 31
_RESPONSE_MARGIN_MS = 1000  # the broker answers REQUEST_TIMED_OUT at timeout_ms; wait a bit longer
# The I/O thread looks at its timers at least this often, so nothing has to wake it for a far
# deadline (a request's timeout, delivery.timeout.ms): every send of a request would otherwise
# wake it once just to move its alarm, a thread hand-off per request.
_IDLE_SLEEP_MS_MAX = 200


@dataclass
class _Request:
    node: int
    conn: object
    batches: list[ProducerBatch]


class Sender(BatchOutcomes):
    """The I/O thread of one producer (see the module docstring)."""

    def __init__(self, cluster: Cluster, state: ProducerState, settings: ProducerSettings) -> None:
        self._cluster = cluster
        self._clock = cluster.clock
        self._state = state
        self._acc = state.accumulator
        self._s = settings
        self._producer_id = -1
        self._producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}
        # Partitions where the broker acknowledged a batch of the current producer id and epoch
        # (see ``_take_batches``: until then one batch of the partition at a time).
        self._sequence_known: set[tuple[str, int]] = set()
        self._reset_pending = False
        # Transactional producers only (``transactions.Transactions`` reads and resets these
        # under the I/O lock): the partitions AddPartitionsToTxn added to the open transaction
        # (a batch of any other partition waits until the I/O thread adds it, all pending ones
        # in one request), and the first error that doomed the open transaction.
        self.txn_added: set[tuple[str, int]] | None = set() if settings.transactional_id else None
        self.txn_failure: KafkaError | None = None
        self.txn_client = None  # a TxnCoordinatorClient, set by Transactions
        # transaction version 2 (KIP-890 part 2, set by Transactions): no AddPartitionsToTxn,
        # Produce v12 has the leader add the partition; else Produce at most v11
        self.txn_v2 = False
        # connection -> (socket it went out on, batches) per request in flight, oldest first
        self._inflight: dict[object, deque[tuple[object, list[ProducerBatch]]]] = {}
        self._watched: dict[object, object] = {}  # connection -> socket registered in the selector
        self._leader_retry_at = 0.0
        self._pid_retry_at = 0.0
        self._wake_r, state.wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        state.wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._io_lock = threading.Lock()  # held by whichever thread runs a turn (see ``help``)
        self._sent_last_turn = False
        self._needs_background = False  # a turn left set-up work (producer id, metadata) to it
        self._turns = 0  # turns run so far, by any thread (I/O lock held)
        self._thread = threading.Thread(target=self._run, name="pylog-producer-sender", daemon=True)

    # ------------------------------------------------------------------ lifecycle

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    def start(self) -> None:
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def join(self, timeout_s: float | None = None) -> None:
        if self.started:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            turns_at_select = self._turns
            readable = None  # connections with an answer, from the last select (None: look)
            while True:
                with self._io_lock:
                    if self._turns != turns_at_select:
                        readable = None  # a user thread's turn ran meanwhile: it may have taken them
                    if not self._turn(background=True, readable=readable):
                        break
                    timeout = self._sleep_timeout()
                    turns_at_select = self._turns
                if self._state.callbacks_due:
                    self._run_callbacks()  # a wake-up during them ends the select below at once
                buffered = self._tls_buffered()
                events = self._selector.select(0 if buffered else max(timeout, 0) / 1000)
                with self._state.lock:
                    self._state.sender_sleeping = False
                readable = [(key.data, key.fileobj) for key, _ in events if key.data is not None]
                readable += [entry for entry in buffered if entry not in readable]
                if len(readable) < len(events):
                    self._drain_wake_pipe()
            self._run_callbacks()  # of the batches the last turn completed or abandoned
        except BaseException as exc:  # a bug in the sender: every waiting caller must learn it
            error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"producer I/O thread failed: {exc!r}")
            with self._state.cond:
                self._state.fatal = exc
                for batch in list(self._acc.batches()):
                    self._fail(batch, error, reset=False)
                self._state.cond.notify_all()
            self._run_callbacks()
            raise
        finally:
            with self._io_lock:
                self._cluster.close()
                self._selector.close()
            self._wake_r.close()
            with self._state.lock:
                wake_w, self._state.wake_w = self._state.wake_w, None
            if wake_w is not None:
                wake_w.close()

    def help(self) -> None:
        """Run one non-blocking turn on the caller's thread, if no other thread is in one.

        Called by ``send``/``send_arrow`` when they filled a batch (or opened one with no
        linger and fewer than two of its partition's batches in flight): a thread busy
        appending holds the GIL, and an I/O thread woken by the kernel waits up to the
        interpreter's switch interval (5 ms) for it at every step; sending from the appending
        thread itself keeps batches flowing. The I/O thread still owns timers
        (linger, backoff, timeouts), metadata and producer ids, and is woken only when it must
        act sooner than it planned to.

        When the I/O thread is in a turn the caller does not wait for it (measured: waiting
        there, which hands it the GIL, cost 20-30% of per-record ``send`` throughput: batches
        went out smaller and the appending thread stood still meanwhile)."""
        if not self._io_lock.acquire(False):
            with self._state.lock:
                # The I/O thread is mid-turn and may be past collecting: without this flag
                # it went back to sleep with our batch ready, until the next answer, the
                # retry backoff or its idle cap (200 ms), and every record behind it waited.
                self._state.turn_wanted = True
                self._state.wake()
            return
        try:
            if self._selector.get_map() is None:
                return  # closed
            self._turn(background=False)
            now = self._clock.monotonic_ms()
            with self._state.lock:
                # Answers wake the I/O thread by themselves (the sockets are in its selector).
                timeout = self._timeout_ms(now, sent_any=False, helper=True)
                if self._needs_background or timeout is not None:
                    self._state.wake(unless_awake_by_ms=None if self._needs_background else now + timeout)
        finally:
            self._io_lock.release()

    # ------------------------------------------------------------------ one turn

    def _turn(self, background: bool, readable: list | None = None) -> bool:
        """Take the answers already there, then send what is sendable, without waiting (the
        I/O lock is held). ``readable``: the (connection, socket) pairs the I/O thread's select
        just reported (their answers are taken without asking the selector again); None: ask
        it. Only the I/O thread (``background``) does blocking set-up work: metadata and
        producer ids. False once the producer is closed and everything is done.

        Answers that arrive while this turn sends are left to the I/O thread's next select:
        looking for them here again cost a system call (and a GIL hand-off) per turn."""
        self._turns += 1
        if background:
            self._serve_metadata_requests()
        now = self._clock.monotonic_ms()
        with self._state.lock:
            self._state.turn_wanted = False  # this turn collects whatever was appended so far
            if self._state.abandon:
                self._abandon_unsent()
            self._expire(now)
            if self._state.closing and self._acc.empty and not self._inflight_total():
                return False
            if self._reset_pending and not self._inflight_total():
                self._reset_producer_id()
            need_pid = (self._s.idempotent and self._producer_id < 0 and not self._acc.empty
                        and now >= self._pid_retry_at and self.txn_added is None)
            to_add = self._partitions_to_add(now)
        self._needs_background = need_pid or bool(self._state.metadata_wanted) or bool(to_add)
        if need_pid:
            if not background:
                return True
            self._init_producer_id()
        if to_add and background:
            self._add_partitions(to_add)
        # answers and broken connections first: they free slots, fix leaders
        if readable is None:
            self._receive_ready()
        else:
            for conn, sock in readable:
                self._receive(conn, sock)
        sent_any = False
        if self._producer_id >= 0 or not self._s.idempotent:
            for request in self._collect(now):
                self._send(request)
                sent_any = True
        self._expire_requests(self._clock.monotonic_ms())
        self._sent_last_turn = sent_any
        return True

    def _tls_buffered(self) -> list:
        """Connections whose TLS socket already holds a decrypted answer: the selector does not
        see those bytes (``BrokerConnection.buffered``)."""
        return [(key.data, key.fileobj) for key in self._selector.get_map().values()
                if key.data is not None and key.data.buffered]

    def _receive_ready(self) -> None:
        """Take every answer that has arrived (the sockets say so), without blocking."""
        for _ in range(64):  # bounded: answers that keep coming are taken next turn
            events = [(key.data, key.fileobj) for key, _ in self._selector.select(0) if key.data is not None]
            events += [entry for entry in self._tls_buffered() if entry not in events]
            if not events:
                return
            for conn, sock in events:
                self._receive(conn, sock)

    def _drain_wake_pipe(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _sleep_timeout(self) -> float | None:
        """The I/O thread's wait before its next turn (I/O lock held); marks it sleeping."""
        now = self._clock.monotonic_ms()
        with self._state.lock:
            timeout = self._timeout_ms(now, self._sent_last_turn)
            if timeout is None or timeout > _IDLE_SLEEP_MS_MAX:
                timeout = _IDLE_SLEEP_MS_MAX
            if self._state.turn_wanted:  # asked for during the turn that just ended
                timeout = 0
            self._state.sender_sleeping = timeout > 0
            self._state.sender_wakes_at_ms = now + timeout
        return timeout

    def _inflight_total(self) -> int:
        return sum(len(q) for q in self._inflight.values())

    # ------------------------------------------------------------------ metadata

    def _serve_metadata_requests(self) -> None:
        with self._state.lock:
            wanted = list(self._state.metadata_wanted)
        if not wanted:
            return
        for topic in wanted:
            try:
                meta = self._cluster.topic(topic)
            except KafkaError as exc:
                unknown = exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if exc.retriable and not (unknown and not self._s.config.allow_auto_topic_creation):
                    continue  # ask again next turn; the caller waits up to max_block_ms
                with self._state.cond:
                    self._state.metadata_errors[topic] = exc
                    self._state.metadata_wanted.discard(topic)
                    self._state.cond.notify_all()
                continue
            with self._state.cond:
                if meta.partitions:
                    self._state.partitions[topic] = len(meta.partitions)
                    self._state.metadata_wanted.discard(topic)
                    self._state.cond.notify_all()
        with self._state.lock:
            if self._state.metadata_wanted:
                self._leader_retry_at = self._clock.monotonic_ms() + self._s.config.retry_backoff_ms

    # ------------------------------------------------------------------ sending

    def _collect(self, now: float) -> list[_Request]:
        """Build the requests to send now (lock taken inside; leaders and connections outside)."""
        with self._state.lock:
            if self._reset_pending or self._state.abandon:
                return []
            tps = self._acc.partitions()
        if not tps:
            return []
        by_node: dict[int, list[tuple[str, int]]] = defaultdict(list)
        leaderless = []
        for tp in tps:
            try:
                leader = self._cluster.leader_for(*tp)
            except KafkaError as exc:
                leaderless.append((tp, exc))
                continue
            if leader < 0:
                leaderless.append((tp, KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{format_tp(tp)} has no leader")))
            else:
                by_node[leader].append(tp)
        if leaderless:
            self._note_leaderless(leaderless, now)
        conns = {}
        for node in by_node:
            try:
                conns[node] = self._cluster.connection(node)
            except KafkaError as exc:
                self._note_unreachable(by_node[node], exc, now)
                continue
            self._drop_stale(conns[node])
        requests = []
        with self._state.lock:
            if self._state.abandon:
                return []
            force = self._state.force_serial if not self._state.buffer_waiters else self._acc.last_serial
            if self._state.closing:
                force = self._acc.last_serial
            for node, conn in conns.items():
                pending = self._inflight.setdefault(conn, deque())
                while len(pending) + sum(1 for r in requests if r.conn is conn) < self._s.max_in_flight:
                    batches = self._take_batches(by_node[node], now, force)
                    if not batches:
                        break
                    requests.append(_Request(node, conn, batches))
        return requests

    def _take_batches(self, tps, now: float, force: int) -> list[ProducerBatch]:
        """At most one batch per partition, in order, up to request_bytes_max (lock held)."""
        chosen, total = [], 0
        for tp in tps:
            batch = self._acc.next_sendable(tp, now, force)
            if batch is None:
                continue
            size = len(batch.payload) if batch.payload is not None else batch.size_bytes
            if chosen and total + size > self._s.request_bytes_max:
                continue
            if self.txn_added is not None and tp not in self.txn_added and not self.txn_v2:
                continue  # not in the transaction yet: the I/O thread's next turn adds it
            if self._s.idempotent and tp not in self._sequence_known and self._acc.in_flight_count(tp):
                # A broker with no state for this producer on the partition accepts *any* first
                # sequence (Kafka's ProducerAppendInfo: no current epoch, no check). Were the
                # first batch refused retriably (NOT_LEADER_OR_FOLLOWER of a partition still
                # loading) while the next one, pipelined behind it, was accepted, the partition
                # would start mid-sequence and the first batch's resend be OUT_OF_ORDER for
                # good (seen against Apache Kafka 4.1 right after CreateTopics). So pipelining
                # starts once the broker has acknowledged one batch of this id and epoch.
                continue
            if self._s.idempotent and not batch.stamped:
                batch.producer_id, batch.producer_epoch = self._producer_id, self._producer_epoch
                batch.base_sequence = self._sequences.get(tp, 0)
                self._sequences[tp] = (batch.base_sequence + batch.record_count) % _SEQUENCE_MOD
            if self.txn_v2 and tp not in self.txn_added:
                # Transaction version 2: this Produce v12 adds the partition. Counted only once a
                # batch goes out: an abort of a transaction none of whose batches left sends no
                # EndTxn (the coordinator would refuse it: no transaction of this epoch is open).
                self.txn_added.add(tp)
                self._state.stats["txn_partitions_added"] += 1
            self._acc.mark_in_flight(batch, now)
            chosen.append(batch)
            total += size
        return chosen

    def _note_leaderless(self, leaderless, now: float) -> None:
        if now >= self._leader_retry_at:
            for tp, _ in leaderless:
                self._cluster.invalidate(tp[0])
            self._leader_retry_at = now + self._s.config.retry_backoff_ms
        with self._state.lock:
            for tp, error in leaderless:
                for batch in self._acc.batches():
                    if batch.tp == tp:
                        batch.last_error = error

    def _note_unreachable(self, tps, error: KafkaError, now: float) -> None:
        self._leader_retry_at = now + self._s.config.retry_backoff_ms
        with self._state.lock:
            wanted = set(tps)
            for batch in self._acc.batches():
                if batch.tp in wanted:
                    batch.last_error = error

    def _send(self, request: _Request) -> None:
        for batch in request.batches:
            self._encode(batch)
        body = produce_request(request.batches, self._s.acks, self._s.config.request_timeout_ms,
                               self._s.transactional_id)
        conn = request.conn
        timeout = self._s.config.request_timeout_ms + _RESPONSE_MARGIN_MS
        try:
            # transaction version 1: not v12, which a transaction version 2 broker reads as "add it"
            version = conn.version_for(ApiKey.PRODUCE, max_version=0x7FFF if self.txn_v2 or self.txn_added is None
                                       else 11)
            conn.send(ApiKey.PRODUCE, body, version, expect_response=self._s.acks != 0, timeout_ms=timeout)
        except KafkaError as exc:  # the connection is closed: what was in flight on it is lost too
            self._connection_failed(conn, exc)
            with self._state.cond:
                self._retry_or_fail(request.batches, exc, unknown=True)
                self._state.cond.notify_all()
            return
        stats = self._state.stats
        stats["requests_sent"] += 1
        stats["batches_sent"] += len(request.batches)
        if self._s.acks == 0:
            with self._state.cond:
                for batch in request.batches:
                    self._succeed(batch, -1, -1)
                self._state.cond.notify_all()
            return
        pending = self._inflight.setdefault(conn, deque())
        pending.append((conn.selectable, request.batches))
        if len(pending) > stats["inflight_requests_peak"]:
            stats["inflight_requests_peak"] = len(pending)
        self._watch(conn)

    def _watch(self, conn) -> None:
        """Have the selector watch ``conn``'s current socket (a reconnect makes a new one)."""
        sock = conn.selectable
        if sock is None or self._watched.get(conn) is sock:
            return
        self._unwatch(conn)
        stale = self._selector.get_map().get(sock.fileno())
        if stale is not None:  # the descriptor of a socket closed behind our back, reused
            self._selector.unregister(stale.fileobj)
            self._watched.pop(stale.data, None)
        self._selector.register(sock, selectors.EVENT_READ, conn)
        self._watched[conn] = sock

    def _unwatch(self, conn) -> None:
        sock = self._watched.pop(conn, None)
        if sock is not None:
            try:
                self._selector.unregister(sock)  # by object: works after the socket closed
            except (KeyError, ValueError):
                pass

    def _drop_stale(self, conn) -> None:
        """Requests sent on an earlier socket of ``conn`` will never be answered."""
        pending = self._inflight.get(conn)
        if pending and pending[0][0] is not conn.selectable:
            self._connection_failed(conn, KafkaConnectionError(f"{conn.address}: connection lost"))

    def _encode(self, batch: ProducerBatch) -> None:
        """Encode an open batch's records, or stamp a pre-encoded one (outside the lock: the
        batch is in flight, so no user thread touches it)."""
        if batch.payload is None:
            batch.payload = encode_records(batch, self._s.compression, self.txn_added is not None)
            with self._state.lock:
                self._acc.resize(batch, len(batch.payload))
                batch.keys, batch.values, batch.timestamps = [], [], []  # free the Python objects
                batch.headers = {}
        elif self._s.idempotent:
            batch.payload = stamp_producer(batch.payload, batch.producer_id, batch.producer_epoch,
                                           batch.base_sequence, self.txn_added is not None)

    # ------------------------------------------------------------------ waiting and answers

    def _timeout_ms(self, now: float, sent_any: bool, helper: bool = False) -> float | None:
        """How long ``select`` may sleep (lock held); None = until an answer or a wake-up.

        A batch that is ready but was not sent this turn is blocked (its leader is at
        max_in_flight, has no leader or is unreachable, no producer id yet): an answer or a
        wake-up ends the wait, else the retry backoff. After sending, loop again at once.
        ``helper``: for a user thread's turn, which leaves blocked batches to the answers."""
        force = self._acc.last_serial if (self._state.buffer_waiters or self._state.closing) \
            else self._state.force_serial
        times = []
        wake = self._acc.next_wakeup_ms(now, force)
        if wake is not None:
            if wake > now:
                times.append(wake)
            elif helper:
                pass
            elif sent_any:
                times.append(now)
            else:
                times.append(now + max(self._s.config.retry_backoff_ms, 1))
        if self._state.metadata_wanted:
            times.append(self._leader_retry_at)
        for conn, pending in self._inflight.items():
            if pending and conn.oldest_deadline_ms is not None:
                times.append(conn.oldest_deadline_ms)
        oldest = min((b.created_ms for b in self._acc.oldest_waiting()), default=None)
        if oldest is not None:
            times.append(oldest + self._s.delivery_timeout_ms)
        if self._reset_pending and not self._inflight_total():
            times.append(now)
        if self._state.abandon or (self._state.closing and self._acc.empty and not self._inflight_total()):
            times.append(now)
        return None if not times else min(times) - now

    def _receive(self, conn, sock) -> None:
        if sock is not conn.selectable:  # an event of a socket that is gone
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            if self._watched.get(conn) is sock:
                del self._watched[conn]
            return
        self._drop_stale(conn)
        pending = self._inflight.get(conn)
        if not pending:  # readable with nothing asked: the broker closed an idle connection
            self._unwatch(conn)
            conn.close()
            return
        try:
            response = conn.receive()
        except KafkaError as exc:
            self._connection_failed(conn, exc)
            return
        _, batches = pending.popleft()
        with self._state.cond:
            self._handle_response(batches, response)
            self._state.cond.notify_all()

    def _connection_failed(self, conn, error: KafkaError) -> None:
        """Every request in flight on ``conn`` is lost: its batches retry with the same bytes."""
        self._unwatch(conn)
        conn.close()
        pending = self._inflight.pop(conn, deque())
        self._cluster.invalidate()
        with self._state.cond:
            for _, batches in pending:
                self._retry_or_fail(batches, error, unknown=True)
            self._state.cond.notify_all()

    def _expire_requests(self, now: float) -> None:
        for conn, pending in list(self._inflight.items()):
            if not pending:
                continue
            deadline = conn.oldest_deadline_ms
            if pending[0][0] is not conn.selectable:
                self._connection_failed(conn, KafkaConnectionError(f"{conn.address}: connection lost"))
            elif deadline is not None and now >= deadline:
                self._connection_failed(conn, KafkaTimeoutError(
                    f"{conn.address}: no answer to a Produce request within request_timeout_ms"))

    def on_io_thread(self) -> bool:
        return self._thread is not None and threading.current_thread() is self._thread
