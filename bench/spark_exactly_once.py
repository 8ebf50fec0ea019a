"""Exactly-once vs at-least-once streaming copy through the pylog Spark sink (issue 16).

Setup: ``pylog cluster up`` with 3 brokers in a temporary directory (transactions on: the
transaction log and topics at RF 3, min.insync.replicas 2); ``--records`` records of
``--value-bytes`` bytes produced into a source topic of ``--partitions`` partitions. One
SparkSession ``local[2]``.

Measured, per round (``--repeat``; the two modes run interleaved so the machine's other load hits
them alike): a streaming copy source -> fresh sink topic (``readStream.format("pylog")`` with
``isolation.level=read_committed`` -> ``writeStream.format("pylog")``, ``Trigger.AvailableNow``,
``--batches`` micro-batches via maxOffsetsPerTrigger) with ``deliveryGuarantee`` at-least-once and
exactly-once: rows/s, and for exactly-once the driver's commit time per micro-batch (intent,
EndTxn per task, done, sweep; written by the sink to ``PYLOG_SPARK_COMMIT_TIMES``). Targets:
exactly-once / at-least-once >= 0.8; commit p50 <= 50 ms. Every run checks that the sink topic
holds exactly ``--records`` records under read_committed.

Spark runs ``local[2,4]``: a failed task is retried (up to 4 attempts), as on a cluster; the
exactly-once path must survive the retry (the failed attempt's transaction is aborted).

Not part of the tests: ``python bench/spark_exactly_once.py [--records N] [--kafka]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import report  # noqa: E402
from broker.client import AdminClient  # noqa: E402
from broker.tools.cluster import ClusterToolError, cluster_down, cluster_up  # noqa: E402
from broker.tools.zookeeper import find_free_port  # noqa: E402

from spark_read_write import produce  # noqa: E402

TXN_SETTINGS = ["transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
                "transaction.state.log.num.partitions=5", "offsets.topic.replication.factor=3",
                "offsets.topic.num.partitions=5", "default.replication.factor=3", "min.insync.replicas=2"]


def committed_records(spark, bootstrap: str, topic: str) -> int:
    """Records a read_committed reader sees (offsets would also count markers and aborted data)."""
    return (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("isolation.level", "read_committed").load().count())


def copy(spark, bootstrap: str, source: str, sink: str, checkpoint: str, guarantee: str, per_trigger: int,
         in_flight: int | None = None) -> float:
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("isolation.level", "read_committed").option("maxOffsetsPerTrigger", str(per_trigger))
          .load().select("value"))
    start = time.perf_counter()
    writer = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
              .option("deliveryGuarantee", guarantee).option("checkpointLocation", checkpoint))
    if guarantee == "exactly-once" and in_flight is not None:
        # Before b00cbce (Produce appends in request order per connection) pipelined
        # transactional Produce could append out of order: OUT_OF_ORDER_SEQUENCE_NUMBER; 1 avoided it.
        writer = writer.option("kafka.max.in.flight.requests.per.connection", str(in_flight))
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None, query.exception()
    return time.perf_counter() - start


def run(args, root: Path) -> None:
    import spark_log

    times_file = root / "commit-times"
    os.environ["PYLOG_SPARK_COMMIT_TIMES"] = str(times_file)  # before the JVM and its workers start
    for attempt in range(5):  # broker i listens on port + i: those may be taken
        port, zk_port = find_free_port(), find_free_port()
        try:
            cluster_up(root / "cluster", 3, port, zk_port, TXN_SETTINGS, sys.stderr)
            break
        except ClusterToolError:
            if attempt == 4:
                raise
            shutil.rmtree(root / "cluster", ignore_errors=True)
    bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(3))
    spark = None
    try:
        seconds = produce(bootstrap, "bench-eos-source", args.records, args.value_bytes, args.partitions)
        report("produce (setup)", records=args.records, seconds=seconds)
        spark = spark_log.session(app_name="bench-eos", master="local[2,4]", **{
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("ERROR")
        per_trigger = max(1, args.records // args.batches)
        rates: dict[str, list[float]] = {"at-least-once": [], "exactly-once": []}
        commits: list[float] = []
        for round_ in range(args.repeat + 1):  # round 0 warms up
            for guarantee in rates:
                sink = f"bench-eos-{guarantee}-{round_}"
                with AdminClient(bootstrap) as admin:
                    admin.create_topics(sink, partitions=args.partitions, replication_factor=3)
                times_file.unlink(missing_ok=True)
                elapsed = copy(spark, bootstrap, "bench-eos-source", sink, str(root / f"ck-{sink}"),
                               guarantee, per_trigger, args.eos_in_flight)
                assert committed_records(spark, bootstrap, sink) == args.records, f"{sink}: wrong record count"
                if round_:
                    rates[guarantee].append(args.records / elapsed)
                    if guarantee == "exactly-once":
                        commits += [float(line.split()[1]) for line in times_file.read_text().split("\n") if line]
        load = os.getloadavg()[0]
        for guarantee, values in rates.items():
            report(f"stream copy {guarantee}", records=args.records, batches=args.batches,
                   rows_per_s_median=statistics.median(values), rows_per_s_min=min(values),
                   rows_per_s_max=max(values), load_1m=load)
        ratio = statistics.median(rates["exactly-once"]) / statistics.median(rates["at-least-once"])
        commits.sort()
        report("exactly-once vs at-least-once", ratio=ratio, target=0.8,
               commit_ms_p50=commits[len(commits) // 2], commit_ms_p90=commits[int(len(commits) * 0.9)],
               commit_ms_max=commits[-1], commits=len(commits), target_p50_ms=50)
    finally:
        if spark is not None:
            spark.stop()
        cluster_down(root / "cluster", sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--batches", type=int, default=10, help="micro-batches per copy")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--eos-in-flight", type=int, default=None,
                        help="kafka.max.in.flight.requests.per.connection of the exactly-once sink (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eos-") as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
