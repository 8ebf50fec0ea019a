"""``spark_log``: the ``pylog`` PySpark DataSource (batch and streaming, read and write).

    import spark_log
    spark = spark_log.session(app_name="load")        # or spark_log.register(existing_spark)
    df = (spark.read.format("pylog")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "orders").load())

Options, schema and offsets follow Spark's Kafka connector; see ``spark_log.options`` for the
list and the pylog additions (group offsets committed to ``__consumer_offsets`` or ZooKeeper,
``offsets.store``; ``startingOffsets=group``).
Importing this package does not import PySpark; ``register`` and ``session`` do.
"""

from __future__ import annotations

import os
import sys

__all__ = ["register", "session"]


def register(spark) -> None:
    """Make ``format("pylog")`` available in ``spark`` (a SparkSession), and let batch writes use
    Spark's default save mode as ``format("kafka")`` does (see ``spark_log.save_mode``: Spark
    itself refuses ErrorIfExists for Python data sources; pylog takes it as Append, like Kafka)."""
    from spark_log import save_mode
    from spark_log.source import PylogDataSource

    spark.dataSource.register(PylogDataSource)
    save_mode.install()


def session(app_name: str = "pylog", master: str = "local[2]", **conf: str):
    """A SparkSession (created, or the active one) whose Python workers run this interpreter, so
    they import the same pyarrow and pylog; with ``pylog`` registered. ``conf`` holds Spark
    settings by their dotted names: ``session(**{"spark.sql.shuffle.partitions": "2"})``."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.session.timeZone": "UTC",
        **{k: str(v) for k, v in conf.items()},
    }
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
