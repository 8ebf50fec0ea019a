"""Dynamic configs, differential (issue 18): Kafka's own ``kafka-configs`` alters and describes
topic and broker configs on Apache Kafka and on pylog with the same output, and refuses the
same bad input with the same exception; ``pylog configs`` prints what ``kafka-configs`` prints,
against either system.

The peers are the session's shared ones: broker-level changes are undone at the end of the test
that makes them (other modules describe the brokers).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import time

import pytest
from confluent_kafka import Producer

from broker.client import AdminClient
from broker.tools.configs import add_configs_parser, run_configs
from peer_support import unique_topic
from test_peer_kafka_tools import on_both, tool


DEADLINE_S = 30.0
_CAUSE = re.compile(r"(?P<exception>org\.apache\.kafka\.common\.errors\.\w+): ?(?P<message>.*)$", re.M)


def _kafka_configs(peer, *args: str):
    return tool("kafka-configs", ["--bootstrap-server", peer.bootstrap, *args])


def _pylog_configs(peer, entity: list[str], describe_all: bool = False) -> str:
    """``pylog configs --describe`` in this process (its output), parsed by its own parser."""
    parser = argparse.ArgumentParser()
    add_configs_parser(parser.add_subparsers(dest="command"))
    if "--entity-default" in entity and "--entity-type" not in entity:
        entity = ["--entity-type", "brokers", *entity]
    args = parser.parse_args(["configs", "--bootstrap-server", peer.bootstrap, "--describe", *entity,
                              *(["--all"] if describe_all else [])])
    out, err = io.StringIO(), io.StringIO()
    assert run_configs(args, out, err) == 0, err.getvalue()
    return out.getvalue()


def _describe_until(peer, entity: list[str], wanted: str) -> str:
    """kafka-configs --describe once the change has reached the broker (pylog applies a change
    from its ZooKeeper notification, Kafka from its metadata log: neither at once)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        out = _pylog_configs(peer, entity)
        if wanted in out or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def _cause(run) -> tuple[int, str, str]:
    matches = list(_CAUSE.finditer(run.err + run.out))
    assert matches, run.err[-2000:]
    return run.returncode, matches[-1]["exception"], matches[-1]["message"].strip()


def test_kafka_configs_alters_a_topic_alike(peers):
    topic = unique_topic("configs-alter")
    entity = ["--entity-type", "topics", "--entity-name", topic]
    for peer in peers:
        peer.create_topic(topic)
    altered = on_both(peers, lambda p: _kafka_configs(
        p, *entity, "--alter", "--add-config", "retention.ms=1000,cleanup.policy=[delete,compact]").ok().out)
    assert altered["pylog"] == altered["kafka"] == f"Completed updating config for topic {topic}.\n"
    for peer in peers:
        _describe_until(peer, entity, "retention.ms=1000")
    described = on_both(peers, lambda p: (_kafka_configs(p, *entity, "--describe").ok().out,
                                          _pylog_configs(p, entity)))
    texts = {described["kafka"][0], described["pylog"][0], described["kafka"][1], described["pylog"][1]}
    assert len(texts) == 1, described
    text = texts.pop()
    assert text.startswith(f"Dynamic configs for topic {topic} are:\n  cleanup.policy=delete,compact ")
    assert "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}\n" in text
    on_both(peers, lambda p: _kafka_configs(p, *entity, "--alter", "--delete-config", "retention.ms").ok())
    deadline = time.monotonic() + DEADLINE_S
    while any("retention.ms" in _pylog_configs(p, entity) for p in peers) and time.monotonic() < deadline:
        time.sleep(0.1)
    final = on_both(peers, lambda p: _pylog_configs(p, entity))
    assert final["pylog"] == final["kafka"]
    assert "retention.ms" not in final["pylog"] and "cleanup.policy=delete,compact" in final["pylog"]


@pytest.mark.parametrize("args", [
    ["--entity-type", "topics", "--entity-name", "{topic}", "--alter", "--add-config", "no.such.config=1"],
    ["--entity-type", "topics", "--entity-name", "no-such-topic-x", "--alter", "--add-config", "retention.ms=1"],
    ["--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "num.partitions=3"],
    ["--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
     "leader.replication.throttled.rate=-5"],
    ["--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "offsets.topic.num.partitions=3"],
], ids=["unknown-key", "unknown-topic", "static-broker-key", "negative-throttle", "start-only-key-at-default"])
def test_kafka_configs_refuses_bad_input_alike(peers, args):
    topic = unique_topic("configs-bad")
    for peer in peers:
        peer.create_topic(topic)
    args = [a.replace("{topic}", topic) for a in args]
    refused = on_both(peers, lambda p: _cause(_kafka_configs(p, *args)))
    assert refused["pylog"] == refused["kafka"]
    assert refused["pylog"][0] != 0


def test_kafka_configs_broker_and_default_levels_alike(peers):
    broker = ["--entity-type", "brokers", "--entity-name", "1"]
    default = ["--entity-type", "brokers", "--entity-default"]
    try:
        altered = on_both(peers, lambda p: (
            _kafka_configs(p, *broker, "--alter", "--add-config", "leader.replication.throttled.rate=1000").ok().out,
            _kafka_configs(p, *default, "--alter", "--add-config",
                           "follower.replication.throttled.rate=2000").ok().out))
        assert altered["pylog"] == altered["kafka"] == (
            "Completed updating config for broker 1.\n",
            "Completed updating default config for brokers in the cluster.\n")
        for peer in peers:
            _describe_until(peer, broker, "leader.replication.throttled.rate=1000")
            _describe_until(peer, ["--entity-default"], "follower.replication.throttled.rate=2000")
        described = on_both(peers, lambda p: (_kafka_configs(p, *broker, "--describe").ok().out,
                                              _kafka_configs(p, *default, "--describe").ok().out,
                                              _pylog_configs(p, broker)))
        kafka, pylog = described["kafka"], described["pylog"]
        assert pylog[0] == kafka[0] == pylog[2] == (
            "Dynamic configs for broker 1 are:\n"
            "  leader.replication.throttled.rate=1000 sensitive=false "
            "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000}\n")
        # Named: Kafka 4 (KRaft, KIP-966) also holds min.insync.replicas as a dynamic default.
        kafka_default = "".join(line for line in kafka[1].splitlines(keepends=True)
                                if not line.startswith("  min.insync.replicas="))
        assert pylog[1] == kafka_default == (
            "Default configs for brokers in the cluster are:\n"
            "  follower.replication.throttled.rate=2000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=2000}\n")
    finally:
        on_both(peers, lambda p: (
            _kafka_configs(p, *broker, "--alter", "--delete-config", "leader.replication.throttled.rate"),
            _kafka_configs(p, *default, "--alter", "--delete-config", "follower.replication.throttled.rate")))


# ------------------------------------------------------------------ kafka-topics --alter

_TOPIC_ERROR = re.compile(r"^Error while executing topic command : (?P<message>.*)$", re.M)


def test_kafka_topics_alter_partitions_alike(peers):
    topic = unique_topic("alter-partitions")
    for peer in peers:
        peer.create_topic(topic, partitions=2)

    def alter(peer, *extra: str):
        run = tool("kafka-topics", ["--bootstrap-server", peer.bootstrap, "--alter", "--topic", topic, *extra])
        error = _TOPIC_ERROR.search(run.out + run.err)
        return run.returncode, error["message"] if error else None

    grown = on_both(peers, lambda p: (alter(p, "--partitions", "4"), alter(p, "--partitions", "4"),
                                      alter(p, "--partitions", "5", "--replica-assignment", "1,1,1,1,7")))
    assert grown["pylog"] == grown["kafka"] == (
        (0, None),
        (1, "Topic already has 4 partition(s)."),
        (1, "The manual partition assignment includes broker 7, but no such broker is registered."),
    )
    for peer in peers:
        with AdminClient(peer.bootstrap) as admin:
            assert len(admin.describe_topics([topic])[0].partitions) == 4, peer


# ------------------------------------------------------------------ kafka-delete-records

def test_kafka_delete_records_alike(peers, tmp_path):
    topic = unique_topic("delete-records")
    for peer in peers:
        peer.create_topic(topic)
        producer = Producer({"bootstrap.servers": peer.bootstrap, "acks": "all"})
        for n in range(10):
            producer.produce(topic, str(n).encode(), partition=0)
        assert producer.flush(DEADLINE_S) == 0

    def delete(peer, offset: int) -> tuple[int, list[str]]:
        path = tmp_path / f"{peer.name}-{offset}.json"
        path.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 0, "offset": offset}],
                                    "version": 1}))
        run = tool("kafka-delete-records", ["--bootstrap-server", peer.bootstrap, "--offset-json-file", str(path)])
        return run.returncode, [line.strip() for line in run.out.splitlines()]

    deleted = on_both(peers, lambda p: (delete(p, 5), delete(p, 100)))
    assert deleted["pylog"] == deleted["kafka"]
    assert deleted["pylog"][0] == (0, ["Executing records delete operation", "Records delete operation completed:",
                                       f"partition: {topic}-0\tlow_watermark: 5"])
    assert "OffsetOutOfRangeException" in " ".join(deleted["pylog"][1][1])


# ------------------------------------------------------------------ kafka-leader-election

def test_kafka_leader_election_alike(peers):
    topic = unique_topic("leader-election")
    for peer in peers:
        peer.create_topic(topic)

    def elect(peer, kind: str, partition: int) -> tuple[int, str]:
        run = tool("kafka-leader-election", ["--bootstrap-server", peer.bootstrap, "--election-type", kind,
                                             "--topic", topic, "--partition", str(partition)])
        return run.returncode, run.out.strip()

    elected = on_both(peers, lambda p: (elect(p, "PREFERRED", 0), elect(p, "UNCLEAN", 0)))
    assert elected["pylog"] == elected["kafka"] == (
        (0, f"Valid replica already elected for partitions {topic}-0"),
        (0, f"Valid replica already elected for partitions {topic}-0"))


# --------------------------------------------------------------- kafka-reassign-partitions

def test_kafka_reassign_partitions_alike(peers, tmp_path):
    topic = unique_topic("reassign")
    for peer in peers:
        peer.create_topic(topic)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [1]}]}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [7]}]}))

    def run(peer, *args: str) -> tuple[int, list[str]]:
        done = tool("kafka-reassign-partitions", ["--bootstrap-server", peer.bootstrap, *args])
        lines = [line for line in (done.out + done.err).splitlines() if line.strip() and not line.startswith("\tat ")]
        return done.returncode, lines

    # --throttle: the tool writes the topic's throttled-replica lists and both brokers' rates, and
    # the --verify that finds the move done clears them (its 'Clearing ...' lines) on both systems
    moved = on_both(peers, lambda p: (run(p, "--execute", "--reassignment-json-file", str(plan),
                                          "--throttle", "1000000"),
                                      run(p, "--verify", "--reassignment-json-file", str(plan)),
                                      run(p, "--execute", "--reassignment-json-file", str(bad))[0]))
    assert moved["pylog"] == moved["kafka"], moved
    assert "The inter-broker throttle limit was set to 1000000 B/s" in moved["pylog"][0][1]
    assert any(line.startswith("Clearing topic-level throttles on topic") for line in moved["pylog"][1][1])
    assert moved["pylog"][1][0] == 0 and f"Reassignment of partition {topic}-0 is completed." in moved["pylog"][1][1]
    assert moved["pylog"][2] != 0


# ------------------------------------------------------------------ kafka-configs --entity-type broker-loggers

_ROOT_LINE = re.compile(r"^  root=(?P<level>[A-Z]+) sensitive=false synonyms=\{\}$", re.M)


def test_kafka_configs_broker_loggers_alike(peers):
    """Log levels at runtime (BROKER_LOGGER): the same describe layout (every logger, its level,
    no synonyms), the root logger set to WARN and back, and a level log4j does not have refused
    with the same exception. The logger names differ (kafka.* there, broker.* here): named."""
    entity = ["--entity-type", "broker-loggers", "--entity-name", "1"]
    before = on_both(peers, lambda p: _pylog_configs(p, entity))
    original = {name: _ROOT_LINE.search(text)["level"] for name, text in before.items()}
    try:
        altered = on_both(peers, lambda p: _kafka_configs(p, *entity, "--alter", "--add-config", "root=WARN").ok().out)
        assert altered["pylog"] == altered["kafka"] == "Completed updating config for broker-logger 1.\n"
        described = on_both(peers, lambda p: (_kafka_configs(p, *entity, "--describe").ok().out,
                                              _pylog_configs(p, ["--broker-logger", "1"])))
        for name, (kafka_tool, pylog_tool) in described.items():
            assert kafka_tool == pylog_tool, name  # pylog configs prints what kafka-configs prints
            assert kafka_tool.startswith("Dynamic configs for broker-logger 1 are:\n"), kafka_tool
            assert _ROOT_LINE.search(kafka_tool)["level"] == "WARN", name
        refused = on_both(peers, lambda p: _cause(_kafka_configs(p, *entity, "--alter", "--add-config", "root=LOUD")))
        assert refused["pylog"] == refused["kafka"] == (
            1, "org.apache.kafka.common.errors.InvalidConfigurationException",
            "Cannot set the log level of root to LOUD as it is not a supported log level. "
            "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
    finally:
        on_both(peers, lambda p: _kafka_configs(p, *entity, "--alter", "--add-config", f"root={original[p.name]}"))
