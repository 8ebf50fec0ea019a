"""Topic name rules, as Kafka's ``org.apache.kafka.common.internals.Topic`` enforces them.

A topic name becomes a directory name (``<topic>-<partition>``), a znode name and part of metric
names, hence the rules: it must be a safe path component on every filesystem (no "/", not "." or
".."), short enough that ``<topic>-<partition>`` plus a suffix fits in 255 bytes (249 chars), and
drawn from ``[a-zA-Z0-9._-]``.

Metric names replace "." with "_", so "a.b" and "a_b" would report into the same metrics. Kafka
refuses to create a topic that collides with an existing one this way (``AdminZkClient
.validateTopicCreate``) and its command line prints ``COLLISION_WARNING`` for any name holding
either character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from broker.cluster.errors import InvalidTopicError

__all__ = [
    "TOPIC_NAME_LENGTH_MAX",
    "COLLISION_WARNING",
    "validate_topic_name",
    "has_collision_chars",
    "collides",
    "colliding_topics",
]

TOPIC_NAME_LENGTH_MAX = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
    "could collide. To avoid issues it is best to use either, but not both."
)


def validate_topic_name(name: str) -> None:
    """Raise ``InvalidTopicError`` naming the first rule ``name`` breaks (Kafka's order)."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"Topic name must be a string, not {type(name).__name__}")
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > TOPIC_NAME_LENGTH_MAX:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {TOPIC_NAME_LENGTH_MAX} characters, "
            f"topic name: {name[:40]}... ({len(name)} characters)"
        )
    if not _LEGAL.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL.fullmatch(c)})
        raise InvalidTopicError(
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
            f"alphanumerics, '.', '_' and '-' (found {', '.join(repr(c) for c in bad)})"
        )


def has_collision_chars(name: str) -> bool:
    """True when ``name`` holds "." or "_", the characters metric names cannot tell apart."""
    return "." in name or "_" in name


def collides(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` map to the same metric name ("." and "_" read as one)."""
    return a.replace(".", "_") == b.replace(".", "_")


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """The existing topics, other than ``name`` itself, that collide with ``name``, sorted."""
    if not has_collision_chars(name):
        return []
    return sorted(t for t in existing if t != name and collides(name, t))
