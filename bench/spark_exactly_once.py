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

``--spark-kafka``: also a comparison row, Spark's own Kafka connector (``format("kafka")``,
spark-sql-kafka-0-10 from ``make setup``; at-least-once) copying the same records between two
topics of an Apache Kafka 4.1.1 cluster of 3 KRaft nodes (RF 3, min ISR 2) on the same machine,
same batches, read_committed source; run after the pylog rounds, with the pylog cluster down.
``--no-warm-up`` skips round 0 (a 10 M run cannot afford it).

Not part of the tests: ``python bench/spark_exactly_once.py [--records N] [--repeat R] [--spark-kafka]``.
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


def spark_kafka_jars() -> list[Path]:
    """spark-sql-kafka-0-10 and its dependencies as ``make setup`` fetched them (tests/spark/spark_session.py)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tests" / "spark" / "spark_session.py"
    spec = importlib.util.spec_from_file_location("pylog_spark_session_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jars = module.spark_kafka_jars()
    if not jars:
        raise SystemExit("--spark-kafka: " + module.INSTALL_HINT)
    return jars

TXN_SETTINGS = ["transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
                "transaction.state.log.num.partitions=5", "offsets.topic.replication.factor=3",
                "offsets.topic.num.partitions=5", "default.replication.factor=3", "min.insync.replicas=2"]


START_ATTEMPTS = 3


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
    writer = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
              .option("deliveryGuarantee", guarantee).option("checkpointLocation", checkpoint))
    if guarantee == "exactly-once" and in_flight is not None:
        # Before b00cbce (Produce appends in request order per connection) pipelined
        # transactional Produce could append out of order: OUT_OF_ORDER_SEQUENCE_NUMBER; 1 avoided it.
        writer = writer.option("kafka.max.in.flight.requests.per.connection", str(in_flight))
    for attempt in range(START_ATTEMPTS):
        start = time.perf_counter()
        query = writer.trigger(availableNow=True).start()
        try:
            query.awaitTermination()
        except Exception as exc:  # noqa: BLE001 - only the one below is retried
            # At a load of 20+ Spark's 10 s wait for a new Python worker (the streaming source's
            # runner, started with each query) runs out before any batch: nothing was written.
            if "failed to connect back" not in str(exc) or query.recentProgress or attempt == START_ATTEMPTS - 1:
                raise
            print(f"query start failed ({attempt + 1}/{START_ATTEMPTS}): Python worker did not connect back; retrying",
                  file=sys.stderr)
            continue
        assert query.exception() is None, query.exception()
        return time.perf_counter() - start
    raise AssertionError("unreachable")


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
        conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g",
                "spark.sql.shuffle.partitions": "2"}
        if args.spark_kafka:
            conf["spark.jars"] = ",".join(str(j) for j in spark_kafka_jars())
        spark = spark_log.session(app_name="bench-eos", master="local[2,4]", **conf)
        spark.sparkContext.setLogLevel("ERROR")
        per_trigger = max(1, args.records // args.batches)
        rates: dict[str, list[float]] = {"at-least-once": [], "exactly-once": []}
        commits: list[float] = []
        first_round = 1 if args.no_warm_up else 0
        for round_ in range(first_round, args.repeat + 1):  # round 0 warms up
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
        cluster_down(root / "cluster", sys.stderr)
        if spark is not None and args.spark_kafka:
            spark_kafka_row(spark, args, root)
        if spark is not None:
            spark.stop()


def spark_kafka_row(spark, args, root: Path) -> None:
    """Spark's Kafka connector on Apache Kafka: the same streaming copy, one round."""
    from broker.tools.kafka_peer import ApacheKafkaCluster

    kafka = ApacheKafkaCluster(root / "apache-kafka", brokers=3, overrides={
        "default.replication.factor": "3", "min.insync.replicas": "2", "auto.create.topics.enable": "false"})
    kafka.start()
    try:
        seconds = produce(kafka.bootstrap, "bench-eos-source", args.records, args.value_bytes, args.partitions)
        report("produce to Apache Kafka (setup)", records=args.records, seconds=seconds)
        with AdminClient(kafka.bootstrap) as admin:
            admin.create_topics("bench-kafka-sink", partitions=args.partitions, replication_factor=3)
        per_trigger = max(1, args.records // args.batches)
        df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
              .option("subscribe", "bench-eos-source").option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", str(per_trigger))
              .load().select("value"))
        start = time.perf_counter()
        query = (df.writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                 .option("topic", "bench-kafka-sink").option("checkpointLocation", str(root / "ck-kafka"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None, query.exception()
        elapsed = time.perf_counter() - start
        count = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                 .option("subscribe", "bench-kafka-sink").load().count())
        assert count >= args.records, f"Spark's Kafka sink wrote {count} of {args.records}"
        report("stream copy Spark format(kafka) on Apache Kafka (at-least-once)", records=args.records,
               batches=args.batches, rows_per_s=args.records / elapsed, load_1m=os.getloadavg()[0])
    finally:
        kafka.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--batches", type=int, default=10, help="micro-batches per copy")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--eos-in-flight", type=int, default=None,
                        help="kafka.max.in.flight.requests.per.connection of the exactly-once sink (default 5)")
    parser.add_argument("--spark-kafka", action="store_true",
                        help="add the row of Spark's own Kafka sink writing to Apache Kafka")
    parser.add_argument("--no-warm-up", action="store_true", help="skip round 0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eos-") as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
