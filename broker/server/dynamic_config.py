"""Dynamic configs (KIP-226, KIP-339): what AlterConfigs and IncrementalAlterConfigs may change,
how a change is checked, and the broker configuration it leads to. Pure: no ZooKeeper, no loop.

A broker's effective properties are, later ones winning: its ``server.properties`` (static),
the cluster default ``/config/brokers/<default>``, then its own ``/config/brokers/<id>`` (Kafka's
``DynamicBrokerConfig`` order). Only keys the broker applies without a restart are accepted:
the log defaults every topic inherits (``log.retention.ms``, ``log.segment.bytes``,
``log.cleanup.policy``, ``message.max.bytes``, ...), ``min.insync.replicas``, and the
replication throttles (``leader/follower.replication.throttled.rate``, bytes/s). Any other key the
broker reads (``offsets.topic.num.partitions``, ``super.users``, ...: it reads them only at start)
is refused with Kafka's words ("Cannot update these configs dynamically"), and nothing of that
resource is written; a key no broker knows is kept, as Kafka keeps it. Unlike Kafka 4 (KRaft, where ELR forbids it), a broker-level
``min.insync.replicas`` may change: pylog is ZooKeeper mode, where Kafka allows it.

A topic's change is checked as CreateTopics checks its configs (``config_entries``), over the
broker's log configuration, so the same value is refused in both places with the same message.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from broker.log.config import LogConfig
from broker.server.config import BrokerConfig, ConfigError
from broker.server.config_entries import list_value, validate_topic_configs
from broker.wire import ErrorCode

__all__ = [
    "DEFAULT_BROKER", "DYNAMIC_BROKER_KEYS", "THROTTLE_RATE_KEYS", "DynamicBrokerConfigs",
    "ConfigChangeError", "apply_incremental", "static_broker_keys", "check_topic_change", "check_broker_change",
]

DEFAULT_BROKER = "<default>"  # the znode name of the cluster-wide broker default
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
THROTTLE_RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
_LIST_KEYS = frozenset({"cleanup.policy", "log.cleanup.policy", "leader.replication.throttled.replicas",
                        "follower.replication.throttled.replicas"})

# DynamicLogConfig.ReconfigurableConfigs for the settings pylog's LogConfig has, plus
# min.insync.replicas and the replication throttles (DynamicConfig.Broker).
DYNAMIC_BROKER_KEYS = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.retention.ms", "log.retention.minutes",
    "log.retention.hours", "log.retention.bytes", "log.index.interval.bytes", "log.index.size.max.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "message.max.bytes",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms", "log.cleanup.policy", "log.cleaner.min.cleanable.ratio",
    "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.segment.delete.delay.ms", "min.insync.replicas", *THROTTLE_RATE_KEYS,
})


class ConfigChangeError(Exception):
    """A refused change: Kafka's error code and message for the whole resource."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True)
class DynamicBrokerConfigs:
    """One broker's three levels of broker configuration."""

    static: Mapping[str, str]
    cluster_default: Mapping[str, str] = field(default_factory=dict)
    per_broker: Mapping[str, str] = field(default_factory=dict)

    def effective_properties(self) -> dict[str, str]:
        return {**self.static, **self.cluster_default, **self.per_broker}

    def broker_config(self) -> BrokerConfig:
        """The configuration the broker runs with (``properties`` holds the merged values, so
        every place that reads a key sees the dynamic one)."""
        return BrokerConfig.from_properties(self.effective_properties())

    def throttle_rate(self, key: str) -> int | None:
        """A replication throttle in bytes/s, None when unset (unthrottled)."""
        raw = self.effective_properties().get(key)
        return None if raw is None else int(raw)


def apply_incremental(current: Mapping[str, str],
                      operations: Sequence[tuple[str, int, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs' operations over the stored overrides: SET, DELETE, and APPEND /
    SUBTRACT on list configs (Kafka's ``prepareIncrementalConfigs``)."""
    names = [name for name, _, _ in operations]
    if len(set(names)) != len(names):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {duplicates}")
    result = dict(current)
    for name, op, value in operations:
        if op == OP_SET:
            if value is None:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
            result[name] = value
        elif op == OP_DELETE:
            result.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if name not in _LIST_KEYS:
                verb = "append" if op == OP_APPEND else "subtract"
                raise ConfigChangeError(ErrorCode.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {name}")
            items = [i for i in list_value(result.get(name, "")).split(",") if i]
            given = [i for i in list_value(value or "").split(",") if i]
            if op == OP_APPEND:
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            result[name] = ",".join(items)
        else:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op}")
    return result


def check_topic_change(topic: str, new: Mapping[str, str | None], broker_log: LogConfig) -> None:
    """Raise ConfigChangeError unless ``new`` is a valid whole set of overrides for ``topic``."""
    problem = validate_topic_configs(new, broker_log)
    if problem is not None:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, problem)


def check_broker_change(levels: DynamicBrokerConfigs, entity: str, new: Mapping[str, str | None]) -> None:
    """Raise ConfigChangeError unless ``new`` may replace ``entity``'s dynamic configs
    (``entity`` is a broker id or ``<default>``). As Kafka: a broker key that needs a restart is
    INVALID_REQUEST, so is a bad value; a key no broker knows is stored (a plugin's, say) and
    described as sensitive."""
    fixed = sorted(name for name in new if name in static_broker_keys() and name not in DYNAMIC_BROKER_KEYS)
    if fixed:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    for name, value in new.items():
        if value is None:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")
    for key in THROTTLE_RATE_KEYS:
        if key in new and not _is_long_at_least_zero(new[key]):
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                    f"Invalid value {new[key]} for configuration {key}: Value must be at least 0")
    changed = (DynamicBrokerConfigs(levels.static, new, levels.per_broker) if entity == DEFAULT_BROKER
               else DynamicBrokerConfigs(levels.static, levels.cluster_default, new))
    try:
        changed.broker_config()
    except (ConfigError, ValueError) as exc:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(exc)) from None


@functools.cache
def static_broker_keys() -> frozenset[str]:
    """Every broker key pylog knows: those DescribeConfigs lists, their synonyms, and every key
    ``BrokerConfig`` reads (so a key read only at start is refused by AlterConfigs, not stored
    and never applied)."""
    from broker.server.config_entries import describe_broker_configs, describe_topic_configs

    bare = BrokerConfig.from_properties({"broker.id": "0", "zookeeper.connect": "localhost:2181"})
    keys = {e.name for e in describe_broker_configs(bare)}
    keys |= {e.synonym[0] for e in describe_topic_configs({}, bare) if e.synonym is not None}
    keys |= bare.known_keys
    return frozenset(keys | DYNAMIC_BROKER_KEYS | {"num.io.threads", "num.network.threads", "log.dir"})


def _is_long_at_least_zero(raw: str) -> bool:
    try:
        return 0 <= int(raw.strip()) < 1 << 63
    except ValueError:
        return False

