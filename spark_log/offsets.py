"""Offset JSON: the shapes Spark's Kafka source uses (``JsonUtils``), parsed and written. Pure.

Shapes::

    partition offsets   {"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}
    partition list      {"topicA": [0, 1], "topicB": [2, 4]}          (the ``assign`` option)
    timestamps          {"topicA": {"0": 1700000000000}}               (``*ByTimestamp`` options)

A stored offset is the *next* offset to read (last record + 1). The sentinels ``-2`` (earliest)
and ``-1`` (latest) may appear only in options and are resolved before anything is checkpointed.

Canonical form: topics sorted by name, partitions by number, compact separators. Spark compares
the offsets a Python source returns as JSON *strings*; the same offsets in another key order count
as new data and start an empty micro-batch every trigger (reference T4), so every offset dict this
package hands to Spark comes from ``to_offset_dict``.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping

__all__ = [
    "TopicPartition",
    "EARLIEST",
    "LATEST",
    "OffsetJsonError",
    "parse_partition_offsets",
    "parse_partition_list",
    "to_offset_dict",
    "from_offset_dict",
    "dumps_offsets",
    "sorted_partitions",
    "format_partitions",
]

TopicPartition = tuple[str, int]

EARLIEST = -2
LATEST = -1
_INT64_MAX = 2**63 - 1


class OffsetJsonError(ValueError):
    """Malformed offset JSON. ``str()`` says what was expected and what came."""


def sorted_partitions(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(tps, key=lambda tp: (tp[0], tp[1]))


def format_partitions(tps: Iterable[TopicPartition]) -> str:
    """``t-0, t-1, u-3`` in canonical order, for error messages."""
    return ", ".join(f"{t}-{p}" for t, p in sorted_partitions(tps))


def _load_object(text: str, example: str) -> dict:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        raise OffsetJsonError(f"expected JSON like {example}, got {text!r}") from None
    if not isinstance(value, dict):
        raise OffsetJsonError(f"expected a JSON object like {example}, got {text!r}")
    return value


def _partition_id(key, topic: str, example: str, text: str) -> int:
    if isinstance(key, bool):
        key = None
    if isinstance(key, int):
        number = key
    elif isinstance(key, str) and key.isascii() and key.isdigit():
        number = int(key)
    else:
        raise OffsetJsonError(f"partition {key!r} of topic {topic!r} is not a partition number "
                              f"(expected JSON like {example}, got {text!r})")
    if not 0 <= number <= 0x7FFFFFFF:
        raise OffsetJsonError(f"partition {number} of topic {topic!r} is out of range")
    return number


def _check_topic(topic, example: str, text: str) -> str:
    if not isinstance(topic, str) or not topic:
        raise OffsetJsonError(f"topic names must be non-empty strings (expected JSON like {example}, "
                              f"got {text!r})")
    return topic


def parse_partition_offsets(text: str, *, minimum: int = EARLIEST) -> dict[TopicPartition, int]:
    """``{"t":{"0":23}}`` to ``{("t", 0): 23}``; every value an int >= ``minimum``."""
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    raw = _load_object(text, example)
    out: dict[TopicPartition, int] = {}
    for topic, partitions in raw.items():
        _check_topic(topic, example, text)
        if not isinstance(partitions, dict):
            raise OffsetJsonError(f"topic {topic!r} must map partition numbers to offsets "
                                  f"(expected JSON like {example}, got {text!r})")
        for key, value in partitions.items():
            partition = _partition_id(key, topic, example, text)
            if isinstance(value, bool) or not isinstance(value, int):
                raise OffsetJsonError(f"{topic}-{partition}: {value!r} is not an integer "
                                      f"(expected JSON like {example})")
            if not minimum <= value <= _INT64_MAX:
                raise OffsetJsonError(f"{topic}-{partition}: {value} is out of range "
                                      f"(use an offset >= {max(minimum, 0)}"
                                      + (", -1 for latest or -2 for earliest)" if minimum < 0 else ")"))
            out[(topic, partition)] = value
    return out


def parse_partition_list(text: str) -> list[TopicPartition]:
    """``{"t":[0,1]}`` to ``[("t", 0), ("t", 1)]`` (canonical order, no duplicates)."""
    example = '{"topicA":[0,1],"topicB":[2,4]}'
    raw = _load_object(text, example)
    out: set[TopicPartition] = set()
    for topic, partitions in raw.items():
        _check_topic(topic, example, text)
        if not isinstance(partitions, list):
            raise OffsetJsonError(f"topic {topic!r} must map to a list of partition numbers "
                                  f"(expected JSON like {example}, got {text!r})")
        for key in partitions:
            if isinstance(key, str):  # only numbers are partition ids in a list
                key = None
            out.add((topic, _partition_id(key, topic, example, text)))
    return sorted_partitions(out)


def to_offset_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The canonical offset dict handed to Spark: topics by name, partitions by number."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted_partitions(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_offset_dict(value: Mapping | None) -> dict[TopicPartition, int]:
    """Inverse of ``to_offset_dict`` (what Spark hands back from its checkpoint)."""
    if not value:
        return {}
    if not isinstance(value, Mapping):
        raise OffsetJsonError(f"an offset must be a JSON object, got {value!r}")
    return parse_partition_offsets(json.dumps(value), minimum=0)


def dumps_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """Canonical JSON text, ``{"t":{"0":5,"1":7}}``."""
    return json.dumps(to_offset_dict(offsets), separators=(",", ":"))
