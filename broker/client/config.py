"""Client settings shared by connections, metadata, producer, consumer and admin, and the clock.

Every bound is named with its unit last and has Kafka's meaning (the Java client config in
brackets). Time reaches the client through a ``Clock`` so tests can drive it (STYLE.md); the one
exception is the socket's own timeout, which the OS measures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Protocol

__all__ = ["ClientConfig", "Clock", "SystemClock", "SYSTEM_CLOCK"]


@dataclass(frozen=True)
class ClientConfig:
    client_id: str = "pylog"
    # [request.timeout.ms] how long to wait for a response before failing the request
    request_timeout_ms: int = 30_000
    # [socket.connection.setup.timeout.ms] TCP connect plus ApiVersions negotiation
    connect_timeout_ms: int = 10_000
    # [receive.message.max.bytes in librdkafka] a response frame above this closes the connection
    response_bytes_max: int = 104_857_600
    # [max.in.flight.requests.per.connection] pipelined requests awaiting a response
    inflight_requests_max: int = 5
    # [metadata.max.age.ms] refresh cached metadata at least this often
    metadata_max_age_ms: int = 300_000
    # [retry.backoff.ms] pause before retrying a failed request
    retry_backoff_ms: int = 100
    # [allow.auto.create.topics] ask the broker to create unknown topics on Metadata (v4+)
    allow_auto_topic_creation: bool = False
    # [security.protocol, ssl.*, sasl.*] TLS and SASL (broker.client.security.client_security); None: PLAINTEXT
    security: object | None = None

    def __post_init__(self) -> None:
        for name in ("request_timeout_ms", "connect_timeout_ms", "response_bytes_max",
                     "inflight_requests_max", "metadata_max_age_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.retry_backoff_ms < 0:
            raise ValueError(f"retry_backoff_ms must be >= 0, got {self.retry_backoff_ms}")

    def with_(self, **changes) -> "ClientConfig":
        return replace(self, **changes)


class Clock(Protocol):
    def monotonic_ms(self) -> float:
        """Milliseconds on a clock that never goes back (deadlines, linger, metadata age)."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps)."""

    def sleep_ms(self, ms: float) -> None:
        """Block for ``ms`` milliseconds (backoff)."""


class SystemClock:
    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            time.sleep(ms / 1000.0)


SYSTEM_CLOCK = SystemClock()
