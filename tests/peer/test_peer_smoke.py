"""The peer tier's footing: both systems start and a topic created on each reads back the same."""

from __future__ import annotations

import subprocess

from peer_support import unique_topic

from broker.client.admin import AdminClient
from broker.tools.kafka_peer import KAFKA_VERSION, TOOL_CLASSES, KafkaInstall, find_kafka_install, run_kafka_tool


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
