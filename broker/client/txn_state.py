"""The transactional producer's state machine, pure: which call is legal in which state, and
what an error code from the coordinator or a partition does to the transaction. Kafka's Java
``TransactionManager`` states and rules (read to learn the facts; nothing here is I/O).

States::

    UNINITIALIZED --init_transactions--> INITIALIZING --ok--> READY
    READY --begin--> IN_TRANSACTION --commit--> COMMITTING --ok--> READY
                                    --abort---> ABORTING ---ok--> READY
                                    --prepare-> PREPARED --complete(ok)--> READY
    IN_TRANSACTION / COMMITTING(failed send) --abortable error--> ABORTABLE_ERROR --abort--> ABORTING
    any --fatal error (fenced, authorization, bug)--> FATAL_ERROR   (only close() is left)

A failed EndTxn that may be retried (a timeout, a coordinator move) leaves COMMITTING or
ABORTING, and the same call again resumes it: Java's "retry the same commit" rule. An abort is
legal from ABORTABLE_ERROR; a commit there raises the error that made it abortable.
"""

from __future__ import annotations

import enum

from broker.client.errors import KafkaError
from broker.wire import ErrorCode

__all__ = ["TxnState", "TxnEvent", "ErrorKind", "ProducerFencedError", "TransactionAbortableError",
           "TxnStateError", "next_state", "classify", "fatal_or_abortable"]


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING = "CommittingTransaction"
    ABORTING = "AbortingTransaction"
    PREPARED = "PreparedTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


class TxnEvent(enum.Enum):
    INIT = "init_transactions"
    INIT_DONE = "init done"
    BEGIN = "begin_transaction"
    SEND = "send"
    SEND_OFFSETS = "send_offsets_to_transaction"
    COMMIT = "commit_transaction"
    ABORT = "abort_transaction"
    PREPARE = "prepare_transaction"
    END_DONE = "EndTxn done"
    ABORTABLE = "abortable error"
    FATAL = "fatal error"


S, E = TxnState, TxnEvent
# (state, event) -> next state; a pair missing here is an illegal call (TxnStateError).
_TRANSITIONS: dict[tuple[TxnState, TxnEvent], TxnState] = {
    (S.UNINITIALIZED, E.INIT): S.INITIALIZING,
    (S.INITIALIZING, E.INIT): S.INITIALIZING,  # a retry after a timeout resumes it
    (S.INITIALIZING, E.INIT_DONE): S.READY,
    (S.READY, E.BEGIN): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, E.SEND): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, E.SEND_OFFSETS): S.IN_TRANSACTION,
    (S.IN_TRANSACTION, E.COMMIT): S.COMMITTING,
    (S.IN_TRANSACTION, E.ABORT): S.ABORTING,
    (S.IN_TRANSACTION, E.PREPARE): S.PREPARED,
    (S.COMMITTING, E.COMMIT): S.COMMITTING,
    (S.COMMITTING, E.END_DONE): S.READY,
    (S.ABORTING, E.ABORT): S.ABORTING,
    (S.ABORTING, E.END_DONE): S.READY,
    (S.PREPARED, E.END_DONE): S.READY,
    (S.PREPARED, E.COMMIT): S.COMMITTING,  # this instance completes its own prepared transaction
    (S.PREPARED, E.ABORT): S.ABORTING,
    (S.ABORTABLE_ERROR, E.ABORT): S.ABORTING,
    (S.IN_TRANSACTION, E.ABORTABLE): S.ABORTABLE_ERROR,
    (S.COMMITTING, E.ABORTABLE): S.ABORTABLE_ERROR,  # a batch failed during the commit's flush
    (S.PREPARED, E.ABORTABLE): S.ABORTABLE_ERROR,
    (S.ABORTABLE_ERROR, E.ABORTABLE): S.ABORTABLE_ERROR,
    (S.ABORTING, E.ABORTABLE): S.ABORTING,  # an abort is already under way
}


class TxnStateError(KafkaError):
    """A transactional call out of order (Java's IllegalStateException / KafkaException)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_TXN_STATE, message)


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional.id has a newer epoch: this one is a zombie
    and can only be closed (fatal, as Java's ProducerFencedException)."""


class TransactionAbortableError(KafkaError):
    """The open transaction cannot commit; ``abort_transaction()`` and go on."""


def next_state(state: TxnState, event: TxnEvent) -> TxnState:
    """The state after ``event``; FATAL is reachable from anywhere and final; illegal pairs raise
    ``TxnStateError`` naming the state (the producer's state does not change)."""
    if event is E.FATAL:
        return S.FATAL_ERROR
    if state is S.FATAL_ERROR:
        raise TxnStateError(f"cannot {event.value}: the producer is in a fatal error state; close it")
    following = _TRANSITIONS.get((state, event))
    if following is None:
        raise TxnStateError(f"cannot {event.value} in state {state.value}")
    return following


class ErrorKind(enum.Enum):
    NONE = "none"
    RETRY = "retry"              # the same request again after a backoff
    FIND_COORDINATOR = "lookup"  # the coordinator moved: look it up again, then retry
    ABORTABLE = "abortable"      # the transaction must be aborted
    FATAL = "fatal"              # the producer can only be closed


_RETRY = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
          ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
_LOOKUP = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_FATAL = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.UNSUPPORTED_VERSION,
          ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.INVALID_TRANSACTION_TIMEOUT,
          ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND}
_ABORTABLE = {ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
              ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
              ErrorCode.FENCED_INSTANCE_ID, ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.UNKNOWN_PRODUCER_ID,
              ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER}


def classify(code: int) -> ErrorKind:
    """What an error code in a coordinator's answer (InitProducerId, AddPartitionsToTxn,
    AddOffsetsToTxn, TxnOffsetCommit, EndTxn) means for the transaction (Java's handlers):
    PRODUCER_FENCED and INVALID_PRODUCER_EPOCH fence the producer; INVALID_TXN_STATE is a bug or
    a race the client cannot repair (fatal, as Java); KIP-447 group fencing and per-partition
    failures abort the transaction only."""
    if code == ErrorCode.NONE:
        return ErrorKind.NONE
    if code in _RETRY:
        return ErrorKind.RETRY
    if code in _LOOKUP:
        return ErrorKind.FIND_COORDINATOR
    if code in _FATAL:
        return ErrorKind.FATAL
    if code in _ABORTABLE:
        return ErrorKind.ABORTABLE
    error = KafkaError(code)
    return ErrorKind.RETRY if error.retriable else ErrorKind.ABORTABLE


def fatal_or_abortable(code: int, message: str) -> KafkaError:
    """The exception a final error code raises: ``ProducerFencedError`` for a fence,
    ``TransactionAbortableError`` for an abortable error, else ``KafkaError``."""
    if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
        return ProducerFencedError(code, message)
    if classify(code) is ErrorKind.ABORTABLE:
        return TransactionAbortableError(code, message)
    return KafkaError(code, message)
