"""LogConfig: Kafka's names, defaults, precedence and validation."""

from __future__ import annotations

import pytest

from broker.log import LogConfig

HOUR = 3_600_000


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == 168 * HOUR
    assert config.retention_ms == 168 * HOUR
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10485760
    assert config.flush_messages == 2**63 - 1
    assert config.flush_ms is None
    assert config.message_max_bytes == 1048588
    assert LogConfig.from_properties({}) == config


@pytest.mark.parametrize(
    "props, field, expected",
    [
        ({"log.retention.hours": "24"}, "retention_ms", 24 * HOUR),
        ({"log.retention.minutes": "30", "log.retention.hours": "24"}, "retention_ms", 30 * 60_000),
        ({"log.retention.ms": "1234", "log.retention.minutes": "30"}, "retention_ms", 1234),
        ({"log.retention.hours": "-1"}, "retention_ms", -1),
        ({"log.retention.minutes": "-1"}, "retention_ms", -1),
        ({"log.roll.hours": "2"}, "segment_ms", 2 * HOUR),
        ({"log.roll.ms": "500", "log.roll.hours": "2"}, "segment_ms", 500),
        ({"log.segment.bytes": " 4096 "}, "segment_bytes", 4096),
        ({"log.retention.bytes": "100000"}, "retention_bytes", 100000),
        ({"log.index.interval.bytes": "0"}, "index_interval_bytes", 0),
        ({"log.index.size.max.bytes": "4096"}, "segment_index_bytes", 4096),
        ({"log.flush.interval.messages": "1"}, "flush_messages", 1),
        ({"log.flush.interval.ms": "1000"}, "flush_ms", 1000),
        ({"message.max.bytes": "2000000"}, "message_max_bytes", 2000000),
        ({"broker.id": "3", "zookeeper.connect": "x:2181"}, "segment_bytes", 1 << 30),  # ignored
    ],
)
def test_broker_properties(props, field, expected) -> None:
    assert getattr(LogConfig.from_properties(props), field) == expected


@pytest.mark.parametrize(
    "overrides, field, expected",
    [
        ({"segment.bytes": "1000"}, "segment_bytes", 1000),
        ({"segment.ms": "60000"}, "segment_ms", 60000),
        ({"retention.ms": "-1"}, "retention_ms", -1),
        ({"retention.bytes": "5000"}, "retention_bytes", 5000),
        ({"index.interval.bytes": "100"}, "index_interval_bytes", 100),
        ({"segment.index.bytes": "800"}, "segment_index_bytes", 800),
        ({"flush.messages": "10"}, "flush_messages", 10),
        ({"flush.ms": "10"}, "flush_ms", 10),
        ({"max.message.bytes": "300"}, "message_max_bytes", 300),
        ({"cleanup.policy": "compact"}, "segment_bytes", 2000),  # others keep the broker's
        ({"unknown.topic.key": "1"}, "segment_bytes", 2000),  # not a log setting: ignored
    ],
)
def test_topic_overrides_win(overrides, field, expected) -> None:
    broker = {"log.segment.bytes": "2000", "log.retention.hours": "1"}
    assert getattr(LogConfig.from_properties(broker, overrides), field) == expected


@pytest.mark.parametrize(
    "props, overrides, key, valid",
    [
        ({"log.segment.bytes": "13"}, {}, "log.segment.bytes", "[14, 2147483647]"),
        ({}, {"segment.bytes": "10"}, "segment.bytes", "[14, 2147483647]"),
        ({}, {"segment.bytes": "2147483648"}, "segment.bytes", "[14, 2147483647]"),
        ({"log.retention.ms": "abc"}, {}, "log.retention.ms", "[-1, "),
        ({}, {"retention.ms": "-2"}, "retention.ms", "[-1, "),
        ({}, {"retention.bytes": "1.5"}, "retention.bytes", "[-1, "),
        ({"log.roll.hours": "0"}, {}, "log.roll.hours", "[1, "),
        ({}, {"segment.ms": "0"}, "segment.ms", "[1, "),
        ({}, {"flush.messages": "0"}, "flush.messages", "[1, "),
        ({}, {"flush.ms": "-5"}, "flush.ms", "[0, "),
        ({}, {"segment.index.bytes": "3"}, "segment.index.bytes", "[4, "),
        ({}, {"index.interval.bytes": "-1"}, "index.interval.bytes", "[0, "),
        ({}, {"max.message.bytes": ""}, "max.message.bytes", "[0, "),
        ({"log.retention.hours": str(2**62)}, {}, "log.retention.hours", "[-1, "),
    ],
)
def test_invalid_values_name_key_value_and_range(props, overrides, key, valid) -> None:
    with pytest.raises(ValueError) as info:
        LogConfig.from_properties(props, overrides)
    message = str(info.value)
    raw = {**props, **overrides}[key]
    assert key in message and repr(raw) in message and valid in message


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ValueError, match="segment_bytes"):
        LogConfig(segment_bytes=5)
    with pytest.raises(ValueError, match="flush_ms"):
        LogConfig(flush_ms=-1)
    with pytest.raises(ValueError, match="retention_ms"):
        LogConfig(retention_ms=True)  # a bool is not an int here


# ------------------------------------------------------------------------------ compaction


def test_compaction_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.cleanup_policy == frozenset({"delete"})
    assert (config.delete, config.compact) == (True, False)
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == 2**63 - 1
    assert config.delete_retention_ms == 86_400_000


@pytest.mark.parametrize(
    "raw, policy",
    [
        ("delete", {"delete"}),
        ("compact", {"compact"}),
        ("compact,delete", {"compact", "delete"}),
        ("delete,compact", {"compact", "delete"}),
        (" delete , compact ", {"compact", "delete"}),
        ("compact,compact", {"compact"}),
        ("", set()),  # Kafka 4.1 accepts an empty list: neither retention nor compaction
        ("  ", set()),
    ],
)
def test_cleanup_policy_lists(raw, policy) -> None:
    config = LogConfig().with_overrides({"cleanup.policy": raw})
    assert config.cleanup_policy == frozenset(policy)
    assert (config.compact, config.delete) == ("compact" in policy, "delete" in policy)


@pytest.mark.parametrize(
    "props, field, expected",
    [
        ({"log.cleanup.policy": "compact"}, "cleanup_policy", frozenset({"compact"})),
        ({"log.cleaner.min.cleanable.ratio": "0.1"}, "min_cleanable_dirty_ratio", 0.1),
        ({"log.cleaner.min.compaction.lag.ms": "5"}, "min_compaction_lag_ms", 5),
        ({"log.cleaner.max.compaction.lag.ms": "7"}, "max_compaction_lag_ms", 7),
        ({"log.cleaner.delete.retention.ms": "0"}, "delete_retention_ms", 0),
    ],
)
def test_compaction_broker_properties(props, field, expected) -> None:
    assert getattr(LogConfig.from_properties(props), field) == expected


def test_topic_compaction_overrides_win_over_the_broker() -> None:
    broker = {"log.cleanup.policy": "compact", "log.cleaner.min.cleanable.ratio": "0.9"}
    config = LogConfig.from_properties(broker, {"cleanup.policy": "delete",
                                                "min.cleanable.dirty.ratio": "0.01"})
    assert (config.cleanup_policy, config.min_cleanable_dirty_ratio) == (frozenset({"delete"}), 0.01)


@pytest.mark.parametrize(
    "raw, expected",
    [("0", 0.0), ("1", 1.0), (" 0.25 ", 0.25), (".5", 0.5), ("5e-1", 0.5), ("1d", 1.0), ("0.5f", 0.5)],
)
def test_dirty_ratio_reads_what_java_reads(raw, expected) -> None:
    assert LogConfig().with_overrides({"min.cleanable.dirty.ratio": raw}).min_cleanable_dirty_ratio == expected


@pytest.mark.parametrize(
    "overrides, key, valid",
    [
        ({"cleanup.policy": "foo"}, "cleanup.policy", "compact, delete"),
        ({"cleanup.policy": "Compact"}, "cleanup.policy", "compact, delete"),
        ({"cleanup.policy": "compact,"}, "cleanup.policy", "compact, delete"),
        ({"cleanup.policy": "compact;delete"}, "cleanup.policy", "compact, delete"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio", "[0, 1]"),
        ({"min.cleanable.dirty.ratio": "-0.1"}, "min.cleanable.dirty.ratio", "[0, 1]"),
        ({"min.cleanable.dirty.ratio": "abc"}, "min.cleanable.dirty.ratio", "[0, 1]"),
        ({"min.cleanable.dirty.ratio": "NaN"}, "min.cleanable.dirty.ratio", "[0, 1]"),  # Kafka takes it
        ({"min.cleanable.dirty.ratio": "Infinity"}, "min.cleanable.dirty.ratio", "[0, 1]"),
        ({"min.cleanable.dirty.ratio": "1_0"}, "min.cleanable.dirty.ratio", "[0, 1]"),
        ({"min.cleanable.dirty.ratio": ""}, "min.cleanable.dirty.ratio", "[0, 1]"),
        ({"min.compaction.lag.ms": "-1"}, "min.compaction.lag.ms", "[0, "),
        ({"min.compaction.lag.ms": "1.5"}, "min.compaction.lag.ms", "[0, "),
        ({"max.compaction.lag.ms": "0"}, "max.compaction.lag.ms", "[1, "),
        ({"delete.retention.ms": "-1"}, "delete.retention.ms", "[0, "),
        ({"delete.retention.ms": str(2**63)}, "delete.retention.ms", "[0, "),
    ],
)
def test_invalid_compaction_values_name_key_value_and_range(overrides, key, valid) -> None:
    with pytest.raises(ValueError) as info:
        LogConfig().with_overrides(overrides)
    message = str(info.value)
    assert key in message and repr(overrides[key]) in message and valid in message


def test_min_compaction_lag_above_max_is_a_conflict_as_in_kafka() -> None:
    with pytest.raises(ValueError, match=r"conflict topic config setting min.compaction.lag.ms \(10\) > "
                                         r"max.compaction.lag.ms \(5\)"):
        LogConfig().with_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(ValueError, match="conflict"):  # the broker's max, the topic's min
        LogConfig.from_properties({"log.cleaner.max.compaction.lag.ms": "5"}, {"min.compaction.lag.ms": "6"})
    assert LogConfig().with_overrides({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"})


def test_direct_construction_checks_compaction_fields() -> None:
    with pytest.raises(ValueError, match="cleanup_policy"):
        LogConfig(cleanup_policy=frozenset({"forever"}))
    with pytest.raises(ValueError, match="cleanup_policy"):
        LogConfig(cleanup_policy={"delete"})  # a set would make the frozen config mutable
    with pytest.raises(ValueError, match="min_cleanable_dirty_ratio"):
        LogConfig(min_cleanable_dirty_ratio=1.01)
    with pytest.raises(ValueError, match="min_cleanable_dirty_ratio"):
        LogConfig(min_cleanable_dirty_ratio=float("nan"))


@pytest.mark.parametrize("props, overrides, expected", [
    ({}, {}, "CreateTime"),
    ({"log.message.timestamp.type": "LogAppendTime"}, {}, "LogAppendTime"),
    ({"log.message.timestamp.type": "LogAppendTime"}, {"message.timestamp.type": "CreateTime"}, "CreateTime"),
    ({}, {"message.timestamp.type": "LogAppendTime"}, "LogAppendTime"),
])
def test_message_timestamp_type(props, overrides, expected) -> None:
    config = LogConfig.from_properties(props, overrides)
    assert (config.message_timestamp_type, config.log_append_time) == (expected, expected == "LogAppendTime")


@pytest.mark.parametrize("raw", ["logappendtime", "", "Both"])
def test_message_timestamp_type_is_one_of_kafkas_exactly(raw) -> None:
    with pytest.raises(ValueError, match="String must be one of: CreateTime, LogAppendTime"):
        LogConfig().with_overrides({"message.timestamp.type": raw})
