"""The one SparkSession of a test run, shared by every tier that uses Spark (tests/spark, tests/peer).

A process can hold one SparkContext, and jars reach its JVM only when it starts, so the session is
defined here once and both tiers' ``spark`` fixtures call ``shared_session()``: whichever tier runs
first starts it, with Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) on
``spark.jars`` when ``make setup`` has fetched it into ``.cache/spark-kafka``; the other tier gets
the same session. Python workers run this interpreter (the venv's), which has pyarrow and pylog.

Both conftests load this file under one module name (``pylog_spark_session``), so there is one
module object, whatever the order the tiers are collected in.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SPARK_KAFKA_POM = REPO_ROOT / "conf" / "spark-kafka" / "pom.xml"
INSTALL_HINT = "run `make setup` (target spark-kafka fetches Spark's Kafka connector into .cache/spark-kafka)"

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


def spark_kafka_version() -> str:
    """The connector version ``conf/spark-kafka/pom.xml`` pins."""
    match = re.search(r"<spark\.kafka\.version>([^<]+)</spark\.kafka\.version>", SPARK_KAFKA_POM.read_text())
    assert match, f"no <spark.kafka.version> in {SPARK_KAFKA_POM}"
    return match.group(1)


def spark_kafka_jars() -> list[Path]:
    """The connector's jars that ``make setup`` copied (empty when it has not run)."""
    jars_dir = REPO_ROOT / ".cache" / "spark-kafka" / spark_kafka_version() / "jars"
    jars = sorted(jars_dir.glob("*.jar"))
    if not any(jar.name.startswith("spark-sql-kafka-0-10_") for jar in jars):
        return []
    return jars


_session = None


def shared_session():
    """The test run's SparkSession (local[2], ``pylog`` registered), started on first use."""
    global _session
    if _session is None:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        import spark_log

        conf = dict(SPARK_CONF)
        jars = spark_kafka_jars()
        if jars:
            conf["spark.jars"] = ",".join(str(jar) for jar in jars)
        _session = spark_log.session(app_name="pylog-tests", master="local[2]", **conf)
        _session.sparkContext.setLogLevel("ERROR")
    return _session


def has_kafka_connector(spark) -> bool:
    """Whether ``format("kafka")`` resolves in ``spark``'s JVM."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
                                    jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    except Exception as error:  # py4j wraps ClassNotFoundException
        if "ClassNotFoundException" in str(error):
            return False
        raise
    return True


def stop_shared_session() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
