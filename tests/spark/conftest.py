"""Fixtures for the Spark tier: ONE SparkSession for the whole test session (local[2], small
shuffles, Python workers on this interpreter) and real pylog clusters from the integration
fixtures (``tests/integration/conftest.py``), one per test module where the module allows it.

The integration conftest is loaded under its own module name (two ``conftest`` modules cannot
share the name) and its session-scoped ``zookeeper`` fixture is re-exported here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_INTEGRATION = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("pylog_integration_fixtures", _INTEGRATION)
integration = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = integration
_spec.loader.exec_module(integration)

zookeeper = integration.zookeeper  # re-exported session fixture
ClusterFactory = integration.ClusterFactory

SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.pollingDelay": "100ms",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.streaming.noDataProgressEventInterval": "200ms",
    "spark.driver.memory": "1g",
    "spark.python.worker.reuse": "true",
}


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import spark_log

    session = spark_log.session(app_name="pylog-tests", master="local[2]", **SPARK_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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
