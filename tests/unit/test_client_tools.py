"""``pylog topics``, ``pylog produce`` and ``pylog consume`` against the in-memory cluster, through
the argparse specs the ``pylog`` command line wires in."""

from __future__ import annotations

import argparse
import io

import pytest

from fake_kafka import InMemoryKafka
from broker.records import Record, encode_batch
from broker.tools.produce_consume import add_consume_parser, add_produce_parser, run_consume, run_produce
from broker.tools.topics import add_topics_parser, parse_configs, run_topics


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pylog")
    sub = p.add_subparsers(dest="command", required=True)
    add_topics_parser(sub)
    add_produce_parser(sub)
    add_consume_parser(sub)
    return p


@pytest.fixture
def kafka():
    with InMemoryKafka(brokers=2, fetch_wait_cap_ms=20) as k:
        yield k
        assert k.handler_errors == []


def topics(kafka, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    args = parser().parse_args(["topics", argv[0], "--bootstrap-server", kafka.bootstrap, *argv[1:]])
    assert run_topics(args, out, err) == 0
    return out.getvalue()


def produce(kafka, stdin: bytes, *argv: str) -> int:
    args = parser().parse_args(["produce", "--bootstrap-server", kafka.bootstrap, "--topic", "t", *argv])
    return run_produce(args, io.BytesIO(stdin), io.StringIO())


def consume(kafka, *argv: str) -> bytes:
    out = io.BytesIO()
    args = parser().parse_args(["consume", "--bootstrap-server", kafka.bootstrap, "--topic", "t", *argv])
    assert run_consume(args, out, io.StringIO()) == 0
    return out.getvalue()


# ------------------------------------------------------------------ topics


def test_topics_create_list_describe_delete(kafka):
    assert topics(kafka, "create", "--topic", "t", "--partitions", "2", "--replication-factor", "1",
                  "--config", "retention.ms=1000", "--config", "cleanup.policy=compact") == "Created topic t.\n"
    assert kafka.configs["t"] == {"retention.ms": "1000", "cleanup.policy": "compact"}
    kafka.create_topic("other", 1)
    assert topics(kafka, "list") == "other\nt\n"
    assert topics(kafka, "describe", "--topic", "t") == (
        "Topic: t\tTopicId: none\tPartitionCount: 2\tReplicationFactor: 1\tCleanupPolicy: compact\t"
        "Configs: cleanup.policy=compact,retention.ms=1000\n"
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\n"
        "\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\n"
    )
    assert topics(kafka, "describe", "--topic", "other").startswith(
        "Topic: other\tTopicId: none\tPartitionCount: 1\tReplicationFactor: 1\tCleanupPolicy: delete\tConfigs: \n")
    kafka.set_leader("other", 0, -1)
    assert "Partition: 0\tLeader: none\t" in topics(kafka, "describe")
    assert topics(kafka, "delete", "--topic", "t") == "Deleted topic t.\n"
    assert topics(kafka, "list") == "other\n"


def test_topics_create_with_broker_defaults(kafka):
    topics(kafka, "create", "--topic", "t")
    (_, request), = kafka.brokers[0].requests_for(19)
    assert (request.topics[0].num_partitions, request.topics[0].replication_factor) == (-1, -1)


def test_topic_that_exists_is_one_clear_error_unless_if_not_exists(kafka):
    kafka.create_topic("t", 1)
    with pytest.raises(ValueError) as info:
        topics(kafka, "create", "--topic", "t", "--partitions", "1")
    assert str(info.value).startswith("TOPIC_ALREADY_EXISTS (36)") and "\n" not in str(info.value)
    assert topics(kafka, "create", "--topic", "t", "--if-not-exists") == ""


@pytest.mark.parametrize("argv, message", [
    (["create", "--topic", "bad/name"], "illegal"),
    (["create", "--topic", "t", "--partitions", "0"], "--partitions"),
    (["create", "--topic", "t", "--replication-factor", "-2"], "--replication-factor"),
    (["create", "--topic", "t", "--config", "novalue"], "KEY=VALUE"),
    (["create", "--topic", "t", "--replication-factor", "5"], "INVALID_REPLICATION_FACTOR"),
    (["describe", "--topic", "missing"], "does not exist"),
    (["delete", "--topic", "missing"], "UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_topics_user_mistakes_are_value_errors(kafka, argv, message):
    with pytest.raises(ValueError, match=message):
        topics(kafka, *argv)


def test_unreachable_cluster_is_a_value_error():
    args = parser().parse_args(["topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout-ms", "200"])
    with pytest.raises(ValueError, match="no broker is reachable"):
        run_topics(args, io.StringIO())


def test_bad_bootstrap_server_is_a_value_error():
    args = parser().parse_args(["topics", "list", "--bootstrap-server", "nohostport"])
    with pytest.raises(ValueError, match="host:port"):
        run_topics(args, io.StringIO())


@pytest.mark.parametrize("argv", [
    ["topics", "create", "--bootstrap-server", "b:1"],  # no --topic
    ["topics", "list"],  # no --bootstrap-server
    ["topics", "frobnicate", "--bootstrap-server", "b:1"],
    ["consume", "--bootstrap-server", "b:1", "--topic", "t", "--from-beginning", "--offset", "3"],
    ["produce", "--bootstrap-server", "b:1", "--topic", "t", "--acks", "2"],
])
def test_argparse_rejects_malformed_command_lines(argv, capsys):
    with pytest.raises(SystemExit) as info:
        parser().parse_args(argv)
    assert info.value.code == 2


def test_parse_configs():
    assert parse_configs(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ValueError):
        parse_configs(["=1"])


# ------------------------------------------------------------------ produce and consume


def test_produce_lines_and_consume_them_back(kafka):
    kafka.create_topic("t", 1)
    assert produce(kafka, b"one\ntwo\r\n\nlast-without-newline") == 0
    assert [r.value for r in kafka.records("t", 0)] == [b"one", b"two", b"", b"last-without-newline"]
    assert consume(kafka, "--from-beginning", "--max-messages", "4") == b"one\ntwo\n\nlast-without-newline\n"


def test_produce_with_key_separator_and_print_key(kafka):
    kafka.create_topic("t", 3)
    produce(kafka, b"k1:v1\nk2:v:2\nk1:v3\n", "--key-separator", ":", "--compression", "gzip")
    got = [(r.key, r.value) for p in range(3) for r in kafka.records("t", p)]
    assert sorted(got) == [(b"k1", b"v1"), (b"k1", b"v3"), (b"k2", b"v:2")]
    lines = consume(kafka, "--from-beginning", "--max-messages", "3", "--print-key").splitlines()
    assert sorted(lines) == [b"k1\tv1", b"k1\tv3", b"k2\tv:2"]


def test_a_line_without_the_key_separator_stops_with_its_line_number(kafka):
    kafka.create_topic("t", 1)
    with pytest.raises(ValueError, match="line 2"):
        produce(kafka, b"k:a\nno-separator\nk:c\n", "--key-separator", ":")
    assert [r.value for r in kafka.records("t", 0)] == [b"a"]  # what came before was delivered


def test_produce_acks_options(kafka):
    kafka.create_topic("t", 1)
    produce(kafka, b"a\n", "--acks", "1")
    produce(kafka, b"b\n", "--acks", "all")
    requests = [r for _, r in kafka.brokers[0].requests_for(0)]
    assert [r.acks for r in requests] == [1, -1]
    headers = kafka.batch_headers("t", 0)
    assert headers[0].producer_id == -1 and headers[1].producer_id >= 0  # idempotent only with all


def test_produce_to_a_missing_topic_fails_clearly(kafka):
    with pytest.raises(ValueError, match="does not exist"):
        produce(kafka, b"a\n")


def test_consume_from_offset_of_a_partition_and_null_values(kafka):
    kafka.create_topic("t", 2)
    kafka.append_raw("t", 1, encode_batch([Record(i, 1, b"k", v) for i, v in enumerate([b"a", None, b"c"])]))
    assert consume(kafka, "--partition", "1", "--offset", "1", "--max-messages", "2") == b"null\nc\n"


def test_consume_defaults_to_new_records_and_exits_when_idle(kafka):
    kafka.create_topic("t", 1)
    produce(kafka, b"old\n")
    assert consume(kafka, "--timeout-ms", "200") == b""


def test_consume_read_committed(kafka):
    kafka.create_topic("t", 1)
    kafka.append_raw("t", 0, encode_batch([Record(0, 1, None, b"aborted")], producer_id=5, producer_epoch=0,
                                          base_sequence=0, transactional=True))
    from broker.records import ControlRecord, ControlType, encode_control_batch
    kafka.append_raw("t", 0, encode_control_batch(ControlRecord(ControlType.ABORT, 0), offset=0, timestamp=1,
                                                  producer_id=5, producer_epoch=0))
    kafka.append_raw("t", 0, encode_batch([Record(0, 1, None, b"kept")]))
    committed = consume(kafka, "--from-beginning", "--isolation-level", "read_committed", "--timeout-ms", "300")
    assert committed == b"kept\n"
    assert consume(kafka, "--from-beginning", "--timeout-ms", "300") == b"aborted\nkept\n"


@pytest.mark.parametrize("argv, message", [
    (["--offset", "3"], "--partition"),
    (["--partition", "7"], "no partition 7"),
    (["--max-messages", "0"], "--max-messages"),
    (["--partition", "0", "--offset", "-1"], "--offset"),
    (["--group", "g", "--partition", "0"], "--group"),
    (["--group", "g", "--partition", "0", "--offset", "1"], "--group"),
])
def test_consume_user_mistakes(kafka, argv, message):
    kafka.create_topic("t", 1)
    with pytest.raises(ValueError, match=message):
        consume(kafka, *argv)
