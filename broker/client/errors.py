"""The errors the client raises: one typed ``KafkaError`` carrying Kafka's error code.

A broker answers a failed operation with an error code (a value, ``broker.wire.ErrorCode``); the
client turns every such code it cannot handle itself into a ``KafkaError`` whose ``code``,
``name`` and ``retriable`` come from the wire's error table, so a caller can branch on
``exc.code == ErrorCode.TOPIC_ALREADY_EXISTS`` or on ``exc.retriable`` without parsing text.

Failures that never reached a broker's error table get the closest Kafka code, as the Java client
does: a dropped or refused connection is NETWORK_EXCEPTION (13, retriable), a request with no
answer in ``request_timeout_ms`` is REQUEST_TIMED_OUT (7, retriable). A peer that breaks the
protocol (wrong correlation id, oversize or unparsable frame) is ``KafkaProtocolError``: not
retriable, because the bytes say the peer is not the Kafka broker we think it is.
"""

from __future__ import annotations

from broker.wire import ErrorCode

__all__ = [
    "KafkaError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "KafkaProtocolError",
    "DeliveryFailed",
    "error_name",
    "raise_for_code",
]


def _known(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(code)
    except ValueError:
        return None


def error_name(code: int) -> str:
    """Kafka's name of ``code`` ("NOT_LEADER_OR_FOLLOWER"), or ``UNKNOWN_CODE_<n>``."""
    known = _known(code)
    return known.name if known is not None else f"UNKNOWN_CODE_{code}"


class KafkaError(Exception):
    """A Kafka error code with a message. ``str(exc)`` is ``"NAME (code): message"``."""

    retriable_override: bool | None = None

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = int(code)
        known = _known(self.code)
        self.name = known.name if known is not None else f"UNKNOWN_CODE_{self.code}"
        self.message = message if message else (known.message if known is not None else "")
        super().__init__(f"{self.name} ({self.code}): {self.message}")

    @property
    def retriable(self) -> bool:
        if self.retriable_override is not None:
            return self.retriable_override
        known = _known(self.code)
        return bool(known is not None and known.retriable)

    def __reduce__(self):  # keep the code through pickling (Spark ships exceptions back)
        return (type(self), (self.code, self.message))


class KafkaConnectionError(KafkaError):
    """The connection failed: refused, reset, closed by the peer. Retriable on a new connection."""

    def __init__(self, message: str, code: int = ErrorCode.NETWORK_EXCEPTION) -> None:
        super().__init__(code, message)

    def __reduce__(self):
        return (type(self), (self.message, self.code))


class KafkaTimeoutError(KafkaError):
    """No answer within the deadline (``request_timeout_ms``, ``delivery_timeout_ms``)."""

    def __init__(self, message: str, code: int = ErrorCode.REQUEST_TIMED_OUT) -> None:
        super().__init__(code, message)

    def __reduce__(self):
        return (type(self), (self.message, self.code))


class KafkaProtocolError(KafkaError):
    """The peer broke the wire protocol: correlation id out of order, a frame larger than
    ``response_bytes_max``, bytes that do not parse. The connection is closed."""

    retriable_override = False

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(code, message)

    def __reduce__(self):
        return (type(self), (self.message, self.code))


class DeliveryFailed(KafkaError):
    """``Producer.flush`` could not deliver some records. ``failures`` holds their ``Delivery``
    handles (each with its own ``error``); the code and message are those of the first."""

    def __init__(self, failures: list) -> None:
        assert failures, "DeliveryFailed needs at least one failure"
        first = failures[0].error
        more = f" (and {len(failures) - 1} more failed records)" if len(failures) > 1 else ""
        super().__init__(first.code, f"{first.message}{more}")
        self.failures = failures

    def __reduce__(self):
        return (type(self), (self.failures,))


def raise_for_code(code: int, message: str | None = None, context: str = "") -> None:
    """Raise ``KafkaError(code, ...)`` unless ``code`` is NONE; ``context`` names the resource."""
    if code == ErrorCode.NONE:
        return
    known = _known(code)
    text = message or (known.message if known is not None else "")
    raise KafkaError(code, f"{context}: {text}" if context else text)
