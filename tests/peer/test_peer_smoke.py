"""The peer tier's footing: both systems start and a topic created on each reads back the same."""

from __future__ import annotations

import subprocess

import pytest
from peer_support import unique_topic

from broker.client.admin import AdminClient
from broker.tools import kafka_tool_runner
from broker.tools.kafka_peer import KAFKA_VERSION, TOOL_CLASSES, KafkaInstall, find_kafka_install, run_kafka_tool
from broker.tools.kafka_tool_runner import RUNNER_CLASS, runner_directory


def test_both_peers_create_and_describe_a_topic_alike(peers):
    described = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("smoke"), partitions=3)
        with AdminClient(peer.bootstrap) as admin:
            (description,) = admin.describe_topics([topic])
        described[peer.name] = (len(description.partitions), description.replication_factor,
                                description.is_internal)
    assert described["kafka"] == described["pylog"] == (3, 1, False)


def test_a_tool_records_its_class_archive_once_then_maps_it(tmp_path):
    """run_kafka_tool's class data sharing: the first run of a tool records the archive; a run with
    it mapped (``-Xshare:on`` fails unless the archive is valid for this JVM and these jars)
    prints nothing of it (CDS logs to stdout, which the tests parse)."""
    real = find_kafka_install()
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "libs").symlink_to(real.libs, target_is_directory=True)
    install = KafkaInstall(real.java, tmp_path / "kafka" / "libs")
    recorded = run_kafka_tool("kafka-topics", ["--version"], install=install)
    assert (recorded.returncode, recorded.stdout) == (0, f"{KAFKA_VERSION}\n".encode()), recorded.stderr[-2000:]
    [archive] = (tmp_path / "kafka" / "class-archives").iterdir()  # no recording left behind
    assert archive.suffix == ".jsa"
    mapped = subprocess.run(install.command(TOOL_CLASSES["kafka-topics"], ["--version"], jvm_options=[
        f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]),
        capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (mapped.returncode, mapped.stdout) == (0, f"{KAFKA_VERSION}\n".encode()), mapped.stderr[-2000:]


# KafkaToolRunner (conf/apache-kafka/KafkaToolRunner.java, compiled by make setup) runs tool after
# tool in one JVM. Each run must answer as the tool's own JVM would: these compare the two.
SAME_AS_OWN_JVM = [
    ("kafka-topics", ["--version"]),
    ("kafka-topics", ["--bogus"]),  # joptsimple's refusal: status 1, the usage error on stderr
    ("kafka-dump-log", ["--files", "/nonexistent/00000000000000000000.log"]),  # an uncaught exception
]


def test_tools_in_the_runner_answer_as_in_their_own_jvm(monkeypatch):
    assert (runner_directory(find_kafka_install().libs) / f"{RUNNER_CLASS}.class").is_file(), \
        "the Kafka tool runner is not compiled: run `make setup`"
    before = kafka_tool_runner.statistics()
    pooled = [run_kafka_tool(tool, args) for tool, args in SAME_AS_OWN_JVM]
    after = kafka_tool_runner.statistics()
    assert after["tool_runs"] - before["tool_runs"] == len(SAME_AS_OWN_JVM)
    assert after["runners_started"] - before["runners_started"] <= 1  # one JVM served them all
    assert after["runners_retired"] == before["runners_retired"]
    monkeypatch.setenv("KAFKA_PEER_TOOL_RUNNER", "0")
    for (tool, args), mine in zip(SAME_AS_OWN_JVM, pooled):
        own = run_kafka_tool(tool, args)
        assert (mine.returncode, mine.stdout) == (own.returncode, own.stdout), (tool, args, mine.stderr[-2000:])
        # Stack traces differ below the tool's main (the runner calls it); the first line is the error.
        assert mine.stderr.splitlines()[:1] == own.stderr.splitlines()[:1], (tool, args)


def test_a_tool_that_leaves_its_admin_open_keeps_the_runner(kafka_peer):
    """kafka-transactions never closes its Admin client (its JVM's exit would end it): the runner
    closes it, so the runner serves the next tool instead of retiring."""
    before = kafka_tool_runner.statistics()
    for _ in range(2):
        listed = run_kafka_tool("kafka-transactions", ["--bootstrap-server", kafka_peer.bootstrap, "list"])
        assert listed.returncode == 0, listed.stderr[-2000:]
        assert listed.stdout.split(b"\t")[0] == b"TransactionalId"
    after = kafka_tool_runner.statistics()
    assert after["runners_retired"] == before["runners_retired"], after["last_retirement"]


def test_a_tool_past_its_deadline_is_killed_and_the_next_one_runs(kafka_peer):
    before = kafka_tool_runner.statistics()
    with pytest.raises(subprocess.TimeoutExpired):  # a console consumer waits for records forever
        run_kafka_tool("kafka-console-consumer", ["--bootstrap-server", kafka_peer.bootstrap,
                                                  "--topic", unique_topic("never")], timeout_s=2.0)
    assert kafka_tool_runner.statistics()["runners_killed"] == before["runners_killed"] + 1
    version = run_kafka_tool("kafka-topics", ["--version"])
    assert (version.returncode, version.stdout) == (0, f"{KAFKA_VERSION}\n".encode())
