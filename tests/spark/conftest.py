"""Fixtures for the Spark tier: ONE SparkSession for the whole test session (local[2], small
shuffles, Python workers on this interpreter; defined in ``spark_session.py``, shared with the
peer tier) and real pylog clusters from the integration fixtures (``tests/integration/integration_support.py``),
one per test module where the module allows it.

The integration helpers come from ``integration_support`` (tests/conftest.py loads it once per
process and registers its session-scoped ``zookeeper`` for every tier).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import integration_support as integration  # loaded by tests/conftest.py (one copy per process)
from integration_support import *  # noqa: E402,F403  (ClusterFactory; helpers for old `from conftest import` lines)

_SESSION = Path(__file__).resolve().parent / "spark_session.py"
if "pylog_spark_session" in sys.modules:
    spark_session = sys.modules["pylog_spark_session"]
else:  # the peer tier loads the same file under the same name: one session definition per process
    _spec = importlib.util.spec_from_file_location("pylog_spark_session", _SESSION)
    spark_session = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = spark_session
    _spec.loader.exec_module(spark_session)

SPARK_CONF = spark_session.SPARK_CONF


@pytest.fixture(scope="session")
def spark():
    """The process's one SparkSession (``spark_session.shared_session``; tests/peer uses it too)."""
    yield spark_session.shared_session()
    spark_session.stop_shared_session()


@pytest.fixture(scope="module")
def cluster_factory(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("clusters"))
    yield factory
    factory.close()


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    """One broker for the module; fast retention checks so retention tests need no own cluster."""
    return cluster_factory.make(1, overrides={
        "log.retention.check.interval.ms": "500",
        "num.partitions": "1",
    })
