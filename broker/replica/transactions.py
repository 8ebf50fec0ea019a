"""The partition side of transactions (KIP-98, KIP-890 part 1): markers, the last stable offset,
the aborted-transaction index, and the leader's check that a transactional produce belongs to a
transaction the coordinator knows.

A producer's transaction on a partition opens with its first transactional batch (its offset is
the entry's ``current_txn_first_offset``) and ends with a control batch (the marker) that the
transaction coordinator has the leader write through WriteTxnMarkers. The last stable offset
(LSO) is ``min(first offset of the oldest open transaction, high watermark)``; read_committed
consumers read below it. An ABORT marker adds an entry to the log's ``.txnindex``
(``broker.log.txn_index``) so read_committed Fetch can name the aborted transactions of the range
it returns. The leader, a follower applying the leader's batches and the replay of the log on
recovery all go through ``record_batches``/``record_marker``, so the three build the same
producer state and index.

Marker checks (Kafka ``ProducerAppendInfo.appendEndTxnMarker``): a producer epoch older than the
stored one is INVALID_PRODUCER_EPOCH; a coordinator epoch older than the one of the producer's
last marker is TRANSACTION_COORDINATOR_FENCED (a deposed coordinator's late marker).

Verification (KIP-890 part 1): before the FIRST transactional batch of a (producer id, epoch)
transaction is appended to a partition, the leader asks the transaction coordinator whether the
partition was added to that producer's ongoing transaction, through a ``TxnVerifier``. Without
this a produce delayed past its transaction's end would open a transaction no coordinator knows
and hold the LSO forever (a "hanging transaction", Jepsen's finding in reference section 7).
"""

from __future__ import annotations

import bisect
from typing import Protocol

from broker.log import Log
from broker.log.txn_index import AbortedTxn, TransactionIndex
from broker.records import BatchHeader, ControlRecord, ControlType, iter_batches
from broker.records.control import read_marker
from broker.replica.producer_state import CompletedTxn, ProducerStateManager
from broker.wire import ErrorCode

__all__ = ["TxnVerifier", "RefusingTxnVerifier", "AcceptingTxnVerifier", "record_marker",
           "record_batches", "marker_error", "segment_bases", "needs_verification", "non_transactional_error",
           "VERIFICATION_PASSED_THROUGH", "produce_error_for_verification"]


class TxnVerifier(Protocol):
    """What the Produce handler asks before a producer's first transactional batch of a
    transaction lands on a partition. ``broker.server.txn_coordinator.TxnCoordinatorService``
    is one: it answers in-process for transactional ids this broker coordinates, else with a
    verify-only AddPartitionsToTxn (v4+) to the coordinator broker. The answer is an error code:
    NONE when (topic, partition) is in the producer's ongoing transaction at that epoch."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> int: ...


class RefusingTxnVerifier:
    """The broker's verifier while no transaction coordinator is wired: every transactional
    produce is refused INVALID_TXN_STATE (librdkafka treats 48 as permanent for those messages,
    rather than retrying forever)."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> int:
        return ErrorCode.INVALID_TXN_STATE


class AcceptingTxnVerifier:
    """Tests only: every partition counts as added to the transaction."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, int, str, int]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> int:
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        return ErrorCode.NONE


# Verification answers a client should see as they are; any other (the coordinator loading,
# moving, busy) becomes NOT_ENOUGH_REPLICAS, retriable for every client (Kafka does the same so
# that clients older than KIP-890 retry instead of failing).
VERIFICATION_PASSED_THROUGH = frozenset({
    ErrorCode.NONE, ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
})


def produce_error_for_verification(error: int, abortable: bool = False) -> int:
    """The Produce answer for a verification answer. PRODUCER_FENCED becomes
    INVALID_PRODUCER_EPOCH, what Kafka 4.1 answers a zombie's transactional Produce (compared in
    tests/peer/test_peer_txn_errors.py; Kafka's AddPartitionsToTxnManager converts it). A
    partition not in the transaction (the coordinator's TRANSACTION_ABORTABLE, which the core's
    in-process ``verify`` gives as INVALID_TXN_STATE) is TRANSACTION_ABORTABLE for a request
    that may carry it (``abortable``: Produce v11+, TxnOffsetCommit v4+; seen on Kafka 4.1),
    INVALID_TXN_STATE for older ones."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error in (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_TXN_STATE):
        return ErrorCode.TRANSACTION_ABORTABLE if abortable else ErrorCode.INVALID_TXN_STATE
    return error if error in VERIFICATION_PASSED_THROUGH else ErrorCode.NOT_ENOUGH_REPLICAS


def needs_verification(state: ProducerStateManager, header: BatchHeader) -> bool:
    """A transactional batch that would open a transaction here (none open for its producer at
    its epoch) must be verified first."""
    if not header.is_transactional or header.producer_id < 0:
        return False
    entry = state.get(header.producer_id)
    return not (entry is not None and entry.producer_epoch == header.producer_epoch
                and entry.current_txn_first_offset >= 0)


def non_transactional_error(state: ProducerStateManager, header: BatchHeader) -> str | None:
    """A plain batch from a producer with an open transaction here is refused (Kafka
    ``ProducerAppendInfo``: 'Expected transactional write'); the message, or None."""
    if header.is_transactional or header.producer_id < 0:
        return None
    entry = state.get(header.producer_id)
    if entry is not None and entry.current_txn_first_offset >= 0:
        return (f"expected a transactional write from producer {header.producer_id} at epoch "
                f"{header.producer_epoch}: its transaction is open since offset "
                f"{entry.current_txn_first_offset}")
    return None


def marker_error(state: ProducerStateManager, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int) -> tuple[int, str | None]:
    """May the coordinator write this marker? (error code, message)."""
    entry = state.get(producer_id)
    if entry is None:
        return ErrorCode.NONE, None
    if producer_epoch < entry.producer_epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH, (
            f"marker of producer {producer_id} at epoch {producer_epoch}, older than {entry.producer_epoch}")
    if coordinator_epoch < entry.coordinator_epoch:
        return ErrorCode.TRANSACTION_COORDINATOR_FENCED, (
            f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, older "
            f"than {entry.coordinator_epoch}")
    return ErrorCode.NONE, None


def segment_bases(log: Log) -> list[int]:
    """The base offsets of the log's segments; [0] for a log without segments (the simulator's
    in-memory log keeps its index in one list)."""
    return [segment.base_offset for segment in getattr(log, "segments", ())] or [0]


def segment_base_for(log: Log, offset: int) -> int:
    bases = segment_bases(log)
    return bases[max(0, bisect.bisect_right(bases, offset) - 1)]


def record_marker(log: Log, state: ProducerStateManager, txn_index: TransactionIndex,
                  header: BatchHeader, offset: int, marker: ControlRecord) -> CompletedTxn | None:
    """Apply a marker the log holds at ``offset``: end the producer's transaction and, for an
    abort of an open transaction, write its ``.txnindex`` entry."""
    completed = state.complete_txn(header, offset, marker.coordinator_epoch)
    if completed is not None and marker.type == ControlType.ABORT:
        txn_index.append(segment_base_for(log, offset),
                         AbortedTxn(completed.producer_id, completed.first_offset, offset,
                                    state.last_stable_offset_after(completed)))
    return completed


def record_batches(log: Log, state: ProducerStateManager, txn_index: TransactionIndex,
                   records, now_ms: int, from_offset: int = 0) -> int:
    """Apply the batches of ``records`` (whole batches the log holds, with their offsets) from
    ``from_offset`` on: a follower's append, the replay on recovery. Returns how many."""
    applied = 0
    for position, header in iter_batches(records):
        if header.last_offset < from_offset:
            continue
        if header.is_control and header.producer_id >= 0:
            record_marker(log, state, txn_index, header, header.base_offset,
                          read_marker(records, position, header))
        else:
            state.record_batch(header, header.base_offset, now_ms)
        applied += 1
    return applied
