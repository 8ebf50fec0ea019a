"""Source and sink options of the pylog connector: parity with Spark's Kafka connector (names,
defaults, precedence, batch/stream restrictions) and a clear error for every mistake. Pure."""

from __future__ import annotations

import pytest

from spark_log.options import (
    BATCH,
    STREAM,
    OptionError,
    parse_duration_ms,
    parse_sink_options,
    parse_source_options,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
SUB = {**BOOT, "subscribe": "t"}


def src(mode=None, **options):
    return parse_source_options({**SUB, **options}, mode)


# ------------------------------------------------------------------ defaults

def test_defaults_match_spark():
    batch = src(BATCH)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss is True
    assert batch.include_headers is False
    assert batch.min_partitions is None and batch.max_records_per_partition is None
    assert batch.group_id is None and batch.group_id_prefix == "spark-kafka-relation"
    assert batch.poll_timeout_ms == 120_000
    assert (batch.fetch_offset_num_retries, batch.fetch_offset_retry_interval_ms) == (3, 1000)
    stream = src(STREAM)
    assert stream.starting.kind == "latest" and stream.ending is None
    assert stream.max_trigger_delay_ms == 15 * 60 * 1000
    assert stream.group_id_prefix == "spark-kafka-source"
    assert stream.offsets_store == "none" and not stream.commits_to_store


def test_option_names_are_case_insensitive():
    opts = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SUBSCRIBE": "t",
                                 "STARTINGOFFSETS": "latest", "FailOnDataLoss": "FALSE"}, STREAM)
    assert opts.starting.kind == "latest" and opts.fail_on_data_loss is False


# ------------------------------------------------------------------ subscription

@pytest.mark.parametrize("options, kind, detail", [
    ({"subscribe": "a, b,,a"}, "subscribe", ("a", "b")),
    ({"subscribePattern": "ev.*"}, "subscribePattern", "ev.*"),
    ({"assign": '{"t":[1,0],"u":[3]}'}, "assign", (("t", 0), ("t", 1), ("u", 3))),
])
def test_subscription_kinds(options, kind, detail):
    sub = parse_source_options({**BOOT, **options}).subscription
    assert sub.kind == kind
    assert detail in (sub.topics, sub.pattern, sub.assigned)


@pytest.mark.parametrize("options, fragment", [
    ({}, "One of the options 'assign', 'subscribe' or 'subscribePattern' must be specified"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "Only one of the options"),
    ({"subscribe": "t", "subscribePattern": "t.*"}, "Only one of the options"),
    ({"subscribe": " , "}, "Option 'subscribe': no topics"),
    ({"subscribePattern": ""}, "Option 'subscribePattern': the pattern is empty"),
    ({"subscribePattern": "(unclosed"}, "not a valid regular expression"),
    ({"assign": "{}"}, "Option 'assign': no topic-partitions"),
    ({"assign": "t-0"}, "Option 'assign'"),
    ({"assign": '{"t":{"0":1}}'}, "Option 'assign'"),
])
def test_subscription_errors(options, fragment):
    with pytest.raises(OptionError, match=fragment.replace("(", r"\(")):
        parse_source_options({**BOOT, **options})


@pytest.mark.parametrize("servers, fragment", [
    (None, "'kafka.bootstrap.servers' must be specified"),
    ("", "'kafka.bootstrap.servers' must be specified"),
    ("localhost", "is not host:port"),
    ("h:1,h:notaport", "'h:notaport' is not host:port"),
    ("h:70000", "is not host:port"),
])
def test_bootstrap_servers_required_and_checked(servers, fragment):
    options = {"subscribe": "t"}
    if servers is not None:
        options["kafka.bootstrap.servers"] = servers
    with pytest.raises(OptionError, match=fragment):
        parse_source_options(options)


# ------------------------------------------------------------------ starting/ending offsets

@pytest.mark.parametrize("options, kind", [
    ({"startingOffsets": "earliest"}, "earliest"),
    ({"startingOffsets": "LATEST"}, "latest"),
    ({"startingOffsets": '{"t":{"0":5,"1":-2}}'}, "specific"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":1000}}'}, "by_timestamp"),
    ({"startingTimestamp": "1000"}, "global_timestamp"),
    # precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    ({"startingTimestamp": "5", "startingOffsetsByTimestamp": '{"t":{"0":1}}', "startingOffsets": "earliest"},
     "global_timestamp"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":1}}', "startingOffsets": "earliest"}, "by_timestamp"),
])
def test_starting_offsets_and_precedence(options, kind):
    assert src(STREAM, **options).starting.kind == kind


@pytest.mark.parametrize("options, kind", [
    ({"endingOffsets": "latest"}, "latest"),
    ({"endingOffsets": '{"t":{"0":9,"1":-1}}'}, "specific"),
    ({"endingOffsetsByTimestamp": '{"t":{"0":9}}'}, "by_timestamp"),
    ({"endingTimestamp": "9", "endingOffsetsByTimestamp": '{"t":{"0":9}}', "endingOffsets": "latest"},
     "global_timestamp"),
])
def test_ending_offsets_and_precedence(options, kind):
    assert src(BATCH, **options).ending.kind == kind


def test_timestamp_strategy():
    assert src(STREAM, startingTimestamp="1").starting.strategy == "error"
    assert src(STREAM, startingTimestamp="1", startingOffsetsByTimestampStrategy="LATEST").starting.strategy == "latest"
    with pytest.raises(OptionError, match="'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'"):
        src(STREAM, startingOffsetsByTimestampStrategy="earliest")


@pytest.mark.parametrize("mode, options, fragment", [
    (BATCH, {"startingOffsets": "latest"}, "'startingOffsets' can't be 'latest' for batch"),
    (BATCH, {"startingOffsets": '{"t":{"0":-1}}'}, "t-0 can't be latest"),
    (BATCH, {"endingOffsets": "earliest"}, "'endingOffsets' can't be 'earliest' for batch"),
    (BATCH, {"endingOffsets": '{"t":{"0":-2}}'}, "t-0 can't be earliest"),
    (STREAM, {"endingOffsets": "latest"}, "'endingOffsets' is not valid in streaming"),
    (STREAM, {"endingOffsetsByTimestamp": '{"t":{"0":1}}'}, "'endingOffsetsByTimestamp' is not valid in streaming"),
    (STREAM, {"endingTimestamp": "1"}, "'endingTimestamp' is not valid in streaming"),
    (None, {"startingOffsets": "newest"}, "Option 'startingOffsets' must be 'earliest', 'latest', 'group' or JSON"),
    (None, {"startingOffsets": '{"t":{"0":-3}}'}, "Option 'startingOffsets'"),
    (BATCH, {"endingOffsets": "group"}, "Option 'endingOffsets' must be 'latest' or JSON"),
    (None, {"startingTimestamp": "yesterday"}, "'startingTimestamp' must be a timestamp in epoch milliseconds"),
    (None, {"startingTimestamp": "-5"}, "'startingTimestamp' must be a timestamp"),
    (BATCH, {"endingTimestamp": "x"}, "'endingTimestamp' must be a timestamp"),
    (None, {"startingOffsetsByTimestamp": '{"t":{"0":-1}}'}, "'startingOffsetsByTimestamp' must be JSON"),
    (None, {"startingOffsetsByTimestamp": "1000"}, "'startingOffsetsByTimestamp' must be JSON"),
])
def test_offset_option_errors(mode, options, fragment):
    with pytest.raises(OptionError, match=fragment.replace("(", r"\(")):
        src(mode, **options)


def test_batch_only_options_are_checked_only_for_their_mode():
    # Stream-only restrictions do not apply to a batch query and vice versa.
    assert src(BATCH, endingOffsets="latest").ending.kind == "latest"
    assert src(STREAM, startingOffsets="latest").starting.kind == "latest"


def test_trigger_options_in_batch_only_warn():
    opts = src(BATCH, maxOffsetsPerTrigger="10", minOffsetsPerTrigger="100", maxTriggerDelay="1m")
    assert any("'maxOffsetsPerTrigger' is ignored in batch" in w for w in opts.warnings)
    assert any("'minOffsetsPerTrigger' is ignored in batch" in w for w in opts.warnings)


# ------------------------------------------------------------------ numbers and booleans

@pytest.mark.parametrize("name, value, field, expected", [
    ("minPartitions", "4", "min_partitions", 4),
    ("maxRecordsPerPartition", "1000", "max_records_per_partition", 1000),
    ("maxOffsetsPerTrigger", "50", "max_offsets_per_trigger", 50),
    ("minOffsetsPerTrigger", "5", "min_offsets_per_trigger", 5),
    ("maxTriggerDelay", "30s", "max_trigger_delay_ms", 30_000),
    ("kafkaConsumer.pollTimeoutMs", "500", "poll_timeout_ms", 500),
    ("fetchOffset.numRetries", "0", "fetch_offset_num_retries", 0),
    ("fetchOffset.retryIntervalMs", "10", "fetch_offset_retry_interval_ms", 10),
    ("failOnDataLoss", "false", "fail_on_data_loss", False),
    ("includeHeaders", "True", "include_headers", True),
])
def test_values(name, value, field, expected):
    assert getattr(src(STREAM, **{name: value}), field) == expected


@pytest.mark.parametrize("name, value, fragment", [
    ("minPartitions", "0", "'minPartitions' must be a positive integer"),
    ("minPartitions", "two", "'minPartitions' must be a positive integer"),
    ("maxRecordsPerPartition", "-1", "'maxRecordsPerPartition' must be a positive integer"),
    ("maxOffsetsPerTrigger", "0", "'maxOffsetsPerTrigger' must be a positive integer"),
    ("minOffsetsPerTrigger", "1.5", "'minOffsetsPerTrigger' must be a positive integer"),
    ("maxTriggerDelay", "soon", "'maxTriggerDelay' must be a duration"),
    ("maxTriggerDelay", "5 parsecs", "'maxTriggerDelay' must be a duration"),
    ("failOnDataLoss", "yes", "'failOnDataLoss' must be 'true' or 'false'"),
    ("includeHeaders", "1", "'includeHeaders' must be 'true' or 'false'"),
    ("fetchOffset.numRetries", "-1", "'fetchOffset.numRetries' must be an integer >= 0"),
])
def test_value_errors(name, value, fragment):
    with pytest.raises(OptionError, match=fragment):
        src(STREAM, **{name: value})


def test_min_offsets_must_not_exceed_max_offsets_in_streaming():
    with pytest.raises(OptionError, match=r"'minOffsetsPerTrigger' \(100\) must not be higher than "
                                          r"'maxOffsetsPerTrigger' \(10\)"):
        src(STREAM, maxOffsetsPerTrigger="10", minOffsetsPerTrigger="100")
    assert src(STREAM, maxOffsetsPerTrigger="100", minOffsetsPerTrigger="100").min_offsets_per_trigger == 100


@pytest.mark.parametrize("text, ms", [
    ("15m", 900_000), ("30s", 30_000), ("250ms", 250), ("2h", 7_200_000), ("1d", 86_400_000),
    ("1min", 60_000), ("1000", 1000), ("2000us", 2), ("0", 0),
])
def test_duration(text, ms):
    assert parse_duration_ms("maxTriggerDelay", text) == ms


def test_near_miss_option_names_fail():
    with pytest.raises(OptionError, match="did you mean 'startingOffsets'"):
        src(BATCH, startingOffset="earliest")
    with pytest.raises(OptionError, match="did you mean 'failOnDataLoss'"):
        src(BATCH, failOnDataLos="false")
    # Options owned by Spark or unrelated names are left alone, as Spark does.
    src(BATCH, checkpointLocation="/tmp/x", path="p", somethingElse="1")


# ------------------------------------------------------------------ kafka.* pass-through

@pytest.mark.parametrize("key", ["auto.offset.reset", "key.deserializer", "value.deserializer",
                                 "enable.auto.commit", "interceptor.classes"])
def test_rejected_consumer_settings(key):
    with pytest.raises(OptionError, match=f"Kafka option 'kafka.{key}' is not supported"):
        src(STREAM, **{f"kafka.{key}": "x"})


def test_consumer_settings_pass_through():
    opts = src(BATCH, **{"kafka.isolation.level": "read_committed", "kafka.fetch.max.bytes": "1000",
                         "kafka.max.partition.fetch.bytes": "500", "kafka.fetch.max.wait.ms": "0",
                         "kafka.check.crcs": "false", "kafka.client.id": "me",
                         "kafka.request.timeout.ms": "5000", "kafka.session.timeout.ms": "10"})
    assert opts.consumer == {"isolation_level": "read_committed", "fetch_max_bytes": 1000,
                             "max_partition_fetch_bytes": 500, "fetch_max_wait_ms": 0,
                             "check_crcs": False, "client_id": "me", "request_timeout_ms": 5000}
    assert any("kafka.session.timeout.ms" in w for w in opts.warnings)


@pytest.mark.parametrize("options, fragment", [
    ({"kafka.isolation.level": "serializable"}, "'kafka.isolation.level' must be"),
    ({"kafka.fetch.max.bytes": "0"}, "'kafka.fetch.max.bytes' must be a positive integer"),
    ({"kafka.check.crcs": "maybe"}, "'kafka.check.crcs' must be 'true' or 'false'"),
])
def test_consumer_setting_errors(options, fragment):
    with pytest.raises(OptionError, match=fragment):
        src(BATCH, **options)


# ------------------------------------------------------------------ groups and the offsets store

ZK = {"kafka.group.id": "g", "offsets.store": "zookeeper", "zookeeper.connect": "127.0.0.1:2181/c"}


def test_group_id_and_store():
    opts = src(STREAM, **ZK)
    assert (opts.group_id, opts.offsets_store, opts.zookeeper_connect) == ("g", "zookeeper", "127.0.0.1:2181/c")
    assert opts.commits_to_store
    assert any("'kafka.group.id' is set" in w for w in opts.warnings)
    assert src(BATCH, **ZK, startingOffsets="group").starting.kind == "group"
    assert src(STREAM, groupIdPrefix="mine").group_id_prefix == "mine"
    assert any("'groupIdPrefix' is ignored" in w for w in src(STREAM, groupIdPrefix="x", **ZK).warnings)


KAFKA = {"kafka.group.id": "g", "offsets.store": "kafka"}


def test_kafka_store():
    """offsets.store=kafka: the group's offsets in __consumer_offsets, reached through the
    bootstrap servers; no ZooKeeper needed, and a group id may hold what Kafka allows."""
    opts = src(STREAM, **KAFKA)
    assert (opts.group_id, opts.offsets_store, opts.zookeeper_connect) == ("g", "kafka", None)
    assert opts.commits_to_store
    assert src(BATCH, **KAFKA, startingOffsets="group").starting.kind == "group"
    assert src(STREAM, **{**KAFKA, "offsets.store": " Kafka "}).offsets_store == "kafka"  # values: any case
    assert src(STREAM, **{**KAFKA, "kafka.group.id": "team/app.v2"}).group_id == "team/app.v2"
    ignored = src(STREAM, **KAFKA, **{"zookeeper.connect": "h:1"})
    assert ignored.zookeeper_connect is None
    assert any("'zookeeper.connect' is ignored" in w for w in ignored.warnings)
    # Spark's generated group id is never the committed one: groupIdPrefix alone is not enough.
    with pytest.raises(OptionError, match="'offsets.store' = 'kafka' needs 'kafka.group.id'.*stable name"):
        src(STREAM, **{"offsets.store": "kafka", "groupIdPrefix": "mine"})


@pytest.mark.parametrize("options, fragment", [
    ({"offsets.store": "redis"}, "'offsets.store' must be one of none, zookeeper, kafka, got 'redis'"),
    ({"offsets.store": "kafka"}, "'offsets.store' = 'kafka' needs 'kafka.group.id'"),
    ({"offsets.store": "zookeeper", "zookeeper.connect": "h:1"}, "'offsets.store' = 'zookeeper' needs 'kafka.group.id'"),
    ({"offsets.store": "zookeeper", "kafka.group.id": "g"}, "needs 'zookeeper.connect'"),
    ({"startingOffsets": "group"}, "'startingOffsets' = 'group' needs 'kafka.group.id' and 'offsets.store' = 'kafka'"),
    ({"startingOffsets": "group", "kafka.group.id": "g"}, "'startingOffsets' = 'group' needs"),
    ({**ZK, "kafka.group.id": "a/b"}, "'kafka.group.id': 'a/b' is not a valid group id for 'offsets.store' = 'zookeeper'"),
    ({**ZK, "kafka.group.id": ".."}, "is not a valid group id"),
    ({**KAFKA, "kafka.group.id": " "}, "'kafka.group.id': ' ' is not a valid group id"),
    ({**KAFKA, "kafka.group.id": "g" * 250}, "is not a valid group id \\(1-249 characters"),
])
def test_group_errors(options, fragment):
    with pytest.raises(OptionError, match=fragment):
        src(STREAM, **options)


# ------------------------------------------------------------------ sink

def test_sink_options():
    sink = parse_sink_options({**BOOT, "topic": "out", "kafka.acks": "1", "kafka.compression.type": "lz4",
                               "kafka.linger.ms": "20", "kafka.batch.size": "65536"})
    assert sink.topic == "out"
    assert sink.producer == {"acks": 1, "compression": "lz4", "linger_ms": 20, "batch_bytes_max": 65536,
                             "enable_idempotence": False}
    assert parse_sink_options(BOOT).topic is None
    # Bigger record batches than Kafka's 16 KiB default unless told otherwise.
    assert parse_sink_options(BOOT).producer == {"batch_bytes_max": 1 << 20, "linger_ms": 5}
    assert parse_sink_options({**BOOT, "kafka.acks": "all"}).producer == {"acks": -1, "batch_bytes_max": 1 << 20,
                                                                         "linger_ms": 5}


@pytest.mark.parametrize("options, fragment", [
    ({"kafka.key.serializer": "x"}, "'kafka.key.serializer' is not supported"),
    ({"kafka.value.serializer": "x"}, "'kafka.value.serializer' is not supported"),
    ({"kafka.transactional.id": "x"}, "'kafka.transactional.id' is not supported"),
    ({"kafka.acks": "2"}, "'kafka.acks' must be 'all', '-1', '0' or '1'"),
    ({"kafka.compression.type": "zstd"}, "'kafka.compression.type' must be one of none, gzip, lz4"),
    ({"kafka.acks": "1", "kafka.enable.idempotence": "true"}, "'kafka.enable.idempotence' = 'true' needs"),
    ({"kafka.linger.ms": "-1"}, "'kafka.linger.ms' must be an integer >= 0"),
    ({"topic": " "}, "Option 'topic' is empty"),
])
def test_sink_option_errors(options, fragment):
    with pytest.raises(OptionError, match=fragment):
        parse_sink_options({**BOOT, **options})


def test_sink_needs_bootstrap_servers():
    with pytest.raises(OptionError, match="'kafka.bootstrap.servers' must be specified"):
        parse_sink_options({"topic": "t"})
