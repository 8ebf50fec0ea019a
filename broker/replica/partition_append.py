"""A leader's appends to its partition: client produce, transaction markers, coordinators' batches.

The largest part of ``Partition`` (``broker.replica.partition``), kept in a module of its own
because its checks are read together, in the order Kafka makes them: acks=all against
``min.insync.replicas``; the batch's structure (Produce v3+: exactly one batch, no control
batch, base offset 0); KIP-890 verification of a batch that opens a transaction; record keys
(compacted topics) and timestamps; then producer sequences (KIP-98), with a corrupt batch
reported before a sequence error. Nothing is appended on any error, and operating errors come
back as the ``AppendResult``'s error code. ``PartitionAppend`` is the base class of
``Partition``: its methods use the partition's fields (set in ``Partition.__init__``) and run
on the event loop's thread, one at a time, so the checks and the append are atomic.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from broker.log import LogError
from broker.records import (
    BatchHeader,
    BatchLimits,
    ControlRecord,
    ControlType,
    RecordsError,
    encode_control_batch,
    read_header,
)
from broker.replica.append_checks import (
    BadBatch,
    as_kafka_answers,
    batch_headers,
    check_records,
    first_corrupt_batch,
)
from broker.replica import transactions as txn
from broker.replica.producer_state import Duplicate, Rejected
from broker.replica.timestamps import check_timestamps
from broker.wire import ErrorCode

__all__ = ["AppendResult", "PartitionAppend"]

logger = logging.getLogger(__name__)

# Refusals Kafka answers without the log start offset and without record errors
# (ReplicaManager.appendToLocalLog gives them LogAppendInfo.UNKNOWN_LOG_APPEND_INFO); every
# other refusal carries both (compared in tests/peer/test_peer_errors.py).
_REFUSED_WITHOUT_LOG_START = frozenset({
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.KAFKA_STORAGE_ERROR,
})


class AppendResult(NamedTuple):
    """One partition's Produce outcome. ``last_offset`` is -1 unless data was (or had been)
    appended; acks=all waits until the high watermark passes it, while ``leader_term`` holds."""

    error_code: int
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    batch_index: int = -1  # the failing batch (KIP-467 record_errors), -1 when none
    record_errors: tuple[tuple[int, str], ...] = ()  # (record index, message), when per record
    leader_term: int = -1


class PartitionAppend:
    """The leader's append path of ``Partition`` (see the module docstring)."""

    def append_as_leader(self, records: memoryview | None, required_acks: int,
                         limits: BatchLimits, txn_verified: bool = False,
                         txn_guard: object | None = None) -> AppendResult:
        """Validate, check producer sequences, append, and move the high watermark. Operating
        errors come back as the result's error code; nothing is appended on any error.

        Produce v3+ carries exactly one record batch per partition (Kafka
        ``ProduceRequest.validateRecords``); anything else is INVALID_RECORD. A transactional
        batch that would open a transaction here needs the coordinator's word that the partition
        is in the producer's transaction (KIP-890), else INVALID_TXN_STATE: ``txn_guard`` from
        ``start_txn_verification`` taken before asking, still current (no marker of that
        producer came meanwhile), or ``txn_verified`` from a caller that knows."""
        assert self.is_leader, "the replica manager routes produce to leaders only"
        if required_acks == -1 and len(self.isr) < self.effective_min_isr:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                error_message=f"ISR {list(self.isr)} is smaller than "
                                              f"min.insync.replicas={self.effective_min_isr}")
        limits = self._append_limits(limits)
        records = memoryview(b"") if records is None else records
        try:
            headers = batch_headers(records, limits)
        except BadBatch as bad:
            return self._error(as_kafka_answers(bad.error, records))
        if len(headers) != 1:
            return self._error(Rejected(ErrorCode.INVALID_RECORD,
                                        f"a produce request must carry exactly one record batch "
                                        f"per partition, found {len(headers)}"))
        if headers[0].is_control:  # Kafka's LogValidator: clients may not write control records
            return self._error(Rejected(ErrorCode.INVALID_RECORD,
                                        "clients are not allowed to write control records", -1))
        if headers[0].base_offset != 0:  # Kafka's LogValidator: the leader assigns every offset
            return self._error(Rejected(ErrorCode.INVALID_RECORD,
                                        f"the baseOffset of the record batch in the append to {self.topic}-"
                                        f"{self.partition} should be 0, but it is {headers[0].base_offset}", -1))
        refused = self._txn_refusal(headers[0], txn_verified, txn_guard)
        if refused is not None:
            return self._error(refused)
        bad_records = check_records(records, limits,
                                     (self.topic, self.partition) if self.log.config.compact else None)
        if bad_records is not None:
            return self._error(bad_records)
        bad_times = check_timestamps(records, headers[0], self.log.config, self._now_ms(), limits)
        if bad_times is not None:
            return self._error(bad_times)
        verdict = self.producer_state.check_append(headers)
        if not isinstance(verdict, (Rejected, Duplicate)):
            return self._append(records, headers, limits)
        corrupt = first_corrupt_batch(records, limits)
        if corrupt is not None:  # CRC before sequences, as Kafka validates records first
            return self._error(corrupt.error)
        if verdict.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER if isinstance(verdict, Rejected) else False:
            logger.info("%s-%d: %s", self.topic, self.partition, verdict.message)
        if isinstance(verdict, Duplicate):
            batch = verdict.batch
            # Kafka answers a duplicate's log append time with the batch's max timestamp, whatever
            # the topic's timestamp type (UnifiedLog.append; compared in tests/peer).
            return AppendResult(ErrorCode.NONE, batch.first_offset, batch.last_offset, batch.timestamp,
                                self.log.log_start_offset, leader_term=self.leader_term)
        return self._error(verdict._replace(batch_index=-1))  # Kafka: no record errors for sequences

    def needs_txn_verification(self, header: BatchHeader) -> bool:
        return txn.needs_verification(self.producer_state, header)

    def start_txn_verification(self, producer_id: int) -> object:
        """A guard for a verification about to be asked (Kafka ``VerificationGuard``): the
        append it allows must come before any marker of ``producer_id``, which drops the guard.
        Otherwise a produce verified just before its transaction ended would open a new
        transaction no coordinator knows (a hanging transaction)."""
        guard = self._txn_guards.get(producer_id)
        if guard is None:
            guard = self._txn_guards[producer_id] = object()
        return guard

    def _txn_refusal(self, header: BatchHeader, verified: bool, guard: object | None) -> Rejected | None:
        if guard is not None and guard is self._txn_guards.get(header.producer_id):
            verified = True
        if header.is_transactional and not verified and self.needs_txn_verification(header):
            return Rejected(ErrorCode.INVALID_TXN_STATE,
                            f"producer {header.producer_id} epoch {header.producer_epoch}: "
                            f"{self.topic}-{self.partition} was not verified as part of its transaction")
        plain = txn.non_transactional_error(self.producer_state, header)
        return None if plain is None else Rejected(ErrorCode.INVALID_TXN_STATE, plain)

    def append_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                          committed: bool) -> AppendResult:
        """WriteTxnMarkers: append the COMMIT or ABORT control batch of ``producer_id``'s
        transaction as leader (Kafka appends it with acks=all: the caller waits for the high
        watermark to pass ``last_offset``). Refused without appending: NOT_ENOUGH_REPLICAS
        below ``min.insync.replicas``, INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED
        by ``transactions.marker_error``."""
        assert self.is_leader, "markers go to leaders"
        if len(self.isr) < self.effective_min_isr:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                error_message=f"ISR {list(self.isr)} is smaller than "
                                              f"min.insync.replicas={self.effective_min_isr}")
        error, message = txn.marker_error(self.producer_state, producer_id, producer_epoch,
                                          coordinator_epoch)
        if error != ErrorCode.NONE:
            return AppendResult(error, error_message=message)
        marker = ControlRecord(ControlType.COMMIT if committed else ControlType.ABORT, coordinator_epoch)
        batch = encode_control_batch(marker, offset=0, timestamp=self._now_ms(),
                                     producer_id=producer_id, producer_epoch=producer_epoch)
        try:
            info = self.log.append_as_leader(batch, self.leader_epoch)
        except (RecordsError, LogError) as exc:
            return AppendResult(getattr(exc, "kafka_error_code", ErrorCode.UNKNOWN_SERVER_ERROR),
                                error_message=str(exc))
        header = read_header(batch)._replace(base_offset=info.first_offset)
        txn.record_marker(self.log, self.producer_state, self.txn_index, header, info.first_offset, marker)
        self._txn_guards.pop(producer_id, None)
        self._on_high_watermark(self.log_end_key)
        self._maybe_increment_high_watermark()
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset, -1,
                            self.log.log_start_offset, leader_term=self.leader_term)

    def append_as_coordinator(self, records: memoryview, limits: BatchLimits,
                              txn_guard: object | None = None) -> AppendResult:
        """A coordinator's own batch to its internal topic (acks=all): the broker built it (one
        uncompressed batch, producer id -1, every record keyed), so the client-facing checks of
        ``append_as_leader`` (record keys and timestamps, producer sequences) are skipped; the
        ISR rule for acks=all, the structural checks and the log's own validation still apply.
        A transactional batch (the group coordinator's TxnOffsetCommit: the producer's id and
        epoch, sequence -1) opens or continues its producer's transaction here and must present
        the ``txn_guard`` of its KIP-890 verification when it opens one (INVALID_TXN_STATE else)."""
        assert self.is_leader, "coordinators write to partitions they lead"
        if len(self.isr) < self.effective_min_isr:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                error_message=f"ISR {list(self.isr)} is smaller than "
                                              f"min.insync.replicas={self.effective_min_isr}")
        limits = self._append_limits(limits)
        try:
            headers = batch_headers(records, limits)
        except BadBatch as bad:
            return self._error(bad.error)
        assert len(headers) == 1 and not headers[0].is_control, "a coordinator appends one batch of its own"
        if headers[0].producer_id >= 0:
            assert headers[0].is_transactional, "a coordinator's batch with a producer is transactional"
            refused = self._txn_refusal(headers[0], False, txn_guard)
            if refused is not None:
                return self._error(refused)
        return self._append(records, headers, limits)

    def _append_limits(self, limits: BatchLimits) -> BatchLimits:
        """The broker's limits with this topic's ``max.message.bytes``, made once per change
        (``_replace`` on every produce was a measurable part of a small one)."""
        key = (limits, self.log.config.message_max_bytes)
        if self._limits_key != key:
            self._limits_key = key
            self._limits = limits._replace(batch_bytes_max=key[1])
        return self._limits

    def _append(self, records: memoryview, headers: list[BatchHeader],
                limits: BatchLimits) -> AppendResult:
        try:
            info = self.log.append_as_leader(records, self.leader_epoch)
        except RecordsError as exc:
            return self._error(as_kafka_answers(Rejected(exc.kafka_error_code, str(exc), -1), records))
        except LogError as exc:
            return self._error(Rejected(exc.kafka_error_code, str(exc), -1))
        assert info.batches == len(headers), "the log appends exactly the batches we checked"
        self.producer_state.record_append(headers, info.first_offset, self._now_ms())
        if headers[0].is_transactional and self._txn_guards:
            self._txn_guards.pop(headers[0].producer_id, None)  # the transaction is open now
        self._on_high_watermark(self.log_end_key)  # wakes follower long polls
        self._maybe_increment_high_watermark()
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset,
                            info.log_append_time, self.log.log_start_offset,
                            leader_term=self.leader_term)

    def _error(self, rejected: Rejected) -> AppendResult:
        if rejected.error_code in _REFUSED_WITHOUT_LOG_START:
            return AppendResult(rejected.error_code, error_message=rejected.message)
        return AppendResult(rejected.error_code, error_message=rejected.message,
                            batch_index=rejected.batch_index,
                            record_errors=rejected.record_errors,
                            log_start_offset=self.log.log_start_offset)

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas``, but never more than the partition has replicas (Kafka's
        ``Partition.effectiveMinIsr``, KIP-966): an RF=1 topic with min.insync.replicas=2
        accepts acks=all, as on Kafka 4 (compared in tests/peer/test_peer_errors.py)."""
        return min(self.min_insync_replicas, max(1, len(self.replicas)))

    def check_enough_replicas_reach_offset(self, required_offset: int, leader_term: int) -> tuple[bool, int]:
        """acks=all completion (Kafka ``checkEnoughReplicasReachOffset``): (done, error code).
        Done with NONE once the high watermark reaches ``required_offset`` (the batch's last
        offset + 1) with the ISR at least ``min.insync.replicas``; NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if the ISR shrank below it; NOT_LEADER_OR_FOLLOWER if leadership was lost meanwhile."""
        if not self.is_leader or self.leader_term != leader_term:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return False, ErrorCode.NONE
        if len(self.isr) < self.effective_min_isr:
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return True, ErrorCode.NONE
