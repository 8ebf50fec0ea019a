"""KafkaError: code, name, message and retriability from the wire's error table."""

from __future__ import annotations

import pickle

import pytest

from broker.client.errors import (
    DeliveryFailed,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    error_name,
    raise_for_code,
)
from broker.wire import ErrorCode


@pytest.mark.parametrize("code, name, retriable", [
    (6, "NOT_LEADER_OR_FOLLOWER", True),
    (36, "TOPIC_ALREADY_EXISTS", False),
    (-1, "UNKNOWN_SERVER_ERROR", False),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
    (9999, "UNKNOWN_CODE_9999", False),
])
def test_error_fields_come_from_the_wire_table(code, name, retriable):
    exc = KafkaError(code, "context")
    assert (exc.code, exc.name, exc.retriable, exc.message) == (code, name, retriable, "context")
    assert str(exc) == f"{name} ({code}): context"
    assert error_name(code) == name


def test_default_message_is_the_tables():
    assert KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE).message == ErrorCode.OFFSET_OUT_OF_RANGE.message


def test_transport_errors_carry_kafka_codes():
    assert KafkaConnectionError("x").code == ErrorCode.NETWORK_EXCEPTION and KafkaConnectionError("x").retriable
    assert KafkaTimeoutError("x").code == ErrorCode.REQUEST_TIMED_OUT and KafkaTimeoutError("x").retriable
    assert not KafkaProtocolError("x").retriable
    assert all(issubclass(c, KafkaError) for c in (KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError))


@pytest.mark.parametrize("exc", [KafkaError(36, "m"), KafkaConnectionError("gone"), KafkaTimeoutError("slow"),
                                 KafkaProtocolError("bad")])
def test_errors_survive_pickling(exc):
    # Spark ships task exceptions back to the driver by pickle.
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and (back.code, back.message, str(back)) == (exc.code, exc.message, str(exc))


def test_delivery_failed_summarises_the_first_failure():
    class D:
        def __init__(self, error):
            self.error = error

    failures = [D(KafkaError(10, "too big")), D(KafkaError(19, "later"))]
    exc = DeliveryFailed(failures)
    assert exc.code == 10 and exc.failures == failures and "1 more" in str(exc)


def test_raise_for_code():
    raise_for_code(0)
    with pytest.raises(KafkaError) as info:
        raise_for_code(37, None, "topic 't'")
    assert info.value.code == 37 and info.value.message.startswith("topic 't': ")
