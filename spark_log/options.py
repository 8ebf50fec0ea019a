"""The ``pylog`` source and sink options: parsed, validated and turned into settings. Pure.

Names, defaults, precedence and batch/stream restrictions follow Spark's Kafka connector
(``KafkaSourceProvider``, reference tables T1/T2). Every mistake raises ``OptionError`` naming the
option and what is valid, so a query fails while it is planned, before any task runs. Option names
are case-insensitive, as in Spark (PySpark hands a data source its options lower-cased).

pylog additions, all off by default:

- ``offsets.store`` = ``none`` | ``zookeeper`` (with ``zookeeper.connect``) | ``kafka``: with
  ``kafka.group.id`` set, a streaming query writes the offsets it consumed to ZooKeeper
  (``/consumers/<group>/offsets/<topic>/<partition>``) or to Kafka's ``__consumer_offsets``
  (through the group coordinator) when Spark commits a batch, so lag tools see them. Monitoring
  only: the checkpoint stays the source of truth. Rules and reasons: ``spark_log.group_options``.
- ``startingOffsets`` = ``group``: start from the group's committed offsets in that store
  (partitions without one start at their earliest offset); used for incremental offline loads.

Defaults that differ from Spark: ``kafkaConsumer.pollTimeoutMs`` 120000 (Spark falls back to
``spark.network.timeout``); ``fetchOffset.retryIntervalMs`` 1000 (Spark's code, not its docs);
the sink's producer uses ``kafka.batch.size`` 1 MiB and ``kafka.linger.ms`` 5 unless given.

The ``kafka.*`` options become client keyword arguments in ``spark_log.client_options``; the
parsers of one value and ``OptionError`` are in ``spark_log.option_values``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Mapping

from spark_log.client_options import consumer_settings, producer_settings
from spark_log.group_options import GroupOptionError, parse_group_options
from spark_log.offsets import (
    EARLIEST,
    LATEST,
    OffsetJsonError,
    TopicPartition,
    format_partitions,
    parse_partition_list,
    parse_partition_offsets,
)
# OptionError and parse_duration_ms are defined there and imported from here too (``__all__``).
from spark_log.option_values import (
    INT32_MAX,
    OptionError,
    bool_option,
    int_option,
    lower_keys,
    or_default,
    parse_duration_ms,
)

__all__ = [
    "OptionError",
    "Subscription",
    "OffsetSpec",
    "SourceOptions",
    "SinkOptions",
    "parse_source_options",
    "parse_sink_options",
    "parse_duration_ms",
    "BATCH",
    "STREAM",
]

BATCH = "batch"
STREAM = "stream"

# Canonical spelling of every option this package reads; lookups are by lower-case name.
SOURCE_OPTIONS = (
    "kafka.bootstrap.servers", "assign", "subscribe", "subscribePattern",
    "startingOffsets", "endingOffsets", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger", "maxTriggerDelay", "includeHeaders", "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "offsets.store", "zookeeper.connect", "zookeeper.session.timeout.ms",
    "isolation.level",  # the name of kafka.isolation.level without the prefix (read_committed: to the LSO)
)
SINK_OPTIONS = ("kafka.bootstrap.servers", "topic", "includeHeaders", "deliveryGuarantee",
                "transactionalIdPrefix", "transactionTimeoutMs", "commitLogTopic")
# Options Spark itself adds or that belong to other layers; never reported as unknown.
_FOREIGN_OPTIONS = {"path", "checkpointlocation", "queryname"}

TIMESTAMP_STRATEGIES = ("error", "latest")
DEFAULT_GROUP_ID_PREFIX = {BATCH: "spark-kafka-relation", STREAM: "spark-kafka-source"}
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
DEFAULT_POLL_TIMEOUT_MS = 120_000
DEFAULT_ZK_SESSION_TIMEOUT_MS = 10_000

@dataclass(frozen=True)
class Subscription:
    """Exactly one of Spark's three strategies."""

    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.kind == "assign":
            return f"assign {format_partitions(self.assigned)}"
        if self.kind == "subscribe":
            return f"subscribe {','.join(self.topics)}"
        return f"subscribePattern {self.pattern}"


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends (Spark's ``KafkaOffsetRangeLimit``).

    ``kind``: ``earliest`` | ``latest`` | ``specific`` (``offsets``, may hold -2/-1) |
    ``by_timestamp`` (``timestamps`` per partition) | ``global_timestamp`` (``timestamp``) |
    ``group`` (the consumer group's committed offsets). ``option`` is the option it came from,
    for error messages."""

    kind: str
    option: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"  # startingOffsetsByTimestampStrategy: no matching offset -> error | latest


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # None for streaming
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    include_headers: bool = False
    group_id: str | None = None
    group_id_prefix: str = DEFAULT_GROUP_ID_PREFIX[STREAM]
    offsets_store: str = "none"
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = DEFAULT_ZK_SESSION_TIMEOUT_MS
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    consumer: Mapping[str, object] = field(default_factory=dict)  # broker.client.Consumer kwargs
    warnings: tuple[str, ...] = ()

    @property
    def commits_to_store(self) -> bool:
        return self.offsets_store != "none"


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    producer: Mapping[str, object] = field(default_factory=dict)  # broker.client.Producer kwargs
    warnings: tuple[str, ...] = ()
    # Exactly-once (spark_log.transactions); the prefix is None when neither the option nor a
    # checkpointLocation option gives one (batch jobs make their own; streams must have one).
    delivery_guarantee: str = "at-least-once"
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = 60_000
    commit_log_topic: str = "pylog-spark-commits"
    checkpoint_location: str | None = None  # the option's value, as given (None: not an option)

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE


# ---------------------------------------------------------------------------------------- helpers

def _check_unknown(opts: dict, known: tuple[str, ...]) -> None:
    """Spark ignores options it does not know; a near-miss of a known name is almost always a
    typo that would silently change the query, so it fails instead."""
    lowered = {k.lower(): k for k in known}
    for key in opts:
        if key in lowered or key in _FOREIGN_OPTIONS or key.startswith("kafka."):
            continue
        close = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.85)
        if close:
            raise OptionError(f"Unknown option '{key}': did you mean '{lowered[close[0]]}'?")


def _bootstrap(opts: dict) -> str:
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified "
                          "(a comma-separated list of host:port)")
    for item in servers.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(f"Option 'kafka.bootstrap.servers': {item.strip()!r} is not host:port")
    return servers


# ---------------------------------------------------------------------------------------- source

def _subscription(opts: dict) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if name.lower() in opts]
    if not given:
        raise OptionError("One of the options 'assign', 'subscribe' or 'subscribePattern' must be "
                          "specified for the pylog source")
    if len(given) > 1:
        raise OptionError(f"Only one of the options 'assign', 'subscribe' or 'subscribePattern' can "
                          f"be specified for the pylog source; got {', '.join(given)}")
    kind = given[0]
    text = opts[kind.lower()]
    if kind == "assign":
        try:
            assigned = parse_partition_list(text)
        except OffsetJsonError as exc:
            raise OptionError(f"Option 'assign': {exc}") from None
        if not assigned:
            raise OptionError(f"Option 'assign': no topic-partitions to assign in {text!r}")
        return Subscription("assign", tuple(sorted({t for t, _ in assigned})), None, tuple(assigned))
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"Option 'subscribe': no topics to subscribe to in {text!r} "
                              f"(a comma-separated list of topics)")
        return Subscription("subscribe", topics)
    if not text.strip():
        raise OptionError("Option 'subscribePattern': the pattern is empty")
    try:
        re.compile(text)
    except re.error as exc:
        raise OptionError(f"Option 'subscribePattern': {text!r} is not a valid regular expression: {exc}") from None
    return Subscription("subscribePattern", (), text)


def _offsets_option(opts: dict, name: str, *, starting: bool, strategy: str) -> OffsetSpec | None:
    """One of startingOffsets/endingOffsets ("earliest", "latest", "group" or JSON)."""
    text = opts.get(name.lower())
    if text is None:
        return None
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word, name)
    if word == "group" and starting:
        return OffsetSpec("group", name)
    try:
        offsets = parse_partition_offsets(text, minimum=EARLIEST)
    except OffsetJsonError as exc:
        valid = "'earliest', 'latest', 'group'" if starting else "'latest'"
        raise OptionError(f"Option '{name}' must be {valid} or JSON like "
                          f"{{\"topicA\":{{\"0\":23,\"1\":-1}}}}: {exc}") from None
    return OffsetSpec("specific", name, offsets=offsets, strategy=strategy)


def _timestamp_options(opts: dict, prefix: str, strategy: str) -> OffsetSpec | None:
    """startingTimestamp > startingOffsetsByTimestamp (and the ending pair): the first set wins."""
    single = f"{prefix}Timestamp"
    per_partition = f"{prefix}OffsetsByTimestamp"
    if single.lower() in opts:
        text = opts[single.lower()].strip()
        if not text.isdigit():
            raise OptionError(f"Option '{single}' must be a timestamp in epoch milliseconds "
                              f"(e.g. '1700000000000'), got {opts[single.lower()]!r}")
        return OffsetSpec("global_timestamp", single, timestamp=int(text), strategy=strategy)
    if per_partition.lower() in opts:
        try:
            stamps = parse_partition_offsets(opts[per_partition.lower()], minimum=0)
        except OffsetJsonError as exc:
            raise OptionError(f"Option '{per_partition}' must be JSON like "
                              f"{{\"topicA\":{{\"0\":1700000000000}}}} with epoch-millisecond "
                              f"timestamps: {exc}") from None
        return OffsetSpec("by_timestamp", per_partition, timestamps=stamps, strategy=strategy)
    return None


def _check_batch_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """KafkaSourceProvider.validateBatchOptions: batch cannot start at latest or end at earliest."""
    if starting.kind == "latest":
        raise OptionError("Option 'startingOffsets' can't be 'latest' for batch queries "
                          "(use 'earliest', 'group' or JSON offsets)")
    if starting.kind == "specific":
        latest = [tp for tp, off in starting.offsets.items() if off == LATEST]
        if latest:
            raise OptionError(f"Option 'startingOffsets': the offset of {format_partitions(latest)} "
                              f"can't be latest (-1) for batch queries")
    if ending.kind == "earliest":
        raise OptionError("Option 'endingOffsets' can't be 'earliest' for batch queries "
                          "(use 'latest' or JSON offsets)")
    if ending.kind == "specific":
        earliest = [tp for tp, off in ending.offsets.items() if off == EARLIEST]
        if earliest:
            raise OptionError(f"Option 'endingOffsets': the offset of {format_partitions(earliest)} "
                              f"can't be earliest (-2) for batch queries")


def _check_stream_only(opts: dict, mode: str | None, warnings: list[str]) -> None:
    ending = [n for n in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp") if n.lower() in opts]
    if mode == STREAM and ending:
        raise OptionError(f"Option '{ending[0]}' is not valid in streaming queries "
                          f"(a stream has no end; use it with spark.read)")
    if mode == BATCH:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                warnings.append(f"Option '{name}' is ignored in batch queries")


def _starting(opts: dict, mode: str | None, strategy: str) -> OffsetSpec:
    spec = _timestamp_options(opts, "starting", strategy)
    if spec is None:
        spec = _offsets_option(opts, "startingOffsets", starting=True, strategy=strategy)
    if spec is None:
        spec = OffsetSpec("earliest" if mode == BATCH else "latest", "startingOffsets")
    return spec


def _ending(opts: dict) -> OffsetSpec:
    spec = _timestamp_options(opts, "ending", "latest")
    if spec is None:
        spec = _offsets_option(opts, "endingOffsets", starting=False, strategy="latest")
    return spec or OffsetSpec("latest", "endingOffsets")


def _trigger_limits(opts: dict, mode: str | None) -> tuple[int | None, int | None, int]:
    max_offsets = int_option(opts, "maxOffsetsPerTrigger")
    min_offsets = int_option(opts, "minOffsetsPerTrigger")
    delay_text = opts.get("maxtriggerdelay")
    delay = DEFAULT_MAX_TRIGGER_DELAY_MS if delay_text is None else parse_duration_ms("maxTriggerDelay", delay_text)
    if mode != BATCH and max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise OptionError(f"Option 'minOffsetsPerTrigger' ({min_offsets}) must not be higher than "
                          f"'maxOffsetsPerTrigger' ({max_offsets})")
    return max_offsets, min_offsets, delay


def parse_source_options(options: Mapping[str, str], mode: str | None = None) -> SourceOptions:
    """Validate the options of ``spark.read``/``spark.readStream``. ``mode`` is ``BATCH``,
    ``STREAM`` or None (checks common to both, as when Spark first asks for the schema)."""
    opts = lower_keys(options)
    _check_unknown(opts, SOURCE_OPTIONS)
    warnings: list[str] = []
    bootstrap = _bootstrap(opts)
    subscription = _subscription(opts)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in TIMESTAMP_STRATEGIES:
        raise OptionError(f"Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                          f"got {opts['startingoffsetsbytimestampstrategy']!r}")
    _check_stream_only(opts, mode, warnings)
    starting = _starting(opts, mode, strategy)
    ending = _ending(opts) if mode != STREAM else None
    if mode == BATCH:
        _check_batch_offsets(starting, ending)
    max_offsets, min_offsets, delay = _trigger_limits(opts, mode)
    consumer, group_id, consumer_warnings = consumer_settings(opts)
    warnings += consumer_warnings
    try:
        group = parse_group_options(opts, group_id, starting.kind)
    except GroupOptionError as exc:
        raise OptionError(str(exc)) from None
    warnings += group.warnings
    prefix = opts.get("groupidprefix", DEFAULT_GROUP_ID_PREFIX[mode or STREAM])
    if group_id is not None and "groupidprefix" in opts:
        warnings.append("Option 'groupIdPrefix' is ignored because 'kafka.group.id' is set")
    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        min_partitions=int_option(opts, "minPartitions", maximum=INT32_MAX),
        max_records_per_partition=int_option(opts, "maxRecordsPerPartition"),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=delay,
        include_headers=bool_option(opts, "includeHeaders", False),
        group_id=group_id,
        group_id_prefix=prefix,
        offsets_store=group.offsets_store,
        zookeeper_connect=group.zookeeper_connect,
        zookeeper_session_timeout_ms=or_default(int_option(opts, "zookeeper.session.timeout.ms"),
                                                DEFAULT_ZK_SESSION_TIMEOUT_MS),
        poll_timeout_ms=or_default(int_option(opts, "kafkaConsumer.pollTimeoutMs"), DEFAULT_POLL_TIMEOUT_MS),
        fetch_offset_num_retries=or_default(
            int_option(opts, "fetchOffset.numRetries", minimum=0, maximum=INT32_MAX), 3),
        fetch_offset_retry_interval_ms=or_default(
            int_option(opts, "fetchOffset.retryIntervalMs", minimum=0), 1000),
        consumer=consumer,
        warnings=tuple(warnings),
    )


# ---------------------------------------------------------------------------------------- sink

# A sink task writes whole Arrow batches: 1 MiB record batches (Kafka's default batch.size is
# 16 KiB) cut the per-batch cost five-fold. kafka.batch.size / kafka.linger.ms override them.
SINK_PRODUCER_DEFAULTS = {"batch_bytes_max": 1 << 20, "linger_ms": 5}

AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
DEFAULT_DELIVERY_GUARANTEE = AT_LEAST_ONCE
# Kafka's transaction.timeout.ms default; the broker caps it (transaction.max.timeout.ms, 15 min).
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


def _guarantee_options(opts: dict, producer: dict) -> dict:
    """``deliveryGuarantee``, ``transactionalIdPrefix`` (default from the ``checkpointLocation``
    option: ``spark_log.transactions.default_prefix``), ``transactionTimeoutMs``, ``commitLogTopic``."""
    from spark_log.transactions import default_prefix

    guarantee = opts.get("deliveryguarantee", DEFAULT_DELIVERY_GUARANTEE).strip().lower()
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise OptionError(f"Option 'deliveryGuarantee' must be '{AT_LEAST_ONCE}' or '{EXACTLY_ONCE}', "
                          f"got {opts['deliveryguarantee']!r}")
    if guarantee == EXACTLY_ONCE and (producer.get("acks", -1) != -1 or producer.get("enable_idempotence") is False):
        raise OptionError("Option 'deliveryGuarantee' = 'exactly-once' needs 'kafka.acks' = 'all' "
                          "and idempotence (transactions are idempotent writes)")
    prefix = opts.get("transactionalidprefix")
    if prefix is not None and not prefix.strip():
        raise OptionError("Option 'transactionalIdPrefix' is empty")
    topic = opts.get("commitlogtopic", "pylog-spark-commits").strip()
    if not topic:
        raise OptionError("Option 'commitLogTopic' is empty")
    return {
        "delivery_guarantee": guarantee,
        "transactional_id_prefix": prefix.strip() if prefix else default_prefix(opts.get("checkpointlocation")),
        "transaction_timeout_ms": or_default(int_option(opts, "transactionTimeoutMs", maximum=INT32_MAX),
                                             DEFAULT_TRANSACTION_TIMEOUT_MS),
        "commit_log_topic": topic,
        "checkpoint_location": opts.get("checkpointlocation"),
    }


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate the options of ``df.write``/``df.writeStream``."""
    opts = lower_keys(options)
    _check_unknown(opts, SINK_OPTIONS + SOURCE_OPTIONS)
    bootstrap = _bootstrap(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("Option 'topic' is empty: give a topic name or leave the option out "
                          "and provide a 'topic' column")
    producer, warnings = producer_settings(opts)
    producer = {**SINK_PRODUCER_DEFAULTS, **producer}
    guarantee = _guarantee_options(opts, producer)
    return SinkOptions(bootstrap, topic.strip() if topic else None, producer, tuple(warnings), **guarantee)
