"""KIP-226 synonyms in Apache Kafka's order and trimming (ConfigHelper.configSynonyms), as
kafka-configs --describe prints them."""

from __future__ import annotations

import pytest

from broker.server.config import BrokerConfig
from broker.server.config_entries import describe_broker_configs, describe_topic_configs
from broker.server.config_synonyms import broker_synonyms, kafka_broker_value, source_of, topic_synonyms

STATIC, DEFAULT, TOPIC = 4, 5, 1


def broker(**settings: str) -> BrokerConfig:
    return BrokerConfig.from_properties({"broker.id": "1", "zookeeper.connect": "zk:2181",
                                         **{k.replace("_", "."): v for k, v in settings.items()}})


@pytest.mark.parametrize("settings, key, chain", [
    ({}, "message.max.bytes", [("message.max.bytes", "1048588", DEFAULT)]),
    ({"message_max_bytes": "2000"}, "message.max.bytes",
     [("message.max.bytes", "2000", STATIC), ("message.max.bytes", "1048588", DEFAULT)]),
    ({}, "log.retention.ms", []),                                  # Kafka's default is null
    ({"log_retention_hours": "2"}, "log.retention.ms", []),        # .hours entries are dropped
    ({"log_retention_ms": "5000"}, "log.retention.ms",
     [("log.retention.ms", "5000", STATIC), ("log.retention.hours", "168", DEFAULT)]),
    ({}, "log.flush.interval.ms", []),
    ({}, "broker.id", [("broker.id", "1", STATIC)]),               # required: no default shown
    ({}, "advertised.listeners", []),                              # defaults to listeners: null
])
def test_broker_synonyms(settings, key, chain):
    assert broker_synonyms(key, broker(**settings)) == chain


def test_topic_synonyms_and_sources():
    config = broker(message_max_bytes="2000")
    entries = {e.name: e for e in describe_topic_configs({"retention.ms": "60000", "max.message.bytes": "99"}, config)}
    retention = topic_synonyms(entries["retention.ms"], config)
    assert retention == [("retention.ms", "60000", TOPIC)] and source_of(retention) == TOPIC
    size = topic_synonyms(entries["max.message.bytes"], config)
    assert size == [("max.message.bytes", "99", TOPIC), ("message.max.bytes", "2000", STATIC),
                    ("message.max.bytes", "1048588", DEFAULT)]
    segment_ms = topic_synonyms(entries["segment.ms"], config)
    assert segment_ms == [] and source_of(segment_ms) == DEFAULT


def test_broker_value_of_a_null_default_key_is_null_until_set():
    for settings, expected in (({}, None), ({"log_retention_ms": "5000"}, "5000")):
        config = broker(**settings)
        entry = next(e for e in describe_broker_configs(config) if e.name == "log.retention.ms")
        assert kafka_broker_value(entry, config) == expected
