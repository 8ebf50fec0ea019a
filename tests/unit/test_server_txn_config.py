"""The transaction coordinator's broker configs: Kafka's names and defaults, their bounds, and
what reaches the pure core (``BrokerConfig.txn_settings``) and DescribeConfigs."""

from __future__ import annotations

import pytest

from broker.coordinator.txn.core import TxnSettings
from broker.server.config import BrokerConfig, ConfigError
from broker.server.config_entries import describe_broker_configs

BASE = {"broker.id": "0", "zookeeper.connect": "zk:2181"}


def test_defaults_are_kafkas():
    config = BrokerConfig.from_properties(BASE)
    assert config.txn_settings == TxnSettings()  # the core's defaults are Kafka's
    assert config.txn_settings == TxnSettings(num_partitions=50, max_timeout_ms=900_000,
                                              abort_timed_out_check_interval_ms=10_000,
                                              id_expiration_ms=604_800_000,
                                              remove_expired_check_interval_ms=3_600_000)
    assert config.internal_topics.transaction_state_log_min_isr == 2
    assert config.transaction_state_log_load_buffer_size_bytes == 5 * 1024 * 1024
    assert config.transaction_partition_verification_enable is True


def test_settings_are_read_known_and_reach_the_core_and_describe_configs():
    props = {**BASE, "transaction.max.timeout.ms": "60000",
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
             "transactional.id.expiration.ms": "3600000",
             "transaction.remove.expired.transaction.cleanup.interval.ms": "1000",
             "transaction.state.log.num.partitions": "4", "transaction.state.log.load.buffer.size": "4096",
             "transaction.partition.verification.enable": "false", "offsets.topic.num.partitions": "6"}
    config = BrokerConfig.from_properties(props)
    assert config.unknown_keys == ()
    assert config.txn_settings == TxnSettings(num_partitions=4, max_timeout_ms=60_000,
                                              abort_timed_out_check_interval_ms=500, id_expiration_ms=3_600_000,
                                              remove_expired_check_interval_ms=1000, offsets_num_partitions=6)
    assert config.transaction_partition_verification_enable is False
    described = {e.name: e.value for e in describe_broker_configs(config)}
    assert described["transaction.max.timeout.ms"] == "60000"
    assert described["transaction.partition.verification.enable"] == "false"


@pytest.mark.parametrize("key,value", [
    ("transaction.max.timeout.ms", "0"), ("transactional.id.expiration.ms", "-1"),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "x"),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", "0"),
    ("transaction.partition.verification.enable", "maybe")])
def test_bad_values_are_refused_naming_the_key(key, value):
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_properties({**BASE, key: value})
