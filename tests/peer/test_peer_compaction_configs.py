"""Compaction's configs and its produce rule on Apache Kafka and on pylog, compared.

The same CreateTopics (validate_only) with good and bad compaction configs goes to both and the
error codes must match; a topic created with ``cleanup.policy=compact`` must be described alike
(value, source, type and synonyms of each compaction config); a produce of keyless records to a
compacted topic must fail alike (error code, offsets, record errors and messages: the topic name
is the same on both sides, so even the text is compared); ``pylog topics`` creates and describes a
compacted topic on both.
"""

from __future__ import annotations

import argparse
import io
import time

import pytest
from peer_support import unique_topic

from broker.client.connection import BrokerConnection
from broker.records import Record, encode_batch
from broker.tools.topics import add_topics_parser, run_topics
from broker.wire import ApiKey, ErrorCode

COMPACTION_KEYS = ("cleanup.policy", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
                   "max.compaction.lag.ms", "delete.retention.ms")

VALID = [
    {"cleanup.policy": "compact"}, {"cleanup.policy": "compact,delete"}, {"cleanup.policy": "delete, compact"},
    {"cleanup.policy": ""}, {"min.cleanable.dirty.ratio": "0"}, {"min.cleanable.dirty.ratio": "1"},
    {"min.cleanable.dirty.ratio": "0.01"}, {"min.cleanable.dirty.ratio": "5e-1"},
    {"min.compaction.lag.ms": "0", "max.compaction.lag.ms": "1"}, {"delete.retention.ms": "0"},
]
INVALID = [
    {"cleanup.policy": "foo"}, {"cleanup.policy": "Compact"}, {"cleanup.policy": "compact,"},
    {"min.cleanable.dirty.ratio": "1.5"}, {"min.cleanable.dirty.ratio": "-0.1"},
    {"min.cleanable.dirty.ratio": "abc"}, {"min.compaction.lag.ms": "-1"}, {"min.compaction.lag.ms": "1.5"},
    {"max.compaction.lag.ms": "0"}, {"delete.retention.ms": "-1"},
    {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
]

DESCRIBE_DEADLINE_S = 10.0


def connect(peer) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", peer.ports[0], client_id="peer-compaction")


def create_answer(peer, name: str, configs: dict[str, str], validate_only: bool = True) -> tuple[str, str]:
    request = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                           "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
               "timeout_ms": 10_000, "validate_only": validate_only}
    with connect(peer) as conn:
        [topic] = conn.request(ApiKey.CREATE_TOPICS, request, 5).topics
    return ErrorCode(topic.error_code).name, topic.error_message or ""


def test_compaction_configs_are_accepted_and_refused_alike(peers):
    for configs in VALID + INVALID:
        seen = {peer.name: create_answer(peer, unique_topic("cfg"), configs) for peer in peers}
        expected = "NONE" if configs in VALID else "INVALID_CONFIG"
        assert seen["kafka"][0] == seen["pylog"][0] == expected, (configs, seen)
        for key in configs:  # both messages name the offending key (the last one for the conflict)
            assert expected == "NONE" or key in seen["pylog"][1] or "conflict" in seen["pylog"][1]


def test_a_nan_dirty_ratio_is_refused_by_pylog_only(peers):
    """Intended difference: Kafka's range check lets NaN through (every comparison with it is
    false); pylog refuses a ratio that no log can be compared with."""
    kafka, pylog = peers
    assert create_answer(kafka, unique_topic("nan"), {"min.cleanable.dirty.ratio": "NaN"})[0] == "NONE"
    assert create_answer(pylog, unique_topic("nan"), {"min.cleanable.dirty.ratio": "NaN"})[0] == "INVALID_CONFIG"


def described(peer, topic: str) -> dict[str, tuple]:
    """DescribeConfigs of a topic just created: Apache Kafka's broker learns a new topic from the
    controller a moment after CreateTopics answers, and says UNKNOWN_TOPIC_OR_PARTITION until then
    (seen once at load 13), so that answer is asked again until a deadline."""
    request = {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
               "include_synonyms": True, "include_documentation": False}
    deadline = time.monotonic() + DESCRIBE_DEADLINE_S
    with connect(peer) as conn:
        while True:
            [result] = conn.request(ApiKey.DESCRIBE_CONFIGS, request, 4).results
            if result.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # polling a condition with a deadline: the broker gives no notice
    assert result.error_code == ErrorCode.NONE
    return {c.name: (c.value, c.config_source, c.config_type, c.read_only, c.is_sensitive,
                     [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs if c.name in COMPACTION_KEYS}


@pytest.mark.parametrize("configs", [
    {"cleanup.policy": "compact"},
    {"cleanup.policy": "delete, compact", "min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "1000"},
])
def test_a_compacted_topic_is_described_alike(peers, configs):
    topic = unique_topic("described")
    seen = {}
    for peer in peers:
        assert create_answer(peer, topic, configs, validate_only=False)[0] == "NONE"
        seen[peer.name] = described(peer, topic)
    assert set(seen["pylog"]) == set(COMPACTION_KEYS)
    assert seen["kafka"] == seen["pylog"]


def produce_answer(peer, topic: str, keys: list[bytes | None]):
    batch = encode_batch([Record(i, int(time.time() * 1000), k, b"v") for i, k in enumerate(keys)])
    request = {"transactional_id": None, "acks": -1, "timeout_ms": 10_000,
               "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    with connect(peer) as conn:
        [answer] = conn.request(ApiKey.PRODUCE, request, 9).responses
    [partition] = answer.partition_responses
    return (ErrorCode(partition.error_code).name, partition.base_offset, partition.log_start_offset,
            [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors],
            partition.error_message)


def test_keyless_records_to_a_compacted_topic_fail_alike(peers):
    topic = unique_topic("keyless")
    for peer in peers:
        assert create_answer(peer, topic, {"cleanup.policy": "compact"}, validate_only=False)[0] == "NONE"
    for keys in ([b"k"], [None], [b"a", None, b"", None], [b"", b"b"]):
        seen = {peer.name: produce_answer(peer, topic, keys) for peer in peers}
        assert seen["kafka"] == seen["pylog"], keys
    assert seen["pylog"][:2] == ("NONE", 1)  # the refused batches took no offsets on either side


def pylog_topics(peer, *argv: str) -> str:
    """``pylog topics ...`` (broker/tools/topics.py) against ``peer``; its standard output."""
    parser = argparse.ArgumentParser()
    add_topics_parser(parser.add_subparsers(dest="command"))
    out = io.StringIO()
    args = parser.parse_args(["topics", argv[0], "--bootstrap-server", peer.bootstrap, *argv[1:]])
    assert run_topics(args, out, io.StringIO()) == 0
    return out.getvalue()


def test_pylog_topics_creates_and_describes_a_compacted_topic_on_both(peers):
    topic = unique_topic("cli")
    for peer in peers:
        assert pylog_topics(peer, "create", "--topic", topic, "--config", "cleanup.policy=compact",
                            "--config", "min.cleanable.dirty.ratio=0.01") == f"Created topic {topic}.\n"
        head = pylog_topics(peer, "describe", "--topic", topic).splitlines()[0].split("\t")
        assert head[4] == "CleanupPolicy: compact", (peer, head)
        configs = head[5].removeprefix("Configs: ").split(",")
        assert {"cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"} <= set(configs), (peer, head)
