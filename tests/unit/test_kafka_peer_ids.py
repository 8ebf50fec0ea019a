"""The Apache Kafka launcher: cluster ids and ports kafka-storage accepts, and a failed start
that leaves nothing running."""

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

    def command(self, main_class, args, heap="-Xmx512m"):
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
