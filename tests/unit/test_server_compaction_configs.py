"""Compaction's topic and broker configs through CreateTopics and DescribeConfigs: Kafka's
INVALID_CONFIG (40) with the key and what is valid, and the values Kafka describes (compared with
Apache Kafka 4.1 in tests/peer/test_peer_compaction_configs.py)."""

from __future__ import annotations

import pytest
from test_server_harness import Harness, run

from broker.server.config_entries import describe_broker_configs, describe_topic_configs, list_value
from broker.wire import ErrorCode

CREATE, DESCRIBE = 19, 32


def create(h: Harness, name: str, configs: dict[str, str]):
    request = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
               "timeout_ms": 5000, "validate_only": False}
    [result] = run(h.call(CREATE, 7, request)).topics
    return result


@pytest.mark.parametrize("configs, named", [
    ({"cleanup.policy": "foo"}, "compact, delete"),
    ({"cleanup.policy": "compact,"}, "compact, delete"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "[0, 1]"),
    ({"min.cleanable.dirty.ratio": "-0.1"}, "[0, 1]"),
    ({"min.compaction.lag.ms": "-1"}, "[0, "),
    ({"max.compaction.lag.ms": "0"}, "[1, "),
    ({"delete.retention.ms": "-1"}, "[0, "),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "conflict"),
])
def test_bad_compaction_configs_are_invalid_config_naming_the_key(tmp_path, configs, named):
    h = Harness(tmp_path)
    try:
        result = create(h, "bad", configs)
        assert result.error_code == ErrorCode.INVALID_CONFIG
        assert list(configs)[-1] in result.error_message and named in result.error_message
        assert "bad" not in h.snapshot.topics and h.controller.created == []
    finally:
        h.close()


def test_the_lag_conflict_is_checked_over_the_brokers_settings(tmp_path):
    h = Harness(tmp_path, log_cleaner_max_compaction_lag_ms="1000")
    try:
        result = create(h, "late", {"min.compaction.lag.ms": "2000"})
        assert result.error_code == ErrorCode.INVALID_CONFIG and "conflict" in result.error_message
        assert create(h, "fine", {"min.compaction.lag.ms": "1000"}).error_code == ErrorCode.NONE
    finally:
        h.close()


def test_a_compacted_topic_is_created_and_its_log_knows_it(tmp_path):
    h = Harness(tmp_path)
    try:
        result = create(h, "table", {"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": "0.01",
                                     "delete.retention.ms": "100"})
        assert result.error_code == ErrorCode.NONE
        shown = {c.name: c.value for c in result.configs}
        assert shown["cleanup.policy"] == "delete,compact"  # as Kafka shows a list
        config = h.replicas.get("table", 0).log.config
        assert (config.compact, config.delete) == (True, True)
        assert (config.min_cleanable_dirty_ratio, config.delete_retention_ms) == (0.01, 100)
    finally:
        h.close()


def test_describe_configs_shows_compaction_settings_with_sources_types_and_synonyms(tmp_path):
    h = Harness(tmp_path, log_cleaner_delete_retention_ms="5000")
    h.add_topic("t", {0: [1]}, config={"cleanup.policy": "compact", "max.compaction.lag.ms": "1000"})
    try:
        request = {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
                   "include_synonyms": True}
        [result] = run(h.call(DESCRIBE, 4, request)).results
        seen = {c.name: (c.value, c.config_source, c.config_type, [(s.name, s.value, s.source) for s in c.synonyms])
                for c in result.configs}
        # What Apache Kafka 4.1 answers for a topic created with cleanup.policy=compact
        # (sources: 1 topic, 4 static broker, 5 default; types: 5 LONG, 6 DOUBLE, 7 LIST).
        assert seen["cleanup.policy"] == ("compact", 1, 7, [("cleanup.policy", "compact", 1),
                                                           ("log.cleanup.policy", "delete", 5)])
        assert seen["min.cleanable.dirty.ratio"] == ("0.5", 5, 6, [("log.cleaner.min.cleanable.ratio", "0.5", 5)])
        assert seen["min.compaction.lag.ms"] == ("0", 5, 5, [("log.cleaner.min.compaction.lag.ms", "0", 5)])
        assert seen["max.compaction.lag.ms"] == ("1000", 1, 5, [
            ("max.compaction.lag.ms", "1000", 1),
            ("log.cleaner.max.compaction.lag.ms", "9223372036854775807", 5)])
        # A static broker setting is followed by the default it overrides, as Kafka lists them
        # (seen in the peer tier: max.message.bytes under a static message.max.bytes).
        assert seen["delete.retention.ms"] == ("5000", 4, 5, [("log.cleaner.delete.retention.ms", "5000", 4),
                                                              ("log.cleaner.delete.retention.ms", "86400000", 5)])
    finally:
        h.close()


def test_the_brokers_policy_is_the_topic_default(tmp_path):
    h = Harness(tmp_path, log_cleanup_policy="compact, delete")
    try:
        entries = {e.name: e for e in describe_topic_configs({}, h.config)}
        assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == ("compact,delete", 4)
        assert h.config.log.compact and h.config.log.delete
    finally:
        h.close()


def test_broker_description_lists_the_cleaner_settings(tmp_path):
    h = Harness(tmp_path, log_cleaner_threads="2", log_cleaner_dedupe_buffer_size="4194304")
    try:
        seen = {e.name: (e.value, e.source) for e in describe_broker_configs(h.config)}
        assert seen["log.cleaner.threads"] == ("2", 4)
        assert seen["log.cleaner.dedupe.buffer.size"] == ("4194304", 4)
        assert seen["log.cleaner.enable"] == ("true", 5)
        assert seen["log.cleaner.backoff.ms"] == ("15000", 5)
        assert seen["log.cleaner.io.buffer.size"] == ("524288", 5)
        assert seen["log.cleaner.io.max.bytes.per.second"] == ("1.7976931348623157E308", 5)  # Kafka's
        assert seen["log.cleanup.policy"] == ("delete", 5)
        assert seen["log.cleaner.min.cleanable.ratio"] == ("0.5", 5)
    finally:
        h.close()


@pytest.mark.parametrize("raw, shown", [("compact", "compact"), ("delete, compact", "delete,compact"),
                                        (" compact ,delete ", "compact,delete"), ("", ""), ("  ", "")])
def test_list_values_are_shown_as_kafka_shows_them(raw, shown):
    assert list_value(raw) == shown
