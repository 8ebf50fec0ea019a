"""A Spark driver for the exactly-once fault tests, run as its own process (in its own session,
so the test hook ``PYLOG_SPARK_TEST_KILL_AT`` can SIGKILL the driver's whole process group: the
Python driver, its JVM and the JVM's Python workers).

    python tests/spark/eos_driver.py BOOTSTRAP SOURCE SINK CHECKPOINT [--speculation]

Copies SOURCE to SINK exactly-once (read_committed source, availableNow trigger, 300 records per
partition and batch) from CHECKPOINT, then exits 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import os  # noqa: E402

import spark_log  # noqa: E402
from spark_log.transactions import TEST_KILL_PGID_ENV  # noqa: E402


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
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "600").load()
          .select("key", "value"))
    query = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("deliveryGuarantee", "exactly-once")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"query failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
