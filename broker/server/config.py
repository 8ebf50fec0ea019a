"""Broker configuration: Kafka's ``server.properties`` names and meanings, validated at start.

An invalid value stops the broker before it binds a port, with a message that names the key, the
value and what is valid (``ConfigError``). Unknown keys are kept and reported as warnings, as
Kafka does ("was supplied but isn't a known config"), so a Kafka config file works unchanged.
The per-log keys (``log.retention.hours``, ``log.segment.bytes``, ...) belong to ``LogConfig``
(``broker.log``), which validates them; ``message.max.bytes`` is read by both. A ``log.*`` key
neither reads is unknown like any other.

The log cleaner's broker-wide settings are Kafka's ``log.cleaner.*`` (``log.cleaner.enable``,
``.threads``, ``.dedupe.buffer.size``, ``.io.buffer.size``, ``.io.max.bytes.per.second``,
``.backoff.ms``) with Kafka's defaults and bounds, plus two checks Kafka makes at run time: at
least 1 MiB of dedupe buffer per cleaner thread, and at least one thread (Kafka's validator
allows 0, which then fails with a division by zero). Stricter than Kafka: ``.io.buffer.size`` and
``.backoff.ms`` must be at least 1 (0 would mean no read buffer, and a worker that never sleeps
while nothing is cleanable), ``.io.max.bytes.per.second`` positive.

The group coordinator's settings are Kafka's ``group.*`` and ``offset(s).*`` names with Kafka's
defaults (``group_settings``, ``broker.coordinator.group.core.GroupSettings``). Kafka leaves
``group.initial.rebalance.delay.ms``, ``group.min.session.timeout.ms``,
``group.max.session.timeout.ms`` and ``offset.metadata.max.bytes`` unvalidated; pylog refuses
negatives there and a maximum session timeout below the minimum (no session could be valid).

The transaction coordinator's are Kafka's ``transaction.*`` / ``transactional.id.*`` names with
Kafka's defaults and Kafka's bounds (all at least 1; ``txn_settings``,
``broker.coordinator.txn.core.TxnSettings``); ``transaction.state.log.*`` topic settings are in
``internal_topics``.

Keys that Kafka does not have are pylog's own bounds (``purgatory.waiters.max``,
``producer.state.entries.max``, ``shutdown.drain.timeout.ms``,
``max.inflight.requests.per.connection``), named after the Kafka setting closest in spirit.
"""

from __future__ import annotations

import math
import re
import socket
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Mapping

from broker.client.properties import parse_properties  # noqa: F401 (re-exported: tools and __main__ import it from here)
from broker.cluster.internal_topics import InternalTopicsConfig
from broker.coordinator.group.effects import GroupSettings  # not .core: it loads numba (0.26 s of CPU per CLI call)
from broker.coordinator.txn.effects import TxnSettings  # not .core: it loads numba through the group coordinator
from broker.auth.config import AuthorizerConfig, authorizer_from_properties
from broker.log import LogConfig
from broker.log.config import BROKER_KEYS as LOG_BROKER_KEYS
from broker.server.security_config import SecurityConfig, security_from_properties
from broker.metrics.config import MetricsConfig

__all__ = ["ConfigError", "BrokerConfig", "Listener", "parse_properties", "parse_overrides",
           "load_properties"]


class ConfigError(ValueError):
    """A configuration value is missing or invalid; the message names the key."""


@dataclass(frozen=True)
class Listener:
    """``NAME://HOST:PORT``. ``host`` is bare (an IPv6 address without brackets); port 0 in
    ``listeners`` means "any free port" and is resolved when the broker binds."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_MIB = 1 << 20
JAVA_DOUBLE_MAX = sys.float_info.max  # Kafka's "unlimited" log.cleaner.io.max.bytes.per.second


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    log_dirs: tuple[Path, ...]
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 18_000
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    auto_create_topics_enable: bool = False
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104_857_600
    max_connections: int = 1000
    max_inflight_requests_per_connection: int = 16
    connections_max_idle_ms: int = 600_000
    quota_window_num: int = 11  # client quotas: samples of the rate (Kafka's quota.window.num)
    quota_window_size_seconds: int = 1  # each sample's span (quota.window.size.seconds)
    replication_quota_window_num: int = 11  # replication throttles' samples (replication.quota.window.num)
    replication_quota_window_size_seconds: int = 1  # each one's span (replication.quota.window.size.seconds)
    message_max_bytes: int = 1_048_588
    fetch_max_bytes: int = 57_671_680
    log_retention_check_interval_ms: int = 300_000
    log_flush_scheduler_interval_ms: int = 1_000
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    producer_state_entries_max: int = 100_000
    purgatory_waiters_max: int = 10_000
    shutdown_drain_timeout_ms: int = 5_000
    # replication (Kafka's names and defaults)
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1_000
    replica_socket_timeout_ms: int = 30_000
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    # the controller
    controller_socket_timeout_ms: int = 30_000
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    # the log cleaner (compaction; broker/server/log_cleaner.py): Kafka's names and defaults
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size_bytes: int = 128 * _MIB  # all threads together
    log_cleaner_io_buffer_size_bytes: int = 512 * 1024  # all threads together
    log_cleaner_io_max_bytes_per_second: float = JAVA_DOUBLE_MAX
    log_cleaner_backoff_ms: int = 15_000
    # __consumer_offsets / __transaction_state (broker/cluster/internal_topics.py): Kafka's names
    internal_topics: InternalTopicsConfig = field(default_factory=InternalTopicsConfig)
    # the group coordinator (broker/server/group_coordinator.py): Kafka's names and defaults
    group_initial_rebalance_delay_ms: int = 3_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int = _INT32_MAX
    offset_metadata_max_bytes: int = 4_096
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5_000
    offsets_load_buffer_size_bytes: int = 5 * _MIB
    # the transaction coordinator (broker/server/txn_coordinator.py): Kafka's names and defaults
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    transaction_state_log_load_buffer_size_bytes: int = 5 * _MIB
    transaction_partition_verification_enable: bool = True  # KIP-890 part 1
    # listeners' security protocols, TLS, SASL (broker/server/security_config.py): Kafka's names
    security: SecurityConfig = field(default_factory=SecurityConfig)
    authorizer: AuthorizerConfig = field(default_factory=AuthorizerConfig)  # ACLs (broker/auth/config.py)
    log: LogConfig = field(default_factory=LogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)  # metrics.* (broker/metrics)
    unknown_keys: tuple[str, ...] = ()
    known_keys: frozenset[str] = frozenset()  # every key this config reads (the others are unknown)
    properties: Mapping[str, str] = field(default_factory=dict)  # as given, for DescribeConfigs

    @property
    def group_settings(self) -> GroupSettings:
        """What the pure group coordinator needs of this config."""
        return GroupSettings(
            num_partitions=self.internal_topics.offsets_topic_num_partitions,
            initial_rebalance_delay_ms=self.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=self.group_min_session_timeout_ms,
            max_session_timeout_ms=self.group_max_session_timeout_ms,
            max_size=self.group_max_size,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            offsets_retention_ms=self.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
        )

    @property
    def txn_settings(self) -> TxnSettings:
        """What the pure transaction coordinator needs of this config."""
        return TxnSettings(
            num_partitions=self.internal_topics.transaction_state_log_num_partitions,
            max_timeout_ms=self.transaction_max_timeout_ms,
            abort_timed_out_check_interval_ms=self.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            id_expiration_ms=self.transactional_id_expiration_ms,
            remove_expired_check_interval_ms=self.transaction_remove_expired_transaction_cleanup_interval_ms,
            offsets_num_partitions=self.internal_topics.offsets_topic_num_partitions,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "BrokerConfig":
        p = _Reader(props)
        listeners = p.get("listeners", _listeners, (Listener("PLAINTEXT", "127.0.0.1", 9092),))
        advertised = p.get("advertised.listeners", _advertised, None)
        log_dirs = p.get("log.dirs", _paths, None) or p.get("log.dir", _paths, (Path("/tmp/kafka-logs"),))
        session_ms = p.get("zookeeper.session.timeout.ms", _positive_int, 18_000)
        config = cls(
            broker_id=p.get("broker.id", _broker_id, None, required=True),
            listeners=listeners,
            advertised_listeners=advertised or _advertise(listeners),
            log_dirs=log_dirs,
            zookeeper_connect=p.get("zookeeper.connect", _zk_connect, None, required=True),
            zookeeper_session_timeout_ms=session_ms,
            zookeeper_connection_timeout_ms=p.get("zookeeper.connection.timeout.ms", _positive_int, session_ms),
            num_partitions=p.get("num.partitions", _positive_int, 1),
            default_replication_factor=p.get("default.replication.factor", _int16_positive, 1),
            min_insync_replicas=p.get("min.insync.replicas", _positive_int, 1),
            auto_create_topics_enable=p.get("auto.create.topics.enable", _bool, False),
            delete_topic_enable=p.get("delete.topic.enable", _bool, True),
            socket_request_max_bytes=p.get("socket.request.max.bytes", _positive_int, 104_857_600),
            max_connections=p.get("max.connections", _positive_int, 1000),
            max_inflight_requests_per_connection=p.get("max.inflight.requests.per.connection", _positive_int, 16),
            connections_max_idle_ms=p.get("connections.max.idle.ms", _positive_int, 600_000),
            quota_window_num=p.get("quota.window.num", _positive_int, 11),
            quota_window_size_seconds=p.get("quota.window.size.seconds", _positive_int, 1),
            replication_quota_window_num=p.get("replication.quota.window.num", _positive_int, 11),
            replication_quota_window_size_seconds=p.get("replication.quota.window.size.seconds", _positive_int, 1),
            message_max_bytes=p.get("message.max.bytes", _positive_int, 1_048_588),
            fetch_max_bytes=p.get("fetch.max.bytes", _positive_int, 57_671_680),
            log_retention_check_interval_ms=p.get("log.retention.check.interval.ms", _positive_long, 300_000),
            log_flush_scheduler_interval_ms=p.get("log.flush.scheduler.interval.ms", _positive_long, 1_000),
            log_flush_offset_checkpoint_interval_ms=p.get(
                "log.flush.offset.checkpoint.interval.ms", _positive_int, 60_000),
            producer_id_expiration_ms=p.get("producer.id.expiration.ms", _positive_int, 86_400_000),
            producer_id_expiration_check_interval_ms=p.get(
                "producer.id.expiration.check.interval.ms", _positive_int, 600_000),
            producer_state_entries_max=p.get("producer.state.entries.max", _positive_int, 100_000),
            purgatory_waiters_max=p.get("purgatory.waiters.max", _non_negative_int, 10_000),
            shutdown_drain_timeout_ms=p.get("shutdown.drain.timeout.ms", _non_negative_int, 5_000),
            replica_lag_time_max_ms=p.get("replica.lag.time.max.ms", _positive_int, 30_000),
            replica_fetch_wait_max_ms=p.get("replica.fetch.wait.max.ms", _positive_int, 500),
            replica_fetch_min_bytes=p.get("replica.fetch.min.bytes", _positive_int, 1),
            replica_fetch_max_bytes=p.get("replica.fetch.max.bytes", _positive_int, 1_048_576),
            replica_fetch_response_max_bytes=p.get("replica.fetch.response.max.bytes", _positive_int,
                                                   10_485_760),
            replica_fetch_backoff_ms=p.get("replica.fetch.backoff.ms", _non_negative_int, 1_000),
            replica_socket_timeout_ms=p.get("replica.socket.timeout.ms", _positive_int, 30_000),
            replica_high_watermark_checkpoint_interval_ms=p.get(
                "replica.high.watermark.checkpoint.interval.ms", _positive_int, 5_000),
            controller_socket_timeout_ms=p.get("controller.socket.timeout.ms", _positive_int, 30_000),
            unclean_leader_election_enable=p.get("unclean.leader.election.enable", _bool, False),
            auto_leader_rebalance_enable=p.get("auto.leader.rebalance.enable", _bool, True),
            leader_imbalance_check_interval_seconds=p.get(
                "leader.imbalance.check.interval.seconds", _positive_int, 300),
            leader_imbalance_per_broker_percentage=p.get(
                "leader.imbalance.per.broker.percentage", _percentage, 10),
            controlled_shutdown_enable=p.get("controlled.shutdown.enable", _bool, True),
            controlled_shutdown_max_retries=p.get("controlled.shutdown.max.retries", _non_negative_int, 3),
            controlled_shutdown_retry_backoff_ms=p.get(
                "controlled.shutdown.retry.backoff.ms", _non_negative_int, 5_000),
            log_cleaner_enable=p.get("log.cleaner.enable", _bool, True),
            log_cleaner_threads=p.get("log.cleaner.threads", _positive_int, 1),
            log_cleaner_dedupe_buffer_size_bytes=p.get("log.cleaner.dedupe.buffer.size", _positive_long, 128 * _MIB),
            log_cleaner_io_buffer_size_bytes=p.get("log.cleaner.io.buffer.size", _positive_int, 512 * 1024),
            log_cleaner_io_max_bytes_per_second=p.get(
                "log.cleaner.io.max.bytes.per.second", _positive_double, JAVA_DOUBLE_MAX),
            log_cleaner_backoff_ms=p.get("log.cleaner.backoff.ms", _positive_long, 15_000),
            internal_topics=_internal_topics(p),
            group_initial_rebalance_delay_ms=p.get("group.initial.rebalance.delay.ms", _non_negative_int, 3_000),
            group_min_session_timeout_ms=p.get("group.min.session.timeout.ms", _non_negative_int, 6_000),
            group_max_session_timeout_ms=p.get("group.max.session.timeout.ms", _non_negative_int, 1_800_000),
            group_max_size=p.get("group.max.size", _positive_int, _INT32_MAX),
            offset_metadata_max_bytes=p.get("offset.metadata.max.bytes", _non_negative_int, 4_096),
            offsets_retention_minutes=p.get("offsets.retention.minutes", _positive_int, 10_080),
            offsets_retention_check_interval_ms=p.get("offsets.retention.check.interval.ms", _positive_long,
                                                      600_000),
            offsets_commit_timeout_ms=p.get("offsets.commit.timeout.ms", _positive_int, 5_000),
            offsets_load_buffer_size_bytes=p.get("offsets.load.buffer.size", _positive_int, 5 * _MIB),
            transaction_max_timeout_ms=p.get("transaction.max.timeout.ms", _positive_int, 900_000),
            transaction_abort_timed_out_transaction_cleanup_interval_ms=p.get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", _positive_int, 10_000),
            transactional_id_expiration_ms=p.get("transactional.id.expiration.ms", _positive_int,
                                                 7 * 24 * 3_600_000),
            transaction_remove_expired_transaction_cleanup_interval_ms=p.get(
                "transaction.remove.expired.transaction.cleanup.interval.ms", _positive_int, 3_600_000),
            transaction_state_log_load_buffer_size_bytes=p.get(
                "transaction.state.log.load.buffer.size", _positive_int, 5 * _MIB),
            transaction_partition_verification_enable=p.get(
                "transaction.partition.verification.enable", _bool, True),
            authorizer=authorizer_from_properties(p.get, ConfigError),
            log=_log_config(props),
            metrics=MetricsConfig(
                port=p.get("metrics.port", lambda k, raw: _integer(k, raw, 0, 65535), 0),
                host=p.get("metrics.host", lambda k, raw: raw, "127.0.0.1"),
                snapshot_interval_ms=p.get("metrics.snapshot.interval.ms", _positive_int, 5_000),
                lag_interval_ms=p.get("metrics.lag.interval.ms", _positive_int, 5_000)),
            properties=MappingProxyType(dict(props)),
        )
        config = replace(config, security=_security(props, config, p))
        _check_listeners(config)
        _check_replication(config)
        _check_cleaner(config)
        _check_groups(config)
        # Unknown keys are those nothing reads: not this config's, not ``LogConfig``'s (so a typo
        # such as ``log.retention.hour`` is reported, as Kafka does), and not ``log.dir`` (read
        # only when ``log.dirs`` is absent).
        known = frozenset(p.known | LOG_BROKER_KEYS | {"log.dir"})
        return replace(config, unknown_keys=tuple(sorted(k for k in props if k not in known)), known_keys=known)


def _internal_topics(p: "_Reader") -> InternalTopicsConfig:
    """Kafka's bounds: every value at least 1; replication factors are int16 (shorts)."""
    return InternalTopicsConfig(
        offsets_topic_num_partitions=p.get("offsets.topic.num.partitions", _positive_int, 50),
        offsets_topic_replication_factor=p.get("offsets.topic.replication.factor", _int16_positive, 3),
        offsets_topic_segment_bytes=p.get("offsets.topic.segment.bytes", _positive_int, 104_857_600),
        transaction_state_log_num_partitions=p.get("transaction.state.log.num.partitions", _positive_int, 50),
        transaction_state_log_replication_factor=p.get(
            "transaction.state.log.replication.factor", _int16_positive, 3),
        transaction_state_log_min_isr=p.get("transaction.state.log.min.isr", _positive_int, 2),
        transaction_state_log_segment_bytes=p.get(
            "transaction.state.log.segment.bytes", _positive_int, 104_857_600),
    )


def _log_config(props: Mapping[str, str]) -> LogConfig:
    try:
        return LogConfig.from_properties(props)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _security(props: Mapping[str, str], config: BrokerConfig, p: "_Reader") -> SecurityConfig:
    try:
        security, known = security_from_properties(props, [l.name for l in config.listeners])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    p.known.update(known)
    return security


def _check_replication(config: BrokerConfig) -> None:
    """Kafka's own cross-check: a follower's long poll must end before its socket times out."""
    if config.replica_socket_timeout_ms < config.replica_fetch_wait_max_ms:
        raise ConfigError(f"replica.socket.timeout.ms ({config.replica_socket_timeout_ms}) must be at "
                          f"least replica.fetch.wait.max.ms ({config.replica_fetch_wait_max_ms})")


def _check_cleaner(config: BrokerConfig) -> None:
    """Kafka's ``LogCleaner`` requirement: the dedupe buffer is split between the threads, and
    each share must hold at least 1 MiB."""
    per_thread = config.log_cleaner_dedupe_buffer_size_bytes // config.log_cleaner_threads
    if per_thread < _MIB:
        raise ConfigError(f"log.cleaner.dedupe.buffer.size ({config.log_cleaner_dedupe_buffer_size_bytes}) "
                          f"must be at least 1 MiB ({_MIB}) per cleaner thread "
                          f"(log.cleaner.threads={config.log_cleaner_threads})")


def _check_groups(config: BrokerConfig) -> None:
    if config.group_max_session_timeout_ms < config.group_min_session_timeout_ms:
        raise ConfigError(f"group.max.session.timeout.ms ({config.group_max_session_timeout_ms}) must be at "
                          f"least group.min.session.timeout.ms ({config.group_min_session_timeout_ms})")


def _check_listeners(config: BrokerConfig) -> None:
    names = [listener.name for listener in config.listeners]
    if len(set(names)) != len(names):
        raise ConfigError("listeners: each listener name may appear once")
    for listener in config.advertised_listeners:
        if listener.name not in names:
            raise ConfigError(f"advertised.listeners: {listener.name} is not one of listeners {names}")


class _Reader:
    """Reads typed values and remembers which keys were asked for (the known ones)."""

    def __init__(self, props: Mapping[str, str]):
        self.props = props
        self.known: set[str] = {"message.max.bytes"}

    def get(self, key: str, parse: Callable[[str, str], object], default, required: bool = False):
        self.known.add(key)
        raw = self.props.get(key)
        if raw is None or str(raw).strip() == "":
            if required:
                raise ConfigError(f"{key} is required")
            return default
        return parse(key, str(raw).strip())


def _integer(key: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not an integer") from None
    if not low <= value <= high:
        raise ConfigError(f"{key}={raw!r} must be in [{low}, {high}]")
    return value


def _non_negative_int(key: str, raw: str) -> int:
    return _integer(key, raw, 0, _INT32_MAX)


def _positive_int(key: str, raw: str) -> int:
    return _integer(key, raw, 1, _INT32_MAX)


def _positive_long(key: str, raw: str) -> int:
    return _integer(key, raw, 1, _INT64_MAX)


def _positive_double(key: str, raw: str) -> float:
    """A rate: a positive number (Kafka takes any double here, negatives included, and a
    negative throttle makes no sense)."""
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a number") from None
    if math.isnan(value) or value <= 0:
        raise ConfigError(f"{key}={raw!r} must be a positive number")
    return min(value, JAVA_DOUBLE_MAX)


def _int16_positive(key: str, raw: str) -> int:
    return _integer(key, raw, 1, 32767)  # replication factors are int16 on the wire


def _percentage(key: str, raw: str) -> int:
    return _integer(key, raw, 0, 100)


def _broker_id(key: str, raw: str) -> int:
    return _integer(key, raw, 0, _INT32_MAX)


def _bool(key: str, raw: str) -> bool:
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ConfigError(f"{key}={raw!r} must be true or false")


_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[0-9a-fA-F:.]+\]|[^:/\[\]\s]*):(\d{1,5})$")


def _listeners(key: str, raw: str) -> tuple[Listener, ...]:
    out = []
    for item in (part.strip() for part in raw.split(",") if part.strip()):
        match = _LISTENER.match(item)
        if not match:
            raise ConfigError(f"{key}: {item!r} is not NAME://HOST:PORT (e.g. PLAINTEXT://127.0.0.1:9092)")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise ConfigError(f"{key}: port {port} is outside 0-65535")
        out.append(Listener(name, host, port))
    if not out:
        raise ConfigError(f"{key} is empty")
    return tuple(out)


def _advertised(key: str, raw: str) -> tuple[Listener, ...]:
    """Clients connect to these: a wildcard host or port 0 can never be reached (Kafka refuses
    the non-routable 0.0.0.0 too)."""
    listeners = _listeners(key, raw)
    for listener in listeners:
        if listener.host in ("", "0.0.0.0", "::"):
            raise ConfigError(f"{key}: {listener} advertises a wildcard host clients cannot reach")
        if listener.port == 0:
            raise ConfigError(f"{key}: {listener} advertises port 0")
    return listeners


def _advertise(listeners: tuple[Listener, ...]) -> tuple[Listener, ...]:
    """Without ``advertised.listeners`` Kafka advertises ``listeners``, a wildcard host replaced
    by this machine's name. Port 0 stays 0 here; the broker fills in the bound port."""
    return tuple(
        replace(l, host=socket.getfqdn()) if l.host in ("", "0.0.0.0", "::") else l for l in listeners
    )


def _paths(key: str, raw: str) -> tuple[Path, ...]:
    paths = tuple(Path(p.strip()) for p in raw.split(",") if p.strip())
    if not paths:
        raise ConfigError(f"{key} is empty")
    return paths


_CHROOT = re.compile(r"^(/[^/\s]+)+$")


def _zk_connect(key: str, raw: str) -> str:
    hosts, slash, chroot = raw.partition("/")
    for host in hosts.split(","):
        match = re.match(r"^[^:\s]+:(\d{1,5})$", host.strip())
        if not match or int(match.group(1)) > 65535:
            raise ConfigError(f"{key}: {host!r} is not HOST:PORT (e.g. 127.0.0.1:2181)")
    if slash and not _CHROOT.match("/" + chroot):
        raise ConfigError(f"{key}: chroot {'/' + chroot!r} must be /name[/name...] (no trailing /)")
    return raw


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``--set key=value`` arguments; a missing ``=`` is a ConfigError naming the item."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def load_properties(path: Path, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    props = parse_properties(Path(path).read_text())
    props.update(overrides or {})
    return props
