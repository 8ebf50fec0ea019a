"""How a sent batch ends, and the producer identity its bytes carry.

The sender's I/O plumbing (``broker.client.sender``: turns, the selector, building requests) is
kept apart from what happens to a batch once its request is answered or lost: acknowledged,
retried with the same bytes, failed for good, expired past ``delivery_timeout_ms``. Those
outcomes decide the producer id, epoch and sequences later batches are stamped with (a batch
failed for good forces a new producer id; a transactional one dooms the open transaction), so
InitProducerId and AddPartitionsToTxn live here too. ``BatchOutcomes`` is the base class of
``Sender``: its methods use the sender's fields (set in ``Sender.__init__``) and run with the
locks its docstring names.

Idempotence: sequences are assigned when a batch is first sent, in queue order, so a retried
batch keeps its sequence and the broker deduplicates it (reference section 4). A partition has
one batch in flight until the broker has acknowledged one of the current producer id and epoch
(``_sequence_known``): a broker without state for the producer takes any first sequence, so a
batch pipelined behind a refused first one could start the partition mid-sequence. With several
batches of a partition in flight, a failure of one makes the later ones come back with
OUT_OF_ORDER_SEQUENCE_NUMBER; that answer is retriable while an earlier batch of the partition
awaits its retry (it says "not written"), and the accumulator then resends from the first
unacknowledged batch, in order. A batch that fails for good leaves a gap in the sequence, so
once nothing is in flight the producer takes a fresh producer id and restamps the batches not
yet written (sequences from 0); batches whose outcome is unknown (an attempt timed out or lost
its connection) are failed instead of being restamped, because resending them under a new id
could write them twice.
"""

from __future__ import annotations

import logging

from broker.client.accumulator import IN_FLIGHT, ProducerBatch
from broker.client.delivery import Delivery
from broker.client.errors import KafkaError, KafkaProtocolError, KafkaTimeoutError
from broker.client.produce_request import produce_error_text
from broker.wire import ApiKey, ErrorCode

_log = logging.getLogger(__name__)

__all__ = ["BatchOutcomes", "format_tp"]


class BatchOutcomes:
    """The outcomes and producer-identity half of ``Sender`` (see the module docstring)."""

    # ------------------------------------------------------------------ producer id

    def _init_producer_id(self) -> None:
        """InitProducerId without a transactional id; a final error fails what is queued."""
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
            with self._state.cond:
                self._pid_retry_at = self._clock.monotonic_ms() + self._s.config.retry_backoff_ms
                if not exc.retriable:
                    for batch in list(self._acc.batches()):
                        if batch.state != IN_FLIGHT:
                            self._fail(batch, exc, reset=False)
                    self._state.cond.notify_all()
                else:
                    for batch in self._acc.batches():
                        batch.last_error = exc
            return
        with self._state.lock:
            self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
            self._sequences.clear()
            self._sequence_known.clear()
            self._state.stats["producer_ids"] += 1

    # ------------------------------------------------------------------ transactions

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """The id and epoch InitProducerId (or a transaction version 2 EndTxn) gave a
        transactional producer (I/O lock held). Sequences restart at 0; partitions where the
        broker knows this producer id stay known: at a new epoch it takes sequence 0 only."""
        with self._state.lock:
            if producer_id != self._producer_id:
                self._sequence_known.clear()
            self._producer_id, self._producer_epoch = producer_id, producer_epoch
            self._sequences.clear()
            self._state.stats["producer_ids"] += 1

    def _partitions_to_add(self, now: float) -> list[tuple[str, int]]:
        """Partitions with queued batches that the open transaction does not hold yet (lock held);
        none at transaction version 2 (``_take_batches`` counts a partition in once a batch of it goes
        out in a Produce v12, which has the leader add it)."""
        if self.txn_added is None or self.txn_v2 or self._producer_id < 0 or now < self._pid_retry_at:
            return []
        return [tp for tp in self._acc.partitions() if tp not in self.txn_added]

    def _add_partitions(self, tps: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for every partition in ``tps`` at once, before their first batch
        (Java's rule: a batch goes out only after its partition is in the transaction). A
        retriable failure leaves the batches queued (their delivery timeout bounds it); a final
        one fails them and dooms the transaction."""
        deadline = self._clock.monotonic_ms() + self._s.config.request_timeout_ms
        try:
            self.txn_client.add_partitions(self._producer_id, self._producer_epoch, tps, deadline)
        except KafkaError as exc:
            with self._state.cond:
                self._pid_retry_at = self._clock.monotonic_ms() + self._s.config.retry_backoff_ms
                wanted = set(tps)
                for batch in list(self._acc.batches()):
                    if batch.tp in wanted and batch.state != IN_FLIGHT:
                        if exc.retriable:
                            batch.last_error = exc
                        else:
                            self._fail(batch, exc, reset=False)
                self._state.cond.notify_all()
            return
        with self._state.lock:
            self.txn_added.update(tps)
            self._state.stats["txn_partitions_added"] += len(tps)

    def _reset_producer_id(self) -> None:
        """After a batch failed for good: restamp what was not written under a new id (lock held)."""
        self._reset_pending = False
        self._producer_id, self._producer_epoch = -1, -1
        self._sequences.clear()
        self._sequence_known.clear()
        for batch in list(self._acc.batches()):
            if not batch.stamped:
                continue
            if batch.outcome_unknown:
                cause = batch.last_error or KafkaTimeoutError("no answer")
                self._fail(batch, KafkaError(
                    getattr(cause, "code", ErrorCode.UNKNOWN_SERVER_ERROR),
                    f"{format_tp(batch.tp)}: not retried under a new producer id because an earlier "
                    f"attempt may have been written ({cause})"), reset=False)
                continue
            batch.base_sequence = -1
            self._acc.requeue(batch)
        self._state.cond.notify_all()

    # ------------------------------------------------------------------ answers

    def _handle_response(self, batches: list[ProducerBatch], response) -> None:
        answers = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                self._retry_or_fail([batch], KafkaProtocolError(
                    f"Produce response has no answer for {format_tp(batch.tp)}"), unknown=True)
                continue
            code = answer.error_code
            if code == ErrorCode.NONE:
                self._succeed(batch, answer.base_offset, answer.log_append_time_ms)
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self._succeed(batch, -1, -1)  # written before; the broker no longer knows where
            else:
                error = KafkaError(code, produce_error_text(batch, answer))
                if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._after_a_gap(batch):
                    error.retriable_override = True  # an earlier batch was not written: resend in order
                self._cluster.on_partition_error(batch.tp[0], code)
                self._retry_or_fail([batch], error, unknown=False)

    def _after_a_gap(self, batch: ProducerBatch) -> bool:
        """True when ``batch`` is not the partition's next sequence: an earlier batch of the
        partition is not acknowledged yet (awaits a retry, or is still in flight), or one was
        failed (lock held). Java's rule (``TransactionManager.canRetry``: not ``isNextSequence``):
        the broker refused this batch because it has not written the earlier ones yet, so it
        was not written and is resent after them. An earlier batch still in flight happens when
        a broker runs a connection's pipelined requests concurrently and a later one overtakes
        an earlier one that waits (pylog's Produce awaiting KIP-890 verification)."""
        if self._reset_pending:
            return True
        for other in self._acc.batches():
            if other is batch:
                return False
            if other.tp == batch.tp:
                return True
        return False

    # ------------------------------------------------------------------ outcomes (lock held)

    def _succeed(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        self._acc.remove(batch)
        if batch.producer_id == self._producer_id and batch.producer_epoch == self._producer_epoch:
            self._sequence_known.add(batch.tp)
        batch.base_offset = base_offset
        batch.log_append_time_ms = log_append_time_ms if log_append_time_ms is not None else -1
        batch.completed_ms = self._clock.monotonic_ms()
        batch.done = True  # last: every Delivery of the batch reads the fields above through it
        self._state.stats["records_acknowledged"] += batch.record_count
        if batch.callbacks:
            self._callbacks_due(batch)

    def _retry_or_fail(self, batches: list[ProducerBatch], error: KafkaError, unknown: bool) -> None:
        now = self._clock.monotonic_ms()
        for batch in batches:
            if batch.state != IN_FLIGHT:
                continue
            batch.attempts += 1
            batch.last_error = error
            batch.outcome_unknown = batch.outcome_unknown or unknown
            expired = now - batch.created_ms >= self._s.delivery_timeout_ms
            if error.retriable and batch.attempts <= self._s.retries and not expired:
                self._acc.mark_retry(batch, now + self._s.config.retry_backoff_ms)
                self._state.stats["retries"] += 1
            else:
                self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: KafkaError, reset: bool = True) -> None:
        self._acc.remove(batch)
        if self.txn_added is not None:
            # A transactional batch that fails dooms the open transaction (it must be aborted;
            # the abort's markers end its sequences' meaning), no new producer id here.
            if self.txn_failure is None:
                self.txn_failure = error
        elif reset and self._s.idempotent and batch.stamped:
            self._reset_pending = True  # its sequences leave a gap: later batches need a new id
        batch.error = error
        batch.completed_ms = self._clock.monotonic_ms()
        batch.done = True
        self._state.unreported.append(batch)
        self._state.stats["records_failed"] += batch.record_count
        if batch.callbacks:
            self._callbacks_due(batch)

    def _callbacks_due(self, batch: ProducerBatch) -> None:
        """Queue a completed batch's ``on_delivery`` callbacks for the I/O thread (lock held);
        wake it when this is a user thread's turn (a no-op when it is awake)."""
        self._state.callbacks_due.append(batch)
        self._state.wake()

    def _run_callbacks(self) -> None:
        """Call the due ``on_delivery`` callbacks, in completion order (so a partition's in send
        order), outside every lock: a callback may ``produce``. Its exception is logged, not
        raised: the I/O thread must go on. A failure given to a callback counts as reported
        (``flush`` does not raise it again)."""
        state = self._state
        with state.lock:
            due, state.callbacks_due = state.callbacks_due, []
            state.callbacks_running = True
        reported = []
        try:
            for batch in due:
                for index, timestamp, callback in batch.callbacks:
                    delivery = Delivery(batch, index, timestamp)
                    if batch.error is not None:
                        reported.append(delivery)
                    try:
                        callback(batch.error, delivery)
                    except Exception:
                        _log.exception("on_delivery callback %r raised; the producer goes on", callback)
        finally:
            with state.cond:
                state.reported.update(reported)
                state.callbacks_running = False
                state.cond.notify_all()

    def _expire(self, now: float) -> None:
        """Fail batches older than ``delivery_timeout_ms`` that are not in flight (lock held)."""
        deadline = now - self._s.delivery_timeout_ms
        expired = []
        for oldest in list(self._acc.oldest_waiting()):  # younger batches expire after these
            if oldest.created_ms <= deadline:
                expired.extend(b for b in self._acc.batches()
                               if b.tp == oldest.tp and b.state != IN_FLIGHT and b.created_ms <= deadline)
        for batch in expired:
            cause = f": last error {batch.last_error}" if batch.last_error else ""
            self._fail(batch, KafkaTimeoutError(
                f"{format_tp(batch.tp)}: {batch.record_count} record(s) not delivered within "
                f"delivery_timeout_ms ({self._s.delivery_timeout_ms}){cause}"))
        if expired:
            self._state.cond.notify_all()

    def _abandon_unsent(self) -> None:
        error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer closed before the record was sent")
        for batch in list(self._acc.batches()):
            if batch.state != IN_FLIGHT:
                self._fail(batch, error, reset=False)
        self._state.cond.notify_all()


def format_tp(tp: tuple[str, int]) -> str:
    """``topic-partition``, as Kafka writes a partition in messages."""
    return f"{tp[0]}-{tp[1]}"
