"""The group coordinator's broker configs: Kafka's names and defaults, their bounds, and what
reaches the pure core (``BrokerConfig.group_settings``) and DescribeConfigs."""

from __future__ import annotations

import pytest

from broker.coordinator.group.core import GroupSettings
from broker.server.config import BrokerConfig, ConfigError
from broker.server.config_entries import describe_broker_configs

BASE = {"broker.id": "0", "zookeeper.connect": "zk:2181"}


def test_defaults_are_kafkas():
    config = BrokerConfig.from_properties(BASE)
    assert config.group_settings == GroupSettings()  # the core's defaults are Kafka's
    assert (config.offsets_commit_timeout_ms, config.offsets_load_buffer_size_bytes) == (5_000, 5 * 1024 * 1024)


def test_settings_are_read_known_and_reach_the_core():
    props = {**BASE, "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000",
             "group.max.session.timeout.ms": "60000", "group.max.size": "7", "offset.metadata.max.bytes": "10",
             "offsets.retention.minutes": "2", "offsets.retention.check.interval.ms": "500",
             "offsets.commit.timeout.ms": "700", "offsets.load.buffer.size": "4096",
             "offsets.topic.num.partitions": "12"}
    config = BrokerConfig.from_properties(props)
    assert config.unknown_keys == ()
    assert config.group_settings == GroupSettings(
        num_partitions=12, initial_rebalance_delay_ms=0, min_session_timeout_ms=1000, max_session_timeout_ms=60_000,
        max_size=7, offset_metadata_max_bytes=10, offsets_retention_ms=120_000,
        offsets_retention_check_interval_ms=500)
    assert (config.offsets_commit_timeout_ms, config.offsets_load_buffer_size_bytes) == (700, 4096)
    described = {e.name: e.value for e in describe_broker_configs(config)}
    assert described["group.initial.rebalance.delay.ms"] == "0" and described["offsets.commit.timeout.ms"] == "700"


@pytest.mark.parametrize("key,value", [
    ("group.initial.rebalance.delay.ms", "-1"), ("group.min.session.timeout.ms", "x"),
    ("group.max.size", "0"), ("offset.metadata.max.bytes", "-5"), ("offsets.retention.minutes", "0"),
    ("offsets.retention.check.interval.ms", "0"), ("offsets.commit.timeout.ms", "0"),
    ("offsets.load.buffer.size", "0"),
])
def test_values_outside_the_bounds_stop_the_broker(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties({**BASE, key: value})


def test_a_maximum_session_timeout_below_the_minimum_is_refused():
    with pytest.raises(ConfigError, match="group.max.session.timeout.ms"):
        BrokerConfig.from_properties({**BASE, "group.min.session.timeout.ms": "10000",
                                      "group.max.session.timeout.ms": "9999"})
