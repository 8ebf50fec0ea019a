"""The transactional producer's state machine (``broker.client.txn_state``), table-driven: every
legal call moves to the state Java's TransactionManager moves to, every other call raises
TxnStateError and changes nothing, and error codes are classified as Java's handlers do."""

from __future__ import annotations

import pytest

from broker.client.errors import KafkaError
from broker.client.transactions import PreparedTransaction
from broker.client.txn_state import (
    ErrorKind,
    ProducerFencedError,
    TransactionAbortableError,
    TxnEvent,
    TxnState,
    TxnStateError,
    classify,
    fatal_or_abortable,
    next_state,
)
from broker.wire import ErrorCode

S, E = TxnState, TxnEvent

LEGAL = [
    (S.UNINITIALIZED, E.INIT, S.INITIALIZING),
    (S.INITIALIZING, E.INIT, S.INITIALIZING),
    (S.INITIALIZING, E.INIT_DONE, S.READY),
    (S.READY, E.BEGIN, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, E.SEND, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, E.SEND_OFFSETS, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, E.COMMIT, S.COMMITTING),
    (S.IN_TRANSACTION, E.ABORT, S.ABORTING),
    (S.IN_TRANSACTION, E.PREPARE, S.PREPARED),
    (S.COMMITTING, E.COMMIT, S.COMMITTING),
    (S.COMMITTING, E.END_DONE, S.READY),
    (S.ABORTING, E.ABORT, S.ABORTING),
    (S.ABORTING, E.END_DONE, S.READY),
    (S.PREPARED, E.COMMIT, S.COMMITTING),
    (S.PREPARED, E.ABORT, S.ABORTING),
    (S.PREPARED, E.END_DONE, S.READY),
    (S.IN_TRANSACTION, E.ABORTABLE, S.ABORTABLE_ERROR),
    (S.COMMITTING, E.ABORTABLE, S.ABORTABLE_ERROR),
    (S.ABORTABLE_ERROR, E.ABORT, S.ABORTING),
]


@pytest.mark.parametrize("state,event,expected", LEGAL)
def test_legal_transitions(state, event, expected):
    assert next_state(state, event) is expected


_LEGAL_PAIRS = {(s, e) for s, e, _ in LEGAL} | {(S.PREPARED, E.ABORTABLE), (S.ABORTABLE_ERROR, E.ABORTABLE),
                                                (S.ABORTING, E.ABORTABLE)}
ILLEGAL = [(s, e) for s in S for e in E if e is not E.FATAL and s is not S.FATAL_ERROR
           and (s, e) not in _LEGAL_PAIRS]


@pytest.mark.parametrize("state,event", ILLEGAL)
def test_every_other_call_is_refused(state, event):
    with pytest.raises(TxnStateError) as info:
        next_state(state, event)
    assert info.value.code == ErrorCode.INVALID_TXN_STATE
    assert state.value in str(info.value)


def test_illegal_examples_named():
    """The out-of-order calls a user makes: commit without begin, begin twice, send before
    init, begin before init, commit in an abortable error."""
    for state, event in [(S.READY, E.COMMIT), (S.IN_TRANSACTION, E.BEGIN), (S.UNINITIALIZED, E.SEND),
                         (S.UNINITIALIZED, E.BEGIN), (S.ABORTABLE_ERROR, E.COMMIT), (S.READY, E.SEND_OFFSETS)]:
        assert (state, event) in ILLEGAL


@pytest.mark.parametrize("state", list(S))
def test_fatal_is_reachable_from_anywhere_and_final(state):
    assert next_state(state, E.FATAL) is S.FATAL_ERROR
    for event in E:
        if event is not E.FATAL:
            with pytest.raises(TxnStateError, match="fatal"):
                next_state(S.FATAL_ERROR, event)


CLASSIFIED = [
    (ErrorCode.NONE, ErrorKind.NONE),
    (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorKind.RETRY),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorKind.RETRY),
    (ErrorCode.REQUEST_TIMED_OUT, ErrorKind.RETRY),
    (ErrorCode.NOT_COORDINATOR, ErrorKind.FIND_COORDINATOR),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorKind.FIND_COORDINATOR),
    (ErrorCode.PRODUCER_FENCED, ErrorKind.FATAL),
    (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorKind.FATAL),
    (ErrorCode.INVALID_TXN_STATE, ErrorKind.FATAL),
    (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorKind.FATAL),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorKind.FATAL),
    (ErrorCode.TRANSACTION_ABORTABLE, ErrorKind.ABORTABLE),
    (ErrorCode.ILLEGAL_GENERATION, ErrorKind.ABORTABLE),
    (ErrorCode.UNKNOWN_MEMBER_ID, ErrorKind.ABORTABLE),
    (ErrorCode.FENCED_INSTANCE_ID, ErrorKind.ABORTABLE),
    (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorKind.ABORTABLE),
    (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorKind.ABORTABLE),
    (ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorKind.ABORTABLE),
]


@pytest.mark.parametrize("code,kind", CLASSIFIED)
def test_error_classification(code, kind):
    assert classify(code) is kind


def test_exceptions_for_final_errors():
    assert isinstance(fatal_or_abortable(ErrorCode.PRODUCER_FENCED, "x"), ProducerFencedError)
    assert isinstance(fatal_or_abortable(ErrorCode.INVALID_PRODUCER_EPOCH, "x"), ProducerFencedError)
    assert isinstance(fatal_or_abortable(ErrorCode.ILLEGAL_GENERATION, "x"), TransactionAbortableError)
    plain = fatal_or_abortable(ErrorCode.INVALID_TXN_STATE, "x")
    assert type(plain) is KafkaError and plain.code == ErrorCode.INVALID_TXN_STATE


def test_prepared_transaction_round_trips_as_a_dict():
    prepared = PreparedTransaction("tx-1", 1234, 7, (("a", 0), ("b", 3)), has_offsets=True)
    import json

    assert PreparedTransaction.from_dict(json.loads(json.dumps(prepared.to_dict()))) == prepared


def test_stamp_producer_sets_the_transactional_bit_and_a_valid_crc():
    """A pre-encoded (Arrow) batch joins a transaction: producer fields, the transactional
    attribute bit and a CRC that still verifies; the payload is reused when nothing changes."""
    from broker.client.produce_request import produce_request, stamp_producer
    from broker.records import Record, decode_batch, encode_batch

    plain = encode_batch([Record(0, 1_000, b"k", b"v", ())], base_offset=0)
    stamped = stamp_producer(plain, 77, 3, 10, transactional=True)
    batch = decode_batch(bytes(stamped))  # checks the CRC
    assert batch.header.is_transactional
    assert (batch.header.producer_id, batch.header.producer_epoch, batch.header.base_sequence) == (77, 3, 10)
    assert stamp_producer(stamped, 77, 3, 10, transactional=True) is stamped
    idempotent = decode_batch(bytes(stamp_producer(plain, 77, 3, 10)))
    assert not idempotent.header.is_transactional
    assert produce_request([], -1, 1000, "tx-1")["transactional_id"] == "tx-1"
