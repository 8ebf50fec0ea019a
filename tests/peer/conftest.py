"""Fixtures for the peer (differential) tier: Apache Kafka and pylog side by side.

Every scenario here runs against both systems and compares what a client observes. ``peers`` is
a pair ``(kafka, pylog)`` of ``Peer``: the same shape for both (a name, ``bootstrap``, and
``create_topic``), so a test body is written once and run against each. Both clusters are started
once per test session (a KRaft Apache Kafka from the jars ``make setup`` fetched; a pylog broker
process against the session's real ZooKeeper) and shared: each test makes its own topics with
``unique_topic``, so tests never see each other's data.

Three-node clusters (``peers3``) are started only by the modules that ask for them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from broker.tools.kafka_peer import ApacheKafkaCluster
from peer_support import COMMON_BROKER_SETTINGS, Peer, internal_topic_settings

import integration_support as integration  # loaded by tests/conftest.py (one copy per process)
from integration_support import *  # noqa: E402,F403  (helpers, for old `from conftest import` lines elsewhere)

# The process's one SparkSession, defined once for this tier and tests/spark (which may load it first).
_SPARK_SESSION = Path(__file__).resolve().parents[1] / "spark" / "spark_session.py"
if "pylog_spark_session" in sys.modules:
    spark_session = sys.modules["pylog_spark_session"]
else:
    _spec = importlib.util.spec_from_file_location("pylog_spark_session", _SPARK_SESSION)
    spark_session = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = spark_session
    _spec.loader.exec_module(spark_session)


@pytest.fixture(scope="session")
def spark():
    """The SparkSession of tests/spark (one per process), with Spark's Kafka connector on it."""
    yield spark_session.shared_session()
    spark_session.stop_shared_session()


@pytest.fixture(scope="session")
def kafka_peer(tmp_path_factory):
    cluster = ApacheKafkaCluster(tmp_path_factory.mktemp("apache-kafka"), brokers=1,
                                 overrides=COMMON_BROKER_SETTINGS)
    cluster.start()
    try:
        yield Peer("kafka", cluster.bootstrap, cluster.ports, [node.home / "data" for node in cluster.nodes])
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pylog_peer(zookeeper, tmp_path_factory):
    factory = integration.ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("pylog"))
    try:
        cluster = factory.make(1, overrides={**COMMON_BROKER_SETTINGS, **internal_topic_settings(1)})
        yield Peer("pylog", cluster.bootstrap, [b.port for b in cluster.brokers],
                   [b.data_dir for b in cluster.brokers])
    finally:
        factory.close()


@pytest.fixture(scope="session")
def peers(kafka_peer, pylog_peer) -> tuple[Peer, Peer]:
    """``(kafka, pylog)``: run the scenario on each, then compare."""
    return kafka_peer, pylog_peer


@pytest.fixture(params=["kafka", "pylog"])
def peer(request) -> Peer:
    """Either system, for scenarios whose expected outcome is stated once and must hold on both."""
    return request.getfixturevalue(f"{request.param}_peer")
