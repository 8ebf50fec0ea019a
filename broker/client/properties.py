"""Kafka's client property names (``linger.ms``, ``max.partition.fetch.bytes``...) to the
keyword arguments of ``Producer`` and ``Consumer``, for ``pylog perf --producer-props`` and
anyone holding a Kafka-style configuration. Unknown names raise ``ValueError`` naming them: a typo
must not be silently ignored.

Security names (``security.protocol``, ``ssl.*``, ``sasl.*``: ``broker.client.security``) become
the ``config`` argument (a ``ClientConfig`` carrying the TLS context and SASL credentials).
"""

from __future__ import annotations

import re

from broker.client.config import ClientConfig
from broker.client.security import SECURITY_PROPERTY_NAMES, client_security

__all__ = ["producer_options_from_properties", "consumer_options_from_properties", "parse_properties"]


def _flag(text) -> bool:
    return str(text).strip().lower() == "true"


_PRODUCER_PROPERTIES = {
    "acks": ("acks", str),
    "compression.type": ("compression", str),
    "enable.idempotence": ("enable_idempotence", _flag),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_bytes_max", int),
    "max.request.size": ("request_bytes_max", int),
    "buffer.memory": ("buffer_bytes_max", int),
    "retries": ("retries", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "max.block.ms": ("max_block_ms", int),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests", int),
    "client.id": ("client_id", str),
    "transactional.id": ("transactional_id", str),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
}


def producer_options_from_properties(props: dict[str, str]) -> dict:
    """Kafka producer property names (``linger.ms``...) to ``Producer`` keyword arguments."""
    return _options(props, _PRODUCER_PROPERTIES, "producer")


_CONSUMER_PROPERTIES = {
    "isolation.level": ("isolation_level", str),
    "auto.offset.reset": ("auto_offset_reset", str),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "fetch.buffer.bytes.max": ("fetch_buffer_bytes_max", int),
    "check.crcs": ("check_crcs", _flag),
    "request.timeout.ms": ("request_timeout_ms", int),
    "client.id": ("client_id", str),
    "group.id": ("group_id", str),
    "group.instance.id": ("group_instance_id", str),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "max.poll.interval.ms": ("max_poll_interval_ms", int),
    "partition.assignment.strategy": ("partition_assignment_strategy", str),
    "enable.auto.commit": ("enable_auto_commit", _flag),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "default.api.timeout.ms": ("default_api_timeout_ms", int),
}


def consumer_options_from_properties(props: dict[str, str]) -> dict:
    """Kafka consumer property names to ``Consumer`` keyword arguments."""
    return _options(props, _CONSUMER_PROPERTIES, "consumer")


def _options(props: dict[str, str], table: dict, what: str) -> dict:
    out, unknown = {}, []
    security = {name: text for name, text in props.items() if name in SECURITY_PROPERTY_NAMES}
    if security:
        out["config"] = ClientConfig(security=client_security(security))
    for name, text in props.items():
        if name in SECURITY_PROPERTY_NAMES:
            continue
        entry = table.get(name)
        if entry is None:
            unknown.append(name)
            continue
        option, parse = entry
        try:
            out[option] = parse(text)
        except ValueError:
            raise ValueError(f"invalid value {text!r} for {what} property {name}") from None
    if unknown:
        raise ValueError(f"unknown {what} properties: {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(table))})")
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` (client config files, broker server.properties): ``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` continuations."""
    props: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if _continues(stripped):
            logical += stripped[:-1]
            continue
        logical += stripped
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _continues(line: str) -> bool:
    """An odd number of trailing backslashes continues the line (an even number is escaped)."""
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
    if not match:
        return line, ""
    return match.group(1), match.group(2).strip()
