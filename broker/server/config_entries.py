"""Topic and broker configs as CreateTopics checks them and DescribeConfigs shows them.

Topic configs pylog knows are the ``LogConfig`` ones (validated by ``LogConfig.with_overrides``,
so a bad value's message names the key and what is valid) plus a few it stores but only partly
acts on. A name it does not know, or a value it would silently ignore (a broker-side
``compression.type``), is refused with INVALID_CONFIG (40) and a message rather than accepted
and ignored: the topic would not behave as its creator asked. After each value on its own, the
topic's log settings are checked together over the broker's (``min.compaction.lag.ms`` above
``max.compaction.lag.ms`` is Kafka's "conflict topic config setting").

List values are shown as Kafka shows them: items trimmed and joined by commas
(``cleanup.policy="delete, compact"`` is described as ``delete,compact``).

Each entry carries Kafka's ``ConfigSource`` (KIP-226) and ``ConfigType`` (KIP-569) numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from broker.log import LogConfig
from broker.server.config import JAVA_DOUBLE_MAX, BrokerConfig
from broker.server.replication_quota import (
    FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS, throttled_replicas_problem)

__all__ = [
    "ConfigEntry",
    "TOPIC_CONFIG_NAMES",
    "list_value",
    "validate_topic_configs",
    "describe_topic_configs",
    "describe_broker_configs",
    "SOURCE_DYNAMIC_TOPIC", "SOURCE_STATIC_BROKER", "SOURCE_DEFAULT",
]

# DescribeConfigsResponse.ConfigSource
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
# ConfigDef.Type as sent in DescribeConfigs v3+ (KIP-569)
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 4, 5, 6, 7

_LONG_MAX = str((1 << 63) - 1)


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    config_type: int
    synonym: tuple[str, str | None, int] | None = None  # (name, value, source) one level down

    @property
    def is_default(self) -> bool:
        return self.source == SOURCE_DEFAULT


@dataclass(frozen=True)
class _TopicConfig:
    name: str
    broker_key: str | None  # None: no broker synonym (Kafka lists none, the default is "")
    config_type: int
    default: Callable[[BrokerConfig], str]
    check: Callable[[str], str | None]  # error message, or None when the value is acceptable


def _log_value(field: str) -> Callable[[BrokerConfig], str]:
    def value(config: BrokerConfig) -> str:
        raw = getattr(config.log, field)
        return _LONG_MAX if raw is None else str(raw)
    return value


def _broker_policy(config: BrokerConfig) -> str:
    """``log.cleanup.policy`` as the broker was given it (order kept), else Kafka's default."""
    return list_value(config.properties.get("log.cleanup.policy", "delete"))


def list_value(raw: str) -> str:
    """A LIST config as Kafka shows it: items trimmed, joined by commas."""
    text = raw.strip()
    return ",".join(item.strip() for item in text.split(",")) if text else ""


def _via_log_config(name: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            LogConfig().with_overrides({name: value})
        except ValueError as exc:
            return str(exc)
        return None
    return check


def _one_of(name: str, allowed: tuple[str, ...]) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value in allowed:
            return None
        return f"{name}={value!r} is not supported by pylog (supported: {', '.join(allowed)})"
    return check


def _positive(name: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            if 1 <= int(value) < 1 << 31:
                return None
        except ValueError:
            pass
        return f"invalid value {value!r} for {name}: must be an integer in [1, 2147483647]"
    return check


_LOG_TOPIC_CONFIGS = (
    ("segment.bytes", "log.segment.bytes", TYPE_INT, "segment_bytes"),
    ("segment.ms", "log.roll.ms", TYPE_LONG, "segment_ms"),
    ("retention.ms", "log.retention.ms", TYPE_LONG, "retention_ms"),
    ("retention.bytes", "log.retention.bytes", TYPE_LONG, "retention_bytes"),
    ("index.interval.bytes", "log.index.interval.bytes", TYPE_INT, "index_interval_bytes"),
    ("segment.index.bytes", "log.index.size.max.bytes", TYPE_INT, "segment_index_bytes"),
    ("flush.messages", "log.flush.interval.messages", TYPE_LONG, "flush_messages"),
    ("flush.ms", "log.flush.interval.ms", TYPE_LONG, "flush_ms"),
    ("max.message.bytes", "message.max.bytes", TYPE_INT, "message_max_bytes"),
    ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", TYPE_DOUBLE, "min_cleanable_dirty_ratio"),
    ("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", TYPE_LONG, "min_compaction_lag_ms"),
    ("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", TYPE_LONG, "max_compaction_lag_ms"),
    ("delete.retention.ms", "log.cleaner.delete.retention.ms", TYPE_LONG, "delete_retention_ms"),
    ("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", TYPE_LONG,
     "message_timestamp_before_max_ms"),
    ("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", TYPE_LONG,
     "message_timestamp_after_max_ms"),
)

_TOPIC_CONFIGS: dict[str, _TopicConfig] = {
    name: _TopicConfig(name, broker_key, config_type, _log_value(field), _via_log_config(name))
    for name, broker_key, config_type, field in _LOG_TOPIC_CONFIGS
}
_TOPIC_CONFIGS.update({
    "min.insync.replicas": _TopicConfig(
        "min.insync.replicas", "min.insync.replicas", TYPE_INT,
        lambda c: str(c.min_insync_replicas), _positive("min.insync.replicas")),
    "cleanup.policy": _TopicConfig(
        "cleanup.policy", "log.cleanup.policy", TYPE_LIST, _broker_policy, _via_log_config("cleanup.policy")),
    "compression.type": _TopicConfig(
        "compression.type", "compression.type", TYPE_STRING,
        lambda c: "producer", _one_of("compression.type", ("producer",))),
    "unclean.leader.election.enable": _TopicConfig(
        "unclean.leader.election.enable", "unclean.leader.election.enable", TYPE_BOOLEAN,
        lambda c: str(c.unclean_leader_election_enable).lower(),
        _one_of("unclean.leader.election.enable", ("true", "false"))),
    "message.timestamp.type": _TopicConfig(
        "message.timestamp.type", "log.message.timestamp.type", TYPE_STRING,
        _log_value("message_timestamp_type"), _via_log_config("message.timestamp.type")),
    # KIP-73 replication throttles: which replicas the broker rates apply to (replication_quota.py)
    **{name: _TopicConfig(name, None, TYPE_LIST, lambda c: "",
                          lambda value, name=name: throttled_replicas_problem(name, value))
       for name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)},
})

TOPIC_CONFIG_NAMES = tuple(sorted(_TOPIC_CONFIGS))


def validate_topic_configs(configs: Mapping[str, str | None],
                           broker_log: LogConfig | None = None) -> str | None:
    """The first problem with a new topic's configs, as INVALID_CONFIG's message; None if fine.

    ``broker_log`` is the broker's log configuration the topic's settings apply over (the
    checks that involve two settings, such as the compaction lags, see both)."""
    for name, value in configs.items():
        known = _TOPIC_CONFIGS.get(name)
        if known is None:
            return f"Unknown topic config name: {name}"
        if value is None:
            return f"Null value not supported for topic configs: {name}"
        problem = known.check(value)
        if problem is not None:
            return problem
    try:
        (broker_log or LogConfig()).with_overrides(configs)
    except ValueError as exc:
        return str(exc)
    return None


def describe_topic_configs(overrides: Mapping[str, str], broker: BrokerConfig) -> list[ConfigEntry]:
    """Every topic config: the topic's override, else the broker's value, else the default."""
    entries = []
    for name in TOPIC_CONFIG_NAMES:
        known = _TOPIC_CONFIGS[name]
        broker_value = known.default(broker)
        broker_source = SOURCE_STATIC_BROKER if known.broker_key in broker.properties else SOURCE_DEFAULT
        synonym = None if known.broker_key is None else (known.broker_key, broker_value, broker_source)
        if name in overrides:
            value = overrides[name]
            if known.config_type == TYPE_LIST:
                value = list_value(value)
            entries.append(ConfigEntry(name, value, SOURCE_DYNAMIC_TOPIC, known.config_type, synonym))
        else:
            entries.append(ConfigEntry(name, broker_value, broker_source, known.config_type, synonym))
    return entries


def describe_broker_configs(broker: BrokerConfig) -> list[ConfigEntry]:
    """The broker's effective configuration under Kafka's names."""
    log = broker.log
    values: list[tuple[str, object, int]] = [
        ("broker.id", broker.broker_id, TYPE_INT),
        ("listeners", ",".join(map(str, broker.listeners)), TYPE_STRING),
        ("advertised.listeners", ",".join(map(str, broker.advertised_listeners)), TYPE_STRING),
        ("log.dirs", ",".join(map(str, broker.log_dirs)), TYPE_STRING),
        ("zookeeper.connect", broker.zookeeper_connect, TYPE_STRING),
        ("zookeeper.session.timeout.ms", broker.zookeeper_session_timeout_ms, TYPE_INT),
        ("zookeeper.connection.timeout.ms", broker.zookeeper_connection_timeout_ms, TYPE_INT),
        ("num.partitions", broker.num_partitions, TYPE_INT),
        ("default.replication.factor", broker.default_replication_factor, TYPE_INT),
        ("min.insync.replicas", broker.min_insync_replicas, TYPE_INT),
        ("auto.create.topics.enable", str(broker.auto_create_topics_enable).lower(), TYPE_BOOLEAN),
        ("delete.topic.enable", str(broker.delete_topic_enable).lower(), TYPE_BOOLEAN),
        ("socket.request.max.bytes", broker.socket_request_max_bytes, TYPE_INT),
        ("max.connections", broker.max_connections, TYPE_INT),
        ("max.inflight.requests.per.connection", broker.max_inflight_requests_per_connection, TYPE_INT),
        ("connections.max.idle.ms", broker.connections_max_idle_ms, TYPE_LONG),
        ("message.max.bytes", broker.message_max_bytes, TYPE_INT),
        ("fetch.max.bytes", broker.fetch_max_bytes, TYPE_INT),
        ("log.retention.check.interval.ms", broker.log_retention_check_interval_ms, TYPE_LONG),
        ("log.flush.scheduler.interval.ms", broker.log_flush_scheduler_interval_ms, TYPE_LONG),
        ("log.flush.offset.checkpoint.interval.ms", broker.log_flush_offset_checkpoint_interval_ms, TYPE_INT),
        ("producer.id.expiration.ms", broker.producer_id_expiration_ms, TYPE_INT),
        ("producer.id.expiration.check.interval.ms", broker.producer_id_expiration_check_interval_ms, TYPE_INT),
        ("producer.state.entries.max", broker.producer_state_entries_max, TYPE_INT),
        ("purgatory.waiters.max", broker.purgatory_waiters_max, TYPE_INT),
        ("shutdown.drain.timeout.ms", broker.shutdown_drain_timeout_ms, TYPE_INT),
        ("replica.lag.time.max.ms", broker.replica_lag_time_max_ms, TYPE_LONG),
        ("replica.fetch.wait.max.ms", broker.replica_fetch_wait_max_ms, TYPE_INT),
        ("replica.fetch.min.bytes", broker.replica_fetch_min_bytes, TYPE_INT),
        ("replica.fetch.max.bytes", broker.replica_fetch_max_bytes, TYPE_INT),
        ("replica.fetch.response.max.bytes", broker.replica_fetch_response_max_bytes, TYPE_INT),
        ("replica.fetch.backoff.ms", broker.replica_fetch_backoff_ms, TYPE_INT),
        ("replica.socket.timeout.ms", broker.replica_socket_timeout_ms, TYPE_INT),
        ("replica.high.watermark.checkpoint.interval.ms",
         broker.replica_high_watermark_checkpoint_interval_ms, TYPE_LONG),
        ("controller.socket.timeout.ms", broker.controller_socket_timeout_ms, TYPE_INT),
        ("unclean.leader.election.enable", str(broker.unclean_leader_election_enable).lower(), TYPE_BOOLEAN),
        ("auto.leader.rebalance.enable", str(broker.auto_leader_rebalance_enable).lower(), TYPE_BOOLEAN),
        ("leader.imbalance.check.interval.seconds", broker.leader_imbalance_check_interval_seconds,
         TYPE_LONG),
        ("leader.imbalance.per.broker.percentage", broker.leader_imbalance_per_broker_percentage, TYPE_INT),
        ("controlled.shutdown.enable", str(broker.controlled_shutdown_enable).lower(), TYPE_BOOLEAN),
        ("controlled.shutdown.max.retries", broker.controlled_shutdown_max_retries, TYPE_INT),
        ("controlled.shutdown.retry.backoff.ms", broker.controlled_shutdown_retry_backoff_ms, TYPE_LONG),
        ("log.segment.bytes", log.segment_bytes, TYPE_INT),
        ("log.roll.ms", log.segment_ms, TYPE_LONG),
        ("log.retention.ms", log.retention_ms, TYPE_LONG),
        ("log.retention.bytes", log.retention_bytes, TYPE_LONG),
        ("log.index.interval.bytes", log.index_interval_bytes, TYPE_INT),
        ("log.index.size.max.bytes", log.segment_index_bytes, TYPE_INT),
        ("log.flush.interval.messages", log.flush_messages, TYPE_LONG),
        ("log.flush.interval.ms", _LONG_MAX if log.flush_ms is None else log.flush_ms, TYPE_LONG),
        ("log.cleanup.policy", _broker_policy(broker), TYPE_LIST),
        ("log.cleaner.min.cleanable.ratio", log.min_cleanable_dirty_ratio, TYPE_DOUBLE),
        ("log.cleaner.min.compaction.lag.ms", log.min_compaction_lag_ms, TYPE_LONG),
        ("log.cleaner.max.compaction.lag.ms", log.max_compaction_lag_ms, TYPE_LONG),
        ("log.cleaner.delete.retention.ms", log.delete_retention_ms, TYPE_LONG),
        ("log.cleaner.enable", str(broker.log_cleaner_enable).lower(), TYPE_BOOLEAN),
        ("log.cleaner.threads", broker.log_cleaner_threads, TYPE_INT),
        ("log.cleaner.dedupe.buffer.size", broker.log_cleaner_dedupe_buffer_size_bytes, TYPE_LONG),
        ("log.cleaner.io.buffer.size", broker.log_cleaner_io_buffer_size_bytes, TYPE_INT),
        ("log.cleaner.io.max.bytes.per.second", _java_double(broker.log_cleaner_io_max_bytes_per_second),
         TYPE_DOUBLE),
        ("log.cleaner.backoff.ms", broker.log_cleaner_backoff_ms, TYPE_LONG),
        ("group.initial.rebalance.delay.ms", broker.group_initial_rebalance_delay_ms, TYPE_INT),
        ("group.min.session.timeout.ms", broker.group_min_session_timeout_ms, TYPE_INT),
        ("group.max.session.timeout.ms", broker.group_max_session_timeout_ms, TYPE_INT),
        ("group.max.size", broker.group_max_size, TYPE_INT),
        ("offset.metadata.max.bytes", broker.offset_metadata_max_bytes, TYPE_INT),
        ("offsets.retention.minutes", broker.offsets_retention_minutes, TYPE_INT),
        ("offsets.retention.check.interval.ms", broker.offsets_retention_check_interval_ms, TYPE_LONG),
        ("offsets.commit.timeout.ms", broker.offsets_commit_timeout_ms, TYPE_INT),
        ("offsets.load.buffer.size", broker.offsets_load_buffer_size_bytes, TYPE_INT),
        ("transaction.max.timeout.ms", broker.transaction_max_timeout_ms, TYPE_INT),
        ("transaction.abort.timed.out.transaction.cleanup.interval.ms",
         broker.transaction_abort_timed_out_transaction_cleanup_interval_ms, TYPE_INT),
        ("transactional.id.expiration.ms", broker.transactional_id_expiration_ms, TYPE_INT),
        ("transaction.remove.expired.transaction.cleanup.interval.ms",
         broker.transaction_remove_expired_transaction_cleanup_interval_ms, TYPE_INT),
        ("transaction.state.log.load.buffer.size", broker.transaction_state_log_load_buffer_size_bytes, TYPE_INT),
        ("transaction.partition.verification.enable",
         str(broker.transaction_partition_verification_enable).lower(), TYPE_BOOLEAN),
        *_read_at_start(broker),
    ]
    return [
        ConfigEntry(name, str(value),
                    SOURCE_STATIC_BROKER if name in broker.properties else SOURCE_DEFAULT, config_type)
        for name, value, config_type in values
    ]


def _read_at_start(broker: BrokerConfig) -> list[tuple[str, object, int]]:
    """Keys the broker reads only when it starts: listed so that AlterConfigs refuses them as
    Kafka refuses a non-dynamic key, rather than storing a value that is never applied. Not
    listed (refused all the same, ``static_broker_keys``): the listener and SASL mechanism keys
    (``listener.security.protocol.map``, ``inter.broker.listener.name``,
    ``security.inter.broker.protocol``, ``sasl.enabled.mechanisms``,
    ``sasl.mechanism.inter.broker.protocol``), whose defaults pylog derives differently from
    Kafka's (no GSSAPI, no KRaft CONTROLLER listener)."""
    topics, security, auth, metrics = broker.internal_topics, broker.security, broker.authorizer, broker.metrics
    return [
        ("offsets.topic.num.partitions", topics.offsets_topic_num_partitions, TYPE_INT),
        ("offsets.topic.replication.factor", topics.offsets_topic_replication_factor, TYPE_SHORT),
        ("offsets.topic.segment.bytes", topics.offsets_topic_segment_bytes, TYPE_INT),
        ("transaction.state.log.num.partitions", topics.transaction_state_log_num_partitions, TYPE_INT),
        ("transaction.state.log.replication.factor", topics.transaction_state_log_replication_factor, TYPE_SHORT),
        ("transaction.state.log.min.isr", topics.transaction_state_log_min_isr, TYPE_INT),
        ("transaction.state.log.segment.bytes", topics.transaction_state_log_segment_bytes, TYPE_INT),
        ("quota.window.num", broker.quota_window_num, TYPE_INT),
        ("quota.window.size.seconds", broker.quota_window_size_seconds, TYPE_INT),
        ("replication.quota.window.num", broker.replication_quota_window_num, TYPE_INT),
        ("replication.quota.window.size.seconds", broker.replication_quota_window_size_seconds, TYPE_INT),
        ("metrics.port", metrics.port, TYPE_INT),
        ("metrics.host", metrics.host, TYPE_STRING),
        ("metrics.snapshot.interval.ms", metrics.snapshot_interval_ms, TYPE_INT),
        ("metrics.lag.interval.ms", metrics.lag_interval_ms, TYPE_INT),
        ("authorizer.class.name", auth.class_name, TYPE_STRING),
        ("super.users", ";".join(auth.super_users), TYPE_STRING),
        ("allow.everyone.if.no.acl.found", str(auth.allow_everyone_if_no_acl_found).lower(), TYPE_BOOLEAN),
        ("connections.max.reauth.ms", security.connections_max_reauth_ms, TYPE_LONG),
        ("authentication.timeout.ms", security.authentication_timeout_ms, TYPE_INT),
        ("sasl.server.max.receive.size", security.sasl_server_max_receive_size_bytes, TYPE_INT),
    ]


def _java_double(value: float) -> str:
    """Java's ``Double.toString`` for the values Kafka shows (its default Double.MAX_VALUE)."""
    return "1.7976931348623157E308" if value == JAVA_DOUBLE_MAX else str(value)
