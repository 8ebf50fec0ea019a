"""The Apache Kafka launcher: cluster ids and ports kafka-storage accepts, a failed start that
leaves nothing running, and a start error that says how the JVM ended."""

from __future__ import annotations

import base64
import subprocess
import uuid
from unittest import mock

import pytest

from broker.tools import kafka_peer


def test_a_cluster_id_never_starts_with_a_dash():
    # Bytes 0xf8.. encode to "-" first in URL-safe base64; the launcher must draw again.
    dash, plain = uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)
    with mock.patch.object(kafka_peer.uuid, "uuid4", side_effect=[dash, dash, plain]):
        cluster_id = kafka_peer._random_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")


def test_planned_ports_are_distinct():
    probes = iter([5000, 5000, 5001, 5000, 5002, 5003])
    assert kafka_peer._distinct_free_ports(4, find=lambda: next(probes)) == [5000, 5001, 5002, 5003]


class SleepInstall:
    """Stands in for the Java install: each "node" is a ``sleep`` we can watch."""

    def command(self, main_class, args, heap="-Xmx512m", jvm_options=()):
        return ["sleep", "60"]


def test_a_failed_start_stops_the_nodes_it_started(tmp_path):
    cluster = kafka_peer.ApacheKafkaCluster(tmp_path, brokers=2, install=SleepInstall())
    real_popen, started = subprocess.Popen, []

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    failure = kafka_peer.KafkaPeerError("did not serve")
    with mock.patch.object(cluster, "_format"), mock.patch.object(kafka_peer.subprocess, "Popen", popen), \
            mock.patch.object(cluster, "wait_until_serving", side_effect=failure):
        for node in cluster.nodes:
            node.home.mkdir(parents=True)
        with pytest.raises(kafka_peer.KafkaPeerError):
            cluster.start()
    assert len(started) == 2 and all(process.poll() is not None for process in started)
    assert not any(node.pid_path.exists() for node in cluster.nodes)


class ShellInstall:
    """Stands in for the Java install: each "node" runs ``script`` in sh."""

    def __init__(self, script):
        self.script = script

    def command(self, main_class, args, heap="-Xmx512m", jvm_options=()):
        return ["sh", "-c", self.script]


def start_stand_ins(tmp_path, install, timeout_s):
    cluster = kafka_peer.ApacheKafkaCluster(tmp_path, brokers=1, install=install)
    cluster.nodes[0].home.mkdir(parents=True)
    with mock.patch.object(cluster, "_format"), pytest.raises(kafka_peer.KafkaPeerError) as failure:
        cluster.start(timeout_s=timeout_s)
    return str(failure.value)


def test_a_node_still_starting_is_not_called_exited(tmp_path):
    # A child's /proc/<pid>/cmdline is empty until its exec is done, after Popen returns: the
    # launcher judged a starting JVM by it, called it exited (empty kafka.out), and stopped it.
    # A stand-in whose cmdline never names kafka.Kafka stays alive until the deadline.
    message = start_stand_ins(tmp_path, SleepInstall(), timeout_s=1.0)
    assert "did not serve within 1.0 s" in message and "exited" not in message


def test_a_node_that_exits_reports_its_status_and_stderr(tmp_path):
    script = "echo 'Error: Could not reserve enough space for object heap' >&2; exit 3"
    message = start_stand_ins(tmp_path, ShellInstall(script), timeout_s=60.0)
    assert "node 1 exited with status 3" in message
    assert "Could not reserve enough space for object heap" in message
    assert str(tmp_path / "kafka-1" / "kafka.out") in message


def test_a_node_killed_by_a_signal_says_which(tmp_path):
    message = start_stand_ins(tmp_path, ShellInstall("kill -9 $$"), timeout_s=60.0)
    assert "node 1 was killed by SIGKILL" in message and "kafka.out is empty" in message
