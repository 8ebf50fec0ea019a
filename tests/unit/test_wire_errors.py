"""broker.wire.errors: the Kafka error-code table against the reference (section 5) and against
kafka-python's own table, and the exceptions' Kafka error codes."""

from __future__ import annotations

import inspect

import kafka.errors as kafka_errors
import pytest

from broker.wire.errors import (
    EncodeError,
    ErrorCode,
    MalformedMessage,
    MalformedRequest,
    UnknownApiKey,
    UnsupportedVersion,
)

# The reference's section 5 table plus the codes the brief names; (r) = retriable.
REFERENCE = {
    -1: ("UNKNOWN_SERVER_ERROR", False), 0: ("NONE", False), 1: ("OFFSET_OUT_OF_RANGE", False),
    2: ("CORRUPT_MESSAGE", False), 3: ("UNKNOWN_TOPIC_OR_PARTITION", True),
    5: ("LEADER_NOT_AVAILABLE", True), 6: ("NOT_LEADER_OR_FOLLOWER", True),
    7: ("REQUEST_TIMED_OUT", True), 10: ("MESSAGE_TOO_LARGE", False),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True), 15: ("COORDINATOR_NOT_AVAILABLE", True),
    16: ("NOT_COORDINATOR", True), 17: ("INVALID_TOPIC_EXCEPTION", False),
    18: ("RECORD_LIST_TOO_LARGE", False), 19: ("NOT_ENOUGH_REPLICAS", True),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True), 21: ("INVALID_REQUIRED_ACKS", False),
    22: ("ILLEGAL_GENERATION", False), 23: ("INCONSISTENT_GROUP_PROTOCOL", False),
    25: ("UNKNOWN_MEMBER_ID", False), 26: ("INVALID_SESSION_TIMEOUT", False),
    27: ("REBALANCE_IN_PROGRESS", False), 29: ("TOPIC_AUTHORIZATION_FAILED", False),
    35: ("UNSUPPORTED_VERSION", False), 36: ("TOPIC_ALREADY_EXISTS", False),
    37: ("INVALID_PARTITIONS", False), 38: ("INVALID_REPLICATION_FACTOR", False),
    40: ("INVALID_CONFIG", False), 41: ("NOT_CONTROLLER", True), 42: ("INVALID_REQUEST", False),
    44: ("POLICY_VIOLATION", False), 45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    46: ("DUPLICATE_SEQUENCE_NUMBER", False), 47: ("INVALID_PRODUCER_EPOCH", False),
    48: ("INVALID_TXN_STATE", False), 49: ("INVALID_PRODUCER_ID_MAPPING", False),
    50: ("INVALID_TRANSACTION_TIMEOUT", False), 51: ("CONCURRENT_TRANSACTIONS", True),
    52: ("TRANSACTION_COORDINATOR_FENCED", False), 53: ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False),
    55: ("OPERATION_NOT_ATTEMPTED", False), 56: ("KAFKA_STORAGE_ERROR", True),
    59: ("UNKNOWN_PRODUCER_ID", False), 74: ("FENCED_LEADER_EPOCH", True),
    75: ("UNKNOWN_LEADER_EPOCH", True), 76: ("UNSUPPORTED_COMPRESSION_TYPE", False),
    79: ("MEMBER_ID_REQUIRED", False), 82: ("FENCED_INSTANCE_ID", False), 87: ("INVALID_RECORD", False),
    88: ("UNSTABLE_OFFSET_COMMIT", True), 90: ("PRODUCER_FENCED", False), 100: ("UNKNOWN_TOPIC_ID", True),
    120: ("TRANSACTION_ABORTABLE", False),
}


@pytest.mark.parametrize("code", sorted(REFERENCE), ids=lambda c: REFERENCE[c][0])
def test_reference_codes(code):
    name, retriable = REFERENCE[code]
    member = ErrorCode(code)
    assert member.name == name
    assert member.retriable is retriable
    assert int(member) == code
    assert bool(member.message) == (code != 0)


def kafka_python_table() -> dict[int, bool]:
    table = {}
    for _, klass in inspect.getmembers(kafka_errors, inspect.isclass):
        if issubclass(klass, kafka_errors.BrokerResponseError) and isinstance(getattr(klass, "errno", None), int):
            table[klass.errno] = klass.retriable
    return table


def test_every_code_kafka_python_knows_is_in_the_table_with_the_same_retriable_flag():
    theirs = kafka_python_table()
    assert len(theirs) > 100
    mismatched = {code: (ErrorCode(code).retriable, r) for code, r in theirs.items() if ErrorCode(code).retriable != r}
    assert mismatched == {}


def test_exceptions_carry_kafka_error_codes_and_details():
    malformed = MalformedRequest("FetchPartition.fetch_offset", "8 bytes", "3 bytes left", 57)
    assert isinstance(malformed, MalformedMessage)
    assert malformed.kafka_error_code == ErrorCode.INVALID_REQUEST
    assert str(malformed) == "FetchPartition.fetch_offset: expected 8 bytes, found 3 bytes left (at byte 57)"
    assert UnsupportedVersion.kafka_error_code == ErrorCode.UNSUPPORTED_VERSION
    assert issubclass(UnknownApiKey, UnsupportedVersion)
    assert issubclass(EncodeError, ValueError)
