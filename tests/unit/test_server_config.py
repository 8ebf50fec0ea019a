"""Broker configuration: Kafka names, defaults, validation that names the key, properties files."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log import LogConfig
from broker.server.config import (
    BrokerConfig,
    ConfigError,
    Listener,
    load_properties,
    parse_overrides,
    parse_properties,
)

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def config(**extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties({**BASE, **{k.replace("_", "."): v for k, v in extra.items()}})


def test_defaults():
    c = config()
    assert c.broker_id == 1
    assert c.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == (Path("/tmp/kafka-logs"),)
    assert (c.num_partitions, c.default_replication_factor, c.min_insync_replicas) == (1, 1, 1)
    assert c.auto_create_topics_enable is False and c.delete_topic_enable is True
    assert c.zookeeper_connection_timeout_ms == c.zookeeper_session_timeout_ms == 18_000
    assert (c.socket_request_max_bytes, c.message_max_bytes, c.fetch_max_bytes) == (104_857_600, 1_048_588, 57_671_680)
    assert c.log_retention_check_interval_ms == 300_000
    assert c.log_flush_offset_checkpoint_interval_ms == 60_000
    assert c.log == LogConfig()
    assert c.unknown_keys == ()


def test_cleaner_defaults_and_names_are_kafkas():
    c = config()
    assert (c.log_cleaner_enable, c.log_cleaner_threads, c.log_cleaner_backoff_ms) == (True, 1, 15_000)
    assert c.log_cleaner_dedupe_buffer_size_bytes == 128 << 20
    assert c.log_cleaner_io_buffer_size_bytes == 512 << 10
    assert c.log_cleaner_io_max_bytes_per_second == 1.7976931348623157e308  # Java's Double.MAX_VALUE
    c = config(**{"log.cleaner.enable": "false", "log.cleaner.threads": "4",
                  "log.cleaner.dedupe.buffer.size": str(4 << 20), "log.cleaner.io.buffer.size": "1024",
                  "log.cleaner.io.max.bytes.per.second": "1048576.5", "log.cleaner.backoff.ms": "100",
                  "log.cleanup.policy": "compact"})
    assert (c.log_cleaner_enable, c.log_cleaner_threads, c.log_cleaner_dedupe_buffer_size_bytes) == (False, 4, 4 << 20)
    assert (c.log_cleaner_io_buffer_size_bytes, c.log_cleaner_io_max_bytes_per_second) == (1024, 1048576.5)
    assert (c.log_cleaner_backoff_ms, c.log.compact, c.log.delete) == (100, True, False)
    with pytest.raises(ConfigError, match="per cleaner thread"):  # 1 MiB each, as Kafka requires
        config(**{"log.cleaner.threads": "5", "log.cleaner.dedupe.buffer.size": str(4 << 20)})


def test_values_are_read_with_kafka_names():
    c = config(**{
        "listeners": "PLAINTEXT://0.0.0.0:9093", "advertised.listeners": "PLAINTEXT://kafka1:19093",
        "log.dirs": "/a, /b", "num.partitions": "6", "default.replication.factor": "3",
        "auto.create.topics.enable": "TRUE", "zookeeper.session.timeout.ms": "6000",
        "log.retention.hours": "1", "log.segment.bytes": "1048576", "message.max.bytes": "2000000",
    })
    assert c.listeners == (Listener("PLAINTEXT", "0.0.0.0", 9093),)
    assert c.advertised_listeners == (Listener("PLAINTEXT", "kafka1", 19093),)
    assert c.log_dirs == (Path("/a"), Path("/b"))
    assert (c.num_partitions, c.default_replication_factor, c.auto_create_topics_enable) == (6, 3, True)
    assert c.zookeeper_connection_timeout_ms == 6000  # follows the session timeout by default
    assert (c.log.retention_ms, c.log.segment_bytes, c.log.message_max_bytes) == (3_600_000, 1 << 20, 2_000_000)
    assert c.message_max_bytes == 2_000_000
    assert c.properties["log.dirs"] == "/a, /b"


def test_wildcard_listener_advertises_a_host_name():
    c = config(listeners="PLAINTEXT://:9092")
    assert c.listeners[0].host == "" and c.advertised_listeners[0].host not in ("", "0.0.0.0")


def test_ipv6_listener():
    c = config(listeners="PLAINTEXT://[::1]:9092")
    assert c.listeners[0].host == "::1" and str(c.listeners[0]) == "PLAINTEXT://[::1]:9092"


def test_log_dir_fallback_and_unknown_keys():
    c = BrokerConfig.from_properties({**BASE, "log.dir": "/x", "no.such.key": "1", "log.whatever": "2",
                                      "log.retention.hour": "1", "log.retention.hours": "1"})
    assert c.log_dirs == (Path("/x"),)
    # a log.* typo is reported like any other unknown key; a log key LogConfig reads is not
    assert c.unknown_keys == ("log.retention.hour", "log.whatever", "no.such.key")


def test_log_dir_is_known_when_log_dirs_wins():
    c = BrokerConfig.from_properties({**BASE, "log.dirs": "/a", "log.dir": "/x"})
    assert c.log_dirs == (Path("/a"),) and c.unknown_keys == ()


@pytest.mark.parametrize("key, value", [
    ("broker.id", None),
    ("broker.id", "-1"),
    ("broker.id", "one"),
    ("zookeeper.connect", None),
    ("zookeeper.connect", "localhost"),
    ("zookeeper.connect", "localhost:2181/"),
    ("zookeeper.connect", "localhost:99999"),
    ("listeners", "PLAINTEXT://localhost"),
    ("listeners", "SSL://localhost:9093"),
    ("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2"),
    ("listeners", "PLAINTEXT://a:70000"),
    ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
    ("advertised.listeners", "PLAINTEXT://host:0"),
    ("num.partitions", "0"),
    ("default.replication.factor", "40000"),
    ("auto.create.topics.enable", "yes"),
    ("socket.request.max.bytes", "-5"),
    ("message.max.bytes", "3000000000"),
    ("log.retention.check.interval.ms", "0"),
    ("log.segment.bytes", "ten"),
    ("log.retention.ms", "-7"),
    ("log.cleanup.policy", "forever"),
    ("log.cleaner.min.cleanable.ratio", "1.01"),
    ("log.cleaner.min.compaction.lag.ms", "-1"),
    ("log.cleaner.enable", "on"),
    ("log.cleaner.threads", "0"),
    ("log.cleaner.dedupe.buffer.size", "1048575"),  # under 1 MiB for its one thread
    ("log.cleaner.io.buffer.size", "-1"),
    ("log.cleaner.io.max.bytes.per.second", "-5"),
    ("log.cleaner.io.max.bytes.per.second", "NaN"),
    ("log.cleaner.backoff.ms", "-1"),
])
def test_invalid_values_name_their_key(key, value):
    props = dict(BASE)
    if value is None:
        props.pop(key)
    else:
        props[key] = value
    with pytest.raises(ConfigError) as error:
        BrokerConfig.from_properties(props)
    assert key in str(error.value)


def test_properties_format():
    text = (
        "# comment\n! also a comment\n\n"
        "broker.id = 3\n"
        "zookeeper.connect: zk:2181/kafka\n"
        "log.dirs /data/a,\\\n"
        "    /data/b\n"
        "path=C:\\\\dir\\\\\n"
        "empty=\n"
    )
    assert parse_properties(text) == {
        "broker.id": "3", "zookeeper.connect": "zk:2181/kafka", "log.dirs": "/data/a,/data/b",
        "path": "C:\\\\dir\\\\", "empty": "",
    }


def test_load_properties_with_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\nnum.partitions=2\n")
    props = load_properties(path, parse_overrides(["num.partitions=8", "log.dirs=/tmp/x"]))
    c = BrokerConfig.from_properties(props)
    assert (c.num_partitions, c.log_dirs) == (8, (Path("/tmp/x"),))


def test_bad_override_names_itself():
    with pytest.raises(ConfigError, match="num.partitions"):
        parse_overrides(["num.partitions"])


def test_log_config_signature_matches_its_use():
    """config.py hands the whole properties map to LogConfig.from_properties; keys it does not
    know are ignored and broker keys map to LogConfig fields."""
    assert LogConfig.from_properties({**BASE, "log.roll.hours": "2"}).segment_ms == 7_200_000


@pytest.mark.parametrize("n", [0, 1, 2])
def test_shipped_configs_use_only_known_keys_and_document_the_code_defaults(n):
    """conf/server-N.properties is what users copy: every key must be one the broker reads (an
    unknown key is only a warning at start, so a typo would silently do nothing), and the values
    it spells out for replication must be the defaults the code applies without it."""
    path = Path(__file__).resolve().parents[2] / "conf" / f"server-{n}.properties"
    props = load_properties(path)
    shipped = BrokerConfig.from_properties(props)
    assert shipped.unknown_keys == ()
    assert shipped.broker_id == n
    defaults = BrokerConfig.from_properties(BASE)
    for field in ("replica_lag_time_max_ms", "replica_fetch_wait_max_ms", "replica_fetch_min_bytes",
                  "replica_fetch_max_bytes", "replica_fetch_response_max_bytes",
                  "replica_fetch_backoff_ms", "replica_socket_timeout_ms",
                  "replica_high_watermark_checkpoint_interval_ms", "controller_socket_timeout_ms",
                  "unclean_leader_election_enable", "auto_leader_rebalance_enable",
                  "leader_imbalance_check_interval_seconds", "leader_imbalance_per_broker_percentage",
                  "controlled_shutdown_enable", "controlled_shutdown_max_retries",
                  "controlled_shutdown_retry_backoff_ms", "log_cleaner_enable", "log_cleaner_threads",
                  "log_cleaner_backoff_ms"):
        key = field.replace("_", ".")
        assert key in props, f"{path.name} does not document {key}"
        assert getattr(shipped, field) == getattr(defaults, field), key
    for key in ("log.cleanup.policy", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
                "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms",
                "log.cleaner.max.compaction.lag.ms", "log.cleaner.delete.retention.ms"):
        assert key in props, f"{path.name} does not document {key}"
    assert shipped.log == defaults.log
    assert (shipped.log_cleaner_dedupe_buffer_size_bytes, shipped.log_cleaner_io_buffer_size_bytes) == (
        defaults.log_cleaner_dedupe_buffer_size_bytes, defaults.log_cleaner_io_buffer_size_bytes)
