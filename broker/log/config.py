"""A partition log's configuration, with Kafka's names, defaults and validation.

Broker-level names come from ``server.properties`` (``log.segment.bytes``, ``log.retention.hours``,
...); topic-level overrides use the topic config names (``segment.bytes``, ``retention.ms``, ...)
and win over the broker's. Where Kafka offers the same setting in several units the finest one
wins: ``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours`` and
``log.roll.ms`` > ``log.roll.hours`` (``KafkaConfig.logRetentionTimeMillis``,
``logRollTimeMillis``).
Keys that are not log settings are ignored, so a whole ``server.properties`` may be passed in.

Compaction settings (read by the cleaner, ``broker/log/cleaner``): ``cleanup.policy`` is a
comma-separated list of ``delete`` and ``compact`` (either order, repeats and spaces allowed; an
empty list is accepted, as Kafka 4.1 accepts it: neither retention nor compaction runs), and
``min.cleanable.dirty.ratio`` a number in [0, 1] written as Java's ``Double.parseDouble`` reads it
(``0.5``, ``.5``, ``5e-1``, ``1d``); NaN, which Kafka lets through, is refused.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Mapping

__all__ = ["LogConfig", "BROKER_KEYS", "INT32_MAX", "INT64_MAX", "CLEANUP_POLICIES", "TIMESTAMP_TYPES",
           "parse_cleanup_policy"]

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000
CLEANUP_POLICIES = ("compact", "delete")  # Kafka's order in its messages
_DELETE_ONLY = frozenset({"delete"})
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")  # message.timestamp.type, Kafka's order
# A decimal as Java's Double.parseDouble reads it (optional d/f suffix); not Python's extras
# such as "1_0", which Kafka refuses.
_DOUBLE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?")

# field -> (minimum, maximum, what the bounds mean). The minimums are Kafka's validators:
# segment.bytes >= LegacyRecord.RECORD_OVERHEAD_V0 (14), segment.index.bytes >= 4, etc.
_BOUNDS: dict[str, tuple[int, int]] = {
    "segment_bytes": (14, INT32_MAX),
    "segment_ms": (1, INT64_MAX),
    "retention_ms": (-1, INT64_MAX),
    "retention_bytes": (-1, INT64_MAX),
    "index_interval_bytes": (0, INT32_MAX),
    "segment_index_bytes": (4, INT32_MAX),
    "flush_messages": (1, INT64_MAX),
    "flush_ms": (0, INT64_MAX),
    "message_max_bytes": (0, INT32_MAX),
    "min_compaction_lag_ms": (0, INT64_MAX),
    "max_compaction_lag_ms": (1, INT64_MAX),
    "delete_retention_ms": (0, INT64_MAX),
    "message_timestamp_before_max_ms": (0, INT64_MAX),
    "message_timestamp_after_max_ms": (0, INT64_MAX),
    "file_delete_delay_ms": (0, INT64_MAX),
}

# field -> broker keys in precedence order, each with its factor to the field's unit.
_BROKER_KEYS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment_bytes": (("log.segment.bytes", 1),),
    "segment_ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "retention_ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTE_MS),
        ("log.retention.hours", _HOUR_MS),
    ),
    "retention_bytes": (("log.retention.bytes", 1),),
    "index_interval_bytes": (("log.index.interval.bytes", 1),),
    "segment_index_bytes": (("log.index.size.max.bytes", 1),),
    "flush_messages": (("log.flush.interval.messages", 1),),
    "flush_ms": (("log.flush.interval.ms", 1),),
    "message_max_bytes": (("message.max.bytes", 1),),
    "min_compaction_lag_ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max_compaction_lag_ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "delete_retention_ms": (("log.cleaner.delete.retention.ms", 1),),
    "cleanup_policy": (("log.cleanup.policy", 1),),
    "min_cleanable_dirty_ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "message_timestamp_type": (("log.message.timestamp.type", 1),),
    "message_timestamp_before_max_ms": (("log.message.timestamp.before.max.ms", 1),),
    "message_timestamp_after_max_ms": (("log.message.timestamp.after.max.ms", 1),),
    "file_delete_delay_ms": (("log.segment.delete.delay.ms", 1),),
}

# Every broker key LogConfig reads (the broker's config reports any other ``log.*`` key unknown).
BROKER_KEYS = frozenset(key for keys in _BROKER_KEYS.values() for key, _ in keys)

_TOPIC_KEYS: dict[str, str] = {
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "index_interval_bytes": "index.interval.bytes",
    "segment_index_bytes": "segment.index.bytes",
    "flush_messages": "flush.messages",
    "flush_ms": "flush.ms",
    "message_max_bytes": "max.message.bytes",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "max_compaction_lag_ms": "max.compaction.lag.ms",
    "delete_retention_ms": "delete.retention.ms",
    "cleanup_policy": "cleanup.policy",
    "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
    "message_timestamp_type": "message.timestamp.type",
    "message_timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "message_timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "file_delete_delay_ms": "file.delete.delay.ms",
}


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition's log. Sizes in bytes, times in milliseconds.

    ``retention_ms``/``retention_bytes`` of -1 mean unlimited. ``flush_ms`` None means never flush
    on a timer (Kafka's default: durability comes from replication, the OS writes back pages).
    ``segment_index_bytes`` is the most an ``.index``/``.timeindex`` file may hold; a segment
    whose index is full rolls.
    """

    segment_bytes: int = 1 << 30  # log.segment.bytes / segment.bytes
    segment_ms: int = 168 * _HOUR_MS  # log.roll.ms, log.roll.hours / segment.ms
    retention_ms: int = 168 * _HOUR_MS  # log.retention.{ms,minutes,hours} / retention.ms
    retention_bytes: int = -1  # log.retention.bytes / retention.bytes
    index_interval_bytes: int = 4096  # log.index.interval.bytes / index.interval.bytes
    segment_index_bytes: int = 10 * 1024 * 1024  # log.index.size.max.bytes / segment.index.bytes
    flush_messages: int = INT64_MAX  # log.flush.interval.messages / flush.messages
    flush_ms: int | None = None  # log.flush.interval.ms / flush.ms
    message_max_bytes: int = 1048588  # message.max.bytes / max.message.bytes
    # Compaction (the cleaner, broker/log/cleaner): a record stays uncleaned at least
    # min_compaction_lag_ms; a dirty record older than max_compaction_lag_ms forces a pass; a
    # tombstone is kept delete_retention_ms after the cleaning that first kept it.
    min_compaction_lag_ms: int = 0  # log.cleaner.min.compaction.lag.ms / min.compaction.lag.ms
    max_compaction_lag_ms: int = INT64_MAX  # log.cleaner.max.compaction.lag.ms / max.compaction.lag.ms
    delete_retention_ms: int = 86_400_000  # log.cleaner.delete.retention.ms / delete.retention.ms
    # "delete" runs retention by retention.ms/retention.bytes, "compact" the cleaner; both, or none.
    cleanup_policy: frozenset[str] = _DELETE_ONLY  # log.cleanup.policy / cleanup.policy
    min_cleanable_dirty_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio / min.cleanable.dirty.ratio
    # "LogAppendTime": a leader stamps each appended batch with its clock (the batch's max
    # timestamp and timestamp type; records keep theirs); "CreateTime" keeps the producer's.
    message_timestamp_type: str = "CreateTime"  # log.message.timestamp.type / message.timestamp.type
    # CreateTime records may be at most this much older / newer than the leader's clock (KIP-937;
    # Kafka 4's defaults: no lower bound, one hour ahead); others are INVALID_TIMESTAMP.
    message_timestamp_before_max_ms: int = INT64_MAX  # log.message.timestamp.before.max.ms / ...
    message_timestamp_after_max_ms: int = _HOUR_MS  # log.message.timestamp.after.max.ms / ...
    # log.segment.delete.delay.ms / file.delete.delay.ms: how long a deleted partition's renamed
    # directory waits before a worker thread removes it (the broker-level value is used)
    file_delete_delay_ms: int = 60_000

    def __post_init__(self) -> None:
        for name, (low, high) in _BOUNDS.items():
            value = getattr(self, name)
            if name == "flush_ms" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(
                    f"LogConfig.{name}={value!r} is invalid: must be an integer in [{low}, {high}]"
                )
        if not isinstance(self.cleanup_policy, frozenset) or not self.cleanup_policy <= set(CLEANUP_POLICIES):
            raise ValueError(f"LogConfig.cleanup_policy={self.cleanup_policy!r} is invalid: must be a "
                             f"frozenset of {', '.join(CLEANUP_POLICIES)}")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"LogConfig.message_timestamp_type={self.message_timestamp_type!r} is invalid: "
                             f"must be one of {', '.join(TIMESTAMP_TYPES)}")
        ratio = self.min_cleanable_dirty_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
            raise ValueError(f"LogConfig.min_cleanable_dirty_ratio={ratio!r} is invalid: must be a "
                             "number in [0, 1]")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:  # Kafka's message
            raise ValueError(f"conflict topic config setting min.compaction.lag.ms "
                             f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms "
                             f"({self.max_compaction_lag_ms})")

    @property
    def compact(self) -> bool:
        """The cleaner compacts this log (``cleanup.policy`` includes ``compact``): a leader
        refuses records without a key."""
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """A leader stamps appended batches with its clock (``message.timestamp.type``)."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def delete(self) -> bool:
        """Retention deletes old segments (``cleanup.policy`` includes ``delete``)."""
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], topic_overrides: Mapping[str, str] | None = None
    ) -> "LogConfig":
        """Build from broker properties, then apply a topic's overrides (topic config names)."""
        values: dict[str, object] = {}
        for name, keys in _BROKER_KEYS.items():
            for key, factor in keys:
                if key in props:
                    values[name] = _parse_value(key, props[key], name, factor)
                    break
        if values.get("retention_ms", 0) < 0:
            values["retention_ms"] = -1  # Kafka: any negative retention time means unlimited
        return cls(**values).with_overrides(topic_overrides or {})

    def with_overrides(self, topic_overrides: Mapping[str, str]) -> "LogConfig":
        """A copy with topic-level settings (``segment.bytes``, ``retention.ms``, ...) applied."""
        values = {
            name: _parse_value(key, topic_overrides[key], name)
            for name, key in _TOPIC_KEYS.items()
            if key in topic_overrides
        }
        return dataclasses.replace(self, **values) if values else self


def _parse_value(key: str, raw: str, name: str, factor: int = 1) -> object:
    """Parse one property value for field ``name``, in the field's unit."""
    if name == "cleanup_policy":
        return parse_cleanup_policy(key, raw)
    if name == "min_cleanable_dirty_ratio":
        return _parse_ratio(key, raw)
    if name == "message_timestamp_type":
        if raw not in TIMESTAMP_TYPES:  # Kafka's ValidString: exact, case-sensitive
            raise ValueError(f"Invalid value {raw} for configuration {key}: String must be one of: "
                             f"{', '.join(TIMESTAMP_TYPES)}")
        return raw
    return _parse(key, raw, name, factor) * factor


def parse_cleanup_policy(key: str, raw: str) -> frozenset[str]:
    """``"compact, delete"`` -> frozenset({"compact", "delete"}); ValueError naming ``key`` for an
    unknown policy or an empty item (``"compact,"``), as Kafka's list validator refuses them."""
    text = str(raw).strip()
    items = [item.strip() for item in text.split(",")] if text else []
    for item in items:
        if item not in CLEANUP_POLICIES:
            raise ValueError(f"invalid value {raw!r} for {key}: {item!r} is not a cleanup policy; "
                             f"must be a comma-separated list of {', '.join(CLEANUP_POLICIES)}")
    return frozenset(items)


def _parse_ratio(key: str, raw: str) -> float:
    text = str(raw).strip()
    value = float(text.rstrip("dDfF")) if _DOUBLE.fullmatch(text) else math.nan
    if not 0 <= value <= 1:  # NaN fails too
        raise ValueError(f"invalid value {raw!r} for {key}: must be a number in [0, 1]")
    return value


def _parse(key: str, raw: str, name: str, factor: int = 1) -> int:
    """Parse one property value as an integer within the bounds of field ``name``.

    ``factor`` is the key's unit in the field's unit (3600000 for an ``.hours`` key); the upper
    bound shrinks by it so the product still fits.
    """
    low, high = _BOUNDS[name]
    high //= factor
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise ValueError(
            f"invalid value {raw!r} for {key}: must be an integer in [{low}, {high}]"
        )
    return value
