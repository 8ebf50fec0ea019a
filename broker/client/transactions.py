"""The transactional producer (``Producer(transactional_id=...)``): Kafka's transaction API and a
KIP-939-style "prepare here, complete later" mode, on top of the producer's I/O thread.

Usage::

    p = Producer(bootstrap, transactional_id="tx-1", transaction_timeout_ms=60_000)
    p.init_transactions()                  # InitProducerId: fences older instances of "tx-1"
    p.begin_transaction()
    p.send("out", b"v")                    # the I/O thread adds "out"'s partition first
    p.send_offsets_to_transaction({("in", 0): 42}, consumer.group_metadata())
    p.commit_transaction()                 # flush, then EndTxn(commit)   (or abort_transaction())

    prepared = p.prepare_transaction()     # flush, no EndTxn: a PreparedTransaction
    ...                                    # store prepared.to_dict() durably; the process may die
    any_producer.complete_transaction(PreparedTransaction.from_dict(d), commit=True)

Semantics (Java's ``KafkaProducer``/``TransactionManager``; state machine in ``txn_state``):

* ``init_transactions`` finds the coordinator (FindCoordinator key type 1) and sends
  InitProducerId with the transactional id, retrying CONCURRENT_TRANSACTIONS (the previous
  instance's open transaction is being aborted), COORDINATOR_LOAD_IN_PROGRESS and
  NOT_COORDINATOR (after a new lookup).
* ``send`` is legal only inside a transaction. Before a partition's first batch, the I/O thread
  sends AddPartitionsToTxn for every partition that is new to the transaction at that moment
  (one request); Produce requests carry the transactional id and batches the transactional bit.
  Transaction version 2 (KIP-890 part 2; the coordinator finalizes ``transaction.version`` 2,
  checked at ``init_transactions``): no AddPartitionsToTxn and no AddOffsetsToTxn -- Produce v12
  and TxnOffsetCommit v5 have the partition leader add the partition -- and every EndTxn bumps
  the epoch (a new producer id once the epoch is exhausted).
* ``commit_transaction`` flushes, then sends EndTxn(commit). A batch that failed (or a failed
  AddPartitionsToTxn) makes it raise ``TransactionAbortableError``: abort and go on.
  ``abort_transaction`` fails what was not sent yet, waits for what is in flight, then
  EndTxn(abort). A timeout leaves the call resumable: calling it again continues it.
* PRODUCER_FENCED / INVALID_PRODUCER_EPOCH anywhere raise ``ProducerFencedError``: fatal, another
  instance took the transactional id; only ``close()`` is left.

Prepare / complete (the Spark exactly-once sink): ``prepare_transaction`` flushes and returns
the ``PreparedTransaction`` (transactional id, producer id and epoch, partitions) without ending
it. ``complete_transaction(prepared, commit)`` on ANY producer (another process, after a restart)
sends EndTxn with the stored producer id and epoch -- the protocol checks only those, which is
what Flink's KafkaSink does to resume a transaction. Committing one already committed succeeds
(the coordinator answers a repeated commit with NONE); aborting it then raises INVALID_TXN_STATE.
Never call ``init_transactions`` with that transactional id before completing it: the epoch bump
aborts the prepared transaction. And ``transaction_timeout_ms`` must exceed the longest time from
the first send to ``complete_transaction`` (the coordinator aborts older ones and bumps the epoch;
completing then raises ``ProducerFencedError``); the broker caps it at
``transaction.max.timeout.ms`` (15 minutes by default). A ``ProducerFencedError`` from
``complete_transaction`` is ambiguous by protocol (Flink's committer logs it as "known reason"):
the epoch moved on, because the transaction was aborted (timeout, an ``init_transactions`` of its
id) or because it was completed and its id used again; a sink keeps its own record of decisions
(reference coordinators.md section 8). To abort the lingering transaction of an id whose
PreparedTransaction is lost: ``init_transactions()`` on a producer with that id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from broker.client.accumulator import IN_FLIGHT
from broker.client.errors import DeliveryFailed, KafkaError, KafkaTimeoutError
from broker.client.txn_requests import TxnCoordinatorClient
from broker.client.txn_state import (
    ProducerFencedError,
    TransactionAbortableError,
    TxnEvent,
    TxnState,
    TxnStateError,
    fatal_or_abortable,
    next_state,
)
from broker.wire import ErrorCode

__all__ = ["PreparedTransaction", "TransactionCalls", "Transactions", "complete_transaction"]

_log = logging.getLogger(__name__)

_FENCED = (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)


@dataclass(frozen=True)
class PreparedTransaction:
    """A flushed, not yet ended transaction: all ``complete_transaction`` needs."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    has_offsets: bool = False  # send_offsets_to_transaction was called in it

    @property
    def empty(self) -> bool:
        """Nothing reached the coordinator (no partition, no offsets): completing it is a no-op."""
        return not self.partitions and not self.has_offsets

    def to_dict(self) -> dict:
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "partitions": [list(tp) for tp in self.partitions],
                "has_offsets": self.has_offsets}

    @classmethod
    def from_dict(cls, d: dict) -> "PreparedTransaction":
        return cls(str(d["transactional_id"]), int(d["producer_id"]), int(d["producer_epoch"]),
                   tuple((str(t), int(p)) for t, p in d.get("partitions", ())), bool(d.get("has_offsets", False)))


def complete_transaction(cluster, io_lock, prepared: PreparedTransaction, commit: bool, timeout_ms: float) -> None:
    """EndTxn for ``prepared`` with its stored producer id and epoch (``io_lock`` guards ``cluster``);
    none for an empty one (the coordinator never heard of it: EndTxn would be INVALID_TXN_STATE)."""
    if prepared.empty:
        return
    client = TxnCoordinatorClient(cluster, prepared.transactional_id)
    with io_lock:
        client.end_txn(prepared.producer_id, prepared.producer_epoch, commit,
                       cluster.clock.monotonic_ms() + timeout_ms)


class Transactions:
    """The transaction state of one ``Producer`` (called by its public methods)."""

    def __init__(self, producer, transactional_id: str, transaction_timeout_ms: int) -> None:
        if transaction_timeout_ms <= 0:
            raise ValueError(f"transaction_timeout_ms must be positive, got {transaction_timeout_ms}")
        self._producer = producer
        self._sender = producer._sender
        self._state_lock = producer._state.cond
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.client = TxnCoordinatorClient(producer._cluster, transactional_id)
        self._sender.txn_client = self.client
        self.state = TxnState.UNINITIALIZED
        self._error: KafkaError | None = None  # what made the state ABORTABLE_ERROR or FATAL_ERROR
        self._offsets_added = False  # AddOffsetsToTxn sent in the open transaction

    # ------------------------------------------------------------------ the calls

    def init(self, timeout_ms: float) -> None:
        self._move(TxnEvent.INIT)
        pid, epoch = self._coordinated(lambda deadline: self.client.init_producer_id(
            self.transaction_timeout_ms, deadline), timeout_ms)
        version = self._coordinated(self.client.transaction_version, timeout_ms)
        with self._sender._io_lock:
            self._sender.set_producer(pid, epoch)
            self._sender.txn_v2 = version >= 2
        self._move(TxnEvent.INIT_DONE)

    def begin(self) -> None:
        self._move(TxnEvent.BEGIN)
        with self._state_lock:
            self._sender.txn_added.clear()
            self._sender.txn_failure = None

    def check_send(self) -> None:
        """Raise unless a record may join the transaction now (send, produce, send_arrow)."""
        if self.state is TxnState.IN_TRANSACTION:
            return
        if self.state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(self._error.code, f"cannot send: the transaction must be "
                                            f"aborted ({self._error})")
        next_state(self.state, TxnEvent.SEND)  # raises TxnStateError naming the state

    def send_offsets(self, offsets: dict, group_metadata, timeout_ms: float) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator (KIP-447 fields from
        ``group_metadata``: a ``Consumer.group_metadata()`` dict, or a group id string)."""
        group = {"group_id": group_metadata} if isinstance(group_metadata, str) else dict(group_metadata)
        self._move(TxnEvent.SEND_OFFSETS)
        pid, epoch = self._sender.producer_id, self._sender.producer_epoch
        version = 2 if self._sender.txn_v2 else 1
        if version < 2:  # transaction version 2: TxnOffsetCommit v5 adds the offsets partition
            self._coordinated(lambda deadline: self.client.add_offsets(pid, epoch, group["group_id"], deadline),
                              timeout_ms)
        self._offsets_added = True
        self._coordinated(lambda deadline: self.client.txn_offset_commit(
            pid, epoch, offsets, group, deadline, transaction_version=version), timeout_ms)

    def commit(self, timeout_ms: float | None) -> None:
        if self.state is TxnState.ABORTABLE_ERROR:
            raise TransactionAbortableError(self._error.code, f"cannot commit: {self._error}")
        self._move(TxnEvent.COMMIT)
        self._flush_for_end(timeout_ms)
        self._end(True, timeout_ms)

    def abort(self, timeout_ms: float | None) -> None:
        self._move(TxnEvent.ABORT)
        with self._state_lock:
            failed = self._sender.txn_failure is not None  # (not the batches dropped below: unstamped)
        self._drop_unsent(timeout_ms)
        self._end(False, timeout_ms)
        if failed:
            # A batch that failed after its sequence was assigned left a gap the next
            # transaction's batches would hit (OUT_OF_ORDER_SEQUENCE_NUMBER): a new epoch
            # (InitProducerId again) starts every partition's sequence at 0, as Java's epoch bump.
            pid, epoch = self._coordinated(lambda deadline: self.client.init_producer_id(
                self.transaction_timeout_ms, deadline), timeout_ms)
            with self._sender._io_lock:
                self._sender.set_producer(pid, epoch)

    def prepare(self, timeout_ms: float | None) -> PreparedTransaction:
        """The state moves to PREPARED only once everything is flushed: after a timeout the
        transaction is still open (send more, prepare again, or abort)."""
        if self.state is TxnState.FATAL_ERROR and self._error is not None:
            raise self._error
        prepared_state = next_state(self.state, TxnEvent.PREPARE)  # legal now? (raises if not)
        self._flush_for_end(timeout_ms)
        self.state = prepared_state
        with self._state_lock:
            partitions = tuple(sorted(self._sender.txn_added))
        return PreparedTransaction(self.transactional_id, self._sender.producer_id,
                                   self._sender.producer_epoch, partitions, self._offsets_added)

    def end_on_close(self, timeout_ms: float | None) -> None:
        """A graceful close (Java's Sender on shutdown): abort an open transaction, finish a
        commit or abort under way; leave a prepared one (it is completed elsewhere). A failure
        is logged, not raised: the producer closes anyway (the coordinator aborts the
        transaction after ``transaction_timeout_ms`` or at the next ``init_transactions``)."""
        try:
            if self.state is TxnState.COMMITTING:
                self.commit(timeout_ms)
            elif self.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.ABORTING):
                _log.info("aborting the incomplete transaction of %r: the producer is closing", self.transactional_id)
                self.abort(timeout_ms)
        except KafkaError as exc:
            _log.warning("transaction of %r not ended at close: %s", self.transactional_id, exc)

    # ------------------------------------------------------------------ steps

    def _flush_for_end(self, timeout_ms: float | None) -> None:
        """Every record of the transaction written, or the transaction doomed (abortable)."""
        try:
            self._producer.flush(timeout_ms)
        except DeliveryFailed as exc:
            self._doom(exc.failures[0].error if exc.failures else exc)
        except KafkaTimeoutError:
            raise  # still COMMITTING: call again
        with self._state_lock:
            failure = self._sender.txn_failure
        if failure is not None:
            self._doom(failure)

    def _drop_unsent(self, timeout_ms: float | None) -> None:
        """Fail the batches not sent yet (they would only be aborted), wait for those in flight."""
        producer, sender = self._producer, self._sender
        error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                           f"transaction of {self.transactional_id!r} aborted before the record was sent")
        with self._state_lock:
            for batch in list(producer._acc.batches()):
                if batch.state != IN_FLIGHT and not batch.stamped:  # (a stamped one keeps its sequence)
                    sender._fail(batch, error, reset=False)
            producer._wait_serial(producer._acc.last_serial, timeout_ms, until=lambda: producer._acc.empty)
            producer._state.unreported.clear()  # the aborted transaction's records: moot
            producer._state.reported.clear()

    def _end(self, commit: bool, timeout_ms: float | None) -> None:
        """EndTxn, unless the coordinator never heard of the transaction (no partition and no
        offsets added: Java completes such a transaction locally; EndTxn would be INVALID_TXN_STATE)."""
        pid, epoch = self._sender.producer_id, self._sender.producer_epoch

        def end_if_started(deadline: float) -> None:
            # Read under the I/O lock (``_coordinated`` holds it): an AddPartitionsToTxn the I/O
            # thread has under way counts once it is done.
            with self._state_lock:
                started = bool(self._sender.txn_added) or self._offsets_added
            if started:
                bumped = self.client.end_txn(pid, epoch, commit, deadline)
                if bumped is not None and bumped != (pid, epoch):
                    # Transaction version 2: the next transaction runs at the new epoch, which
                    # fences whatever of this one is still on its way (a delayed EndTxn).
                    self._sender.set_producer(*bumped)

        self._coordinated(end_if_started, timeout_ms)
        self._offsets_added = False
        with self._state_lock:
            self._sender.txn_added.clear()
            self._sender.txn_failure = None
        self._error = None
        self._move(TxnEvent.END_DONE)

    def _coordinated(self, call, timeout_ms: float | None):
        """``call(deadline_ms)`` under the I/O lock; a fence is fatal, an abortable error dooms
        the transaction; both are raised."""
        clock = self._producer._clock
        deadline = clock.monotonic_ms() + (self._producer._max_block_ms if timeout_ms is None else timeout_ms)
        try:
            with self._sender._io_lock:
                return call(deadline)
        except ProducerFencedError as exc:
            self._error = exc
            self.state = next_state(self.state, TxnEvent.FATAL)
            raise
        except TransactionAbortableError as exc:
            self._doom(exc)
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            if not exc.retriable:
                self._error = exc
                self.state = next_state(self.state, TxnEvent.FATAL)
            raise

    def _doom(self, error: KafkaError) -> None:
        """The open transaction can only be aborted (a fence: the producer is done)."""
        code = getattr(error, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
        if code in _FENCED:
            self._error = fatal_or_abortable(code, getattr(error, "message", str(error)))
            self.state = next_state(self.state, TxnEvent.FATAL)
            raise self._error from error
        self._error = error if isinstance(error, TransactionAbortableError) else \
            TransactionAbortableError(code, "the transaction must be aborted: "
                                      + getattr(error, "message", str(error)))
        try:
            self.state = next_state(self.state, TxnEvent.ABORTABLE)
        except KafkaError:  # outside a transaction (InitProducerId): nothing to abort
            self.state = next_state(self.state, TxnEvent.FATAL)
        raise self._error

    def _move(self, event: TxnEvent) -> None:
        if self.state is TxnState.FATAL_ERROR and self._error is not None:
            raise self._error
        self.state = next_state(self.state, event)


class TransactionCalls:
    """The transactional half of ``Producer`` (a mixin: ``_txn``, a ``Transactions`` or None,
    ``_closed``, ``_cluster``, ``_sender``, ``_max_block_ms``); each call goes to ``Transactions``."""

    # (semantics, errors and the prepare/complete mode: ``broker.client.transactions``)

    def init_transactions(self, timeout_ms: float | None = None) -> None:
        """InitProducerId with ``transactional_id``: fences every older instance of it, and
        waits until its open transaction (if any) is aborted."""
        self._require_txn().init(self._max_block_ms if timeout_ms is None else timeout_ms)

    def begin_transaction(self) -> None:
        self._require_txn().begin()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata, timeout_ms: float | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): offset, (offset, metadata) or OffsetAndMetadata}) to the
        consumer group with this transaction; ``group_metadata`` is ``Consumer.group_metadata()``
        (KIP-447: the group coordinator fences a stale generation or member) or a group id."""
        self._require_txn().send_offsets(offsets, group_metadata, timeout_ms)

    def commit_transaction(self, timeout_ms: float | None = None) -> None:
        self._require_txn().commit(timeout_ms)

    def abort_transaction(self, timeout_ms: float | None = None) -> None:
        self._require_txn().abort(timeout_ms)

    def prepare_transaction(self, timeout_ms: float | None = None) -> PreparedTransaction:
        """Flush the open transaction and return it, not ended (complete it later, from any
        producer, with ``complete_transaction``)."""
        return self._require_txn().prepare(timeout_ms)

    def complete_transaction(self, prepared: PreparedTransaction, commit: bool,
                             timeout_ms: float | None = None) -> None:
        """EndTxn for a prepared transaction with its stored producer id and epoch; works on any
        producer (transactional or not). Committing one already committed succeeds."""
        if self._txn is not None and self._txn.state is TxnState.PREPARED \
                and self._txn.transactional_id == prepared.transactional_id:
            (self._txn.commit if commit else self._txn.abort)(timeout_ms)
            return
        complete_transaction(self._cluster, self._sender._io_lock, prepared, commit,
                             self._max_block_ms if timeout_ms is None else timeout_ms)

    @property
    def transaction_state(self) -> str | None:
        """Java's TransactionManager state name, None for a producer without transactional_id."""
        return None if self._txn is None else self._txn.state.value

    @property
    def transaction_coordinator(self) -> int | None:
        """The node id of this producer's transaction coordinator as last found (None: not yet,
        or no transactional_id): whoever completes a prepared transaction can start there
        (``TxnCoordinatorClient(..., coordinator=...)``) instead of asking FindCoordinator."""
        return None if self._txn is None else self._txn.client.coordinator

    def _require_txn(self) -> Transactions:
        if self._txn is None:
            raise TxnStateError("this producer has no transactional_id")
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the Producer is closed")
        return self._txn
