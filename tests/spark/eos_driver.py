"""A Spark driver for the exactly-once fault tests, run as its own process (in its own session,
so the test hook ``PYLOG_SPARK_TEST_KILL_AT`` can SIGKILL the driver's whole process group: the
Python driver, its JVM and the JVM's Python workers).

    python tests/spark/eos_driver.py BOOTSTRAP SOURCE SINK CHECKPOINT [--speculation] [--batch N]

Copies SOURCE to SINK exactly-once (read_committed source, availableNow trigger, 600 records per
batch) from CHECKPOINT, then exits 0. ``--batch N``: instead, a batch job (``df.write``) writes
N keyed records (``eos_support.produce_keyed``'s keys and values) from 4 partitions to SINK.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import os  # noqa: E402

import spark_log  # noqa: E402
from spark_log.transactions import TEST_KILL_PGID_ENV  # noqa: E402


# The restarted driver (or the recovery) must come back before the coordinator aborts the killed
# driver's prepared transactions (README: "Limits"). At a load of 20 a restart took 2.5 min, past
# the 60 s default: the roll-forward found batch 1's second transaction aborted by its timeout.
TRANSACTION_TIMEOUT_MS = "600000"


def main(argv: list[str]) -> int:
    bootstrap, source, sink, checkpoint = argv[:4]
    os.environ[TEST_KILL_PGID_ENV] = str(os.getpgid(0))  # before the JVM starts: it inherits it
    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    if "--speculation" in argv:
        conf.update({"spark.speculation": "true", "spark.speculation.interval": "100ms",
                     "spark.speculation.multiplier": "1.1", "spark.speculation.quantile": "0.1",
                     "spark.speculation.minTaskRuntime": "100ms"})
    # local[2,4]: 4 attempts per task (local[2] alone never retries a failed task)
    spark = spark_log.session(app_name="eos-driver", master="local[2,4]", **conf)
    spark.sparkContext.setLogLevel("ERROR")
    if "--batch" in argv:
        write_batch(spark, bootstrap, sink, int(argv[argv.index("--batch") + 1]))
        spark.stop()
        return 0
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "600").load()
          .select("key", "value"))
    query = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("deliveryGuarantee", "exactly-once")
             .option("transactionTimeoutMs", TRANSACTION_TIMEOUT_MS)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", file=sys.stderr)
        return 1
    return 0


def write_batch(spark, bootstrap: str, sink: str, count: int) -> None:
    from pyspark.sql import functions as F

    key = F.concat(F.lit("k"), (F.col("id") % 7).cast("string"))
    rows = spark.range(0, count, numPartitions=4).select(
        key.alias("key"), F.concat(key, F.lit(":"), (F.col("id") / 7).cast("long").cast("string")).alias("value"))
    (rows.write.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
     .option("deliveryGuarantee", "exactly-once").option("transactionTimeoutMs", TRANSACTION_TIMEOUT_MS)
     .mode("append").save())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
