"""The pure part of dynamic configs: IncrementalAlterConfigs' operations, what a broker may
change without a restart, the three levels of broker configuration and their synonyms."""

import pytest

from broker.log import LogConfig
from broker.server.config_entries import describe_broker_configs, describe_topic_configs
from broker.server.config_synonyms import (
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    broker_synonyms,
    topic_synonyms,
)
from broker.server.dynamic_config import (
    DEFAULT_BROKER,
    DYNAMIC_BROKER_KEYS,
    ConfigChangeError,
    DynamicBrokerConfigs,
    apply_incremental,
    check_broker_change,
    check_topic_change,
)
from broker.wire import ErrorCode

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
STATIC = {"broker.id": "1", "zookeeper.connect": "localhost:2181", "log.retention.ms": "1000"}


def test_incremental_operations_over_stored_overrides():
    current = {"retention.ms": "5", "cleanup.policy": "delete"}
    new = apply_incremental(current, [("retention.ms", DELETE, None), ("segment.bytes", SET, "2048"),
                                      ("cleanup.policy", APPEND, "compact,delete")])
    assert new == {"segment.bytes": "2048", "cleanup.policy": "delete,compact"}
    assert apply_incremental(new, [("cleanup.policy", SUBTRACT, "delete")])["cleanup.policy"] == "compact"
    assert current == {"retention.ms": "5", "cleanup.policy": "delete"}  # not changed in place


@pytest.mark.parametrize("ops, code", [
    ([("retention.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG),
    ([("retention.ms", SET, "1"), ("retention.ms", DELETE, None)], ErrorCode.INVALID_REQUEST),
    ([("retention.ms", 9, "1")], ErrorCode.INVALID_REQUEST),
])
def test_incremental_refusals(ops, code):
    with pytest.raises(ConfigChangeError) as err:
        apply_incremental({}, ops)
    assert err.value.error_code == code


@pytest.mark.parametrize("configs, words", [
    ({"foo": "1"}, "Unknown topic config name: foo"),
    ({"retention.ms": "abc"}, "retention.ms"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict"),
])
def test_topic_change_checked_as_create_topics_checks(configs, words):
    with pytest.raises(ConfigChangeError) as err:
        check_topic_change("t", configs, LogConfig())
    assert err.value.error_code == ErrorCode.INVALID_CONFIG and words in err.value.message
    check_topic_change("t", {"retention.ms": "10", "cleanup.policy": "compact"}, LogConfig())


def test_broker_change_only_for_dynamic_keys_with_valid_values():
    levels = DynamicBrokerConfigs(STATIC)
    check_broker_change(levels, "1", {"log.retention.ms": "5", "leader.replication.throttled.rate": "10485760"})
    check_broker_change(levels, "1", {"some.plugin.key": "x"})  # unknown keys are kept, as Kafka
    for bad in ({"num.partitions": "3"}, {"leader.replication.throttled.rate": "-1"},
                {"log.segment.bytes": "x"}, {"min.insync.replicas": "0"}):
        with pytest.raises(ConfigChangeError) as err:
            check_broker_change(levels, DEFAULT_BROKER, bad)
        assert err.value.error_code == ErrorCode.INVALID_REQUEST, bad
    with pytest.raises(ConfigChangeError, match=r"Set\(num.partitions\)"):
        check_broker_change(levels, "1", {"num.partitions": "3"})


def test_every_key_read_only_at_start_is_refused_and_described():
    """A key the broker reads but does not apply while running (offsets.topic.*, quota.window.*,
    super.users, ...) is refused at either level, as Kafka refuses a non-dynamic key, instead of
    being stored and never applied; DescribeConfigs lists each of them."""
    levels = DynamicBrokerConfigs(STATIC)
    config = levels.broker_config()
    fixed = sorted(config.known_keys - DYNAMIC_BROKER_KEYS)
    for key in ("offsets.topic.num.partitions", "transaction.state.log.min.isr", "quota.window.num",
                "metrics.port", "super.users", "log.cleaner.threads"):
        assert key in fixed
    for key in fixed:
        for entity in ("1", DEFAULT_BROKER):
            with pytest.raises(ConfigChangeError) as err:
                check_broker_change(levels, entity, {key: "1"})
            assert err.value.error_code == ErrorCode.INVALID_REQUEST, key
            assert err.value.message == f"Cannot update these configs dynamically: Set({key})"
    described = {e.name for e in describe_broker_configs(config)}
    # log.dirs is log.dir's described synonym; pylog derives the listener/SASL defaults unlike Kafka
    assert set(fixed) - described == {"log.dir", "listener.security.protocol.map", "inter.broker.listener.name",
                                      "security.inter.broker.protocol", "sasl.enabled.mechanisms",
                                      "sasl.mechanism.inter.broker.protocol"}
    check_broker_change(levels, DEFAULT_BROKER, {"log.segment.delete.delay.ms": "1000"})  # dynamic in Kafka too


def test_levels_per_broker_over_default_over_static_with_synonyms():
    levels = DynamicBrokerConfigs(STATIC, {"log.retention.ms": "2000", "min.insync.replicas": "2"},
                                  {"log.retention.ms": "3000"})
    config = levels.broker_config()
    assert config.log.retention_ms == 3000 and config.min_insync_replicas == 2
    chain = broker_synonyms("log.retention.ms", config, levels=levels)
    assert [(s[1], s[2]) for s in chain[:3]] == [
        ("3000", SOURCE_DYNAMIC_BROKER), ("2000", SOURCE_DYNAMIC_DEFAULT_BROKER), ("1000", 4)]
    assert broker_synonyms("log.retention.ms", config, levels=levels, per_broker=False)[0][1] == "2000"
    entry = next(e for e in describe_topic_configs({}, config) if e.name == "retention.ms")
    assert entry.value == "3000" and topic_synonyms(entry, config, levels=levels)[0][2] == SOURCE_DYNAMIC_BROKER
