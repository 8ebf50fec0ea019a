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

``--spark-kafka``: also the peer row, Spark's own Kafka connector (``format("kafka")``,
spark-sql-kafka-0-10 from ``make setup``; at-least-once) copying the same records between two
topics of an Apache Kafka 4.1.1 cluster of 3 KRaft nodes (RF 3, min ISR 2) on the same machine,
same batches, read_committed source, ``--repeat`` rounds too; run after the pylog rounds, with
the pylog cluster down (never both clusters at once). Every copy prints its own line (wall time
included); the end prints the medians of every system and the ratios (exactly-once /
at-least-once: target >= 0.8; each pylog mode / Spark's Kafka sink).
``--no-warm-up`` skips round 0 (a 10 M run cannot afford it).

The issue's run, on a quiet machine (medians of 3 per system, one command):
``python bench/spark_exactly_once.py --records 10000000 --repeat 3 --no-warm-up --spark-kafka``.
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
    rates: dict[str, list[float]] = {"at-least-once": [], "exactly-once": []}
    commits: list[dict] = []
    spark = None
    try:
        try:
            seconds = produce(bootstrap, "bench-eos-source", args.records, args.value_bytes, args.partitions)
            report("produce (setup)", records=args.records, seconds=seconds)
            spark = session(args)
            pylog_rounds(spark, args, root, bootstrap, rates, commits, times_file)
        finally:
            cluster_down(root / "cluster", sys.stderr)
        if args.spark_kafka:
            rates["Spark format(kafka) on Apache Kafka"] = spark_kafka_rounds(spark, args, root)
    finally:
        if spark is not None:
            spark.stop()
    summarize(args, rates, commits)


def session(args):
    import spark_log

    conf = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": "2"}
    if args.spark_kafka:
        conf["spark.jars"] = ",".join(str(j) for j in spark_kafka_jars())
    spark = spark_log.session(app_name="bench-eos", master="local[2,4]", **conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def pylog_rounds(spark, args, root: Path, bootstrap: str, rates: dict, commits: list, times_file: Path) -> None:
    """The pylog copies, both modes interleaved per round (rows/s and commit times appended)."""
    per_trigger = max(1, args.records // args.batches)
    first_round = 1 if args.no_warm_up else 0
    for round_ in range(first_round, args.repeat + 1):  # round 0 warms up
        for guarantee in ("at-least-once", "exactly-once"):
            sink = f"bench-eos-{guarantee}-{round_}"
            with AdminClient(bootstrap) as admin:
                admin.create_topics(sink, partitions=args.partitions, replication_factor=3)
            times_file.unlink(missing_ok=True)
            elapsed = copy(spark, bootstrap, "bench-eos-source", sink, str(root / f"ck-{sink}"),
                           guarantee, per_trigger, args.eos_in_flight)
            assert committed_records(spark, bootstrap, sink) == args.records, f"{sink}: wrong record count"
            report(f"  round {round_} pylog {guarantee}", records=args.records, seconds=elapsed,
                   rows_per_s=args.records / elapsed, load_1m=os.getloadavg()[0])
            if round_:
                rates[guarantee].append(args.records / elapsed)
                if guarantee == "exactly-once":
                    commits += [commit_line(line) for line in times_file.read_text().split("\n") if line]


def commit_line(line: str) -> dict:
    """One line of the sink's ``PYLOG_SPARK_COMMIT_TIMES`` file: ``<batch> <ms> pid=<pid>
    <phase>=<ms since the commit began> ...`` (spark_log/sink.py)."""
    batch, ms, *fields = line.split()
    out = {"ms": float(ms)}
    for field in fields:
        name, _, value = field.partition("=")
        out[name] = int(value) if name == "pid" else float(value)
    return out


def summarize(args, rates: dict[str, list[float]], commits: list[dict]) -> None:
    """Medians per system, then the ratios the issue asks for."""
    load = os.getloadavg()[0]
    for system, values in rates.items():
        report(f"stream copy {system}", records=args.records, batches=args.batches, rounds=len(values),
               rows_per_s_median=statistics.median(values), rows_per_s_min=min(values),
               rows_per_s_max=max(values), load_1m=load)
    eos, alo = statistics.median(rates["exactly-once"]), statistics.median(rates["at-least-once"])
    times = sorted(c["ms"] for c in commits)
    report("exactly-once vs at-least-once", ratio=eos / alo, target=0.8,
           commit_ms_p50=times[len(times) // 2], commit_ms_p90=times[int(len(times) * 0.9)],
           commit_ms_max=times[-1], commits=len(times), target_p50_ms=50)
    # Where the commit's time goes inside Spark, and how many Python processes ran the commits
    # (each new one starts without the driver-side clients that spark_log.transactions keeps).
    phases = {name: statistics.median(c[name] for c in commits if name in c)
              for name in ("checked", "intent", "ended", "swept") if any(name in c for c in commits)}
    report("  exactly-once commit phases (ms since it began, p50)", **phases,
           python_processes=len({c.get("pid") for c in commits}))
    peer = rates.get("Spark format(kafka) on Apache Kafka")
    if peer:
        report("pylog vs Spark format(kafka) on Apache Kafka", exactly_once_ratio=eos / statistics.median(peer),
               at_least_once_ratio=alo / statistics.median(peer))


def spark_kafka_rounds(spark, args, root: Path) -> list[float]:
    """Spark's Kafka connector on Apache Kafka: the same streaming copy, ``--repeat`` rounds
    (each into a fresh sink topic, from the same source); rows/s per round."""
    from broker.tools.kafka_peer import ApacheKafkaCluster

    kafka = ApacheKafkaCluster(root / "apache-kafka", brokers=3, overrides={
        "default.replication.factor": "3", "min.insync.replicas": "2", "auto.create.topics.enable": "false"})
    kafka.start()
    rates = []
    try:
        seconds = produce(kafka.bootstrap, "bench-eos-source", args.records, args.value_bytes, args.partitions)
        report("produce to Apache Kafka (setup)", records=args.records, seconds=seconds)
        per_trigger = max(1, args.records // args.batches)
        for round_ in range(1, args.repeat + 1):
            sink = f"bench-kafka-sink-{round_}"
            with AdminClient(kafka.bootstrap) as admin:
                admin.create_topics(sink, partitions=args.partitions, replication_factor=3)
            df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                  .option("subscribe", "bench-eos-source").option("startingOffsets", "earliest")
                  .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", str(per_trigger))
                  .load().select("value"))
            start = time.perf_counter()
            query = (df.writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                     .option("topic", sink).option("checkpointLocation", str(root / f"ck-kafka-{round_}"))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            assert query.exception() is None, query.exception()
            elapsed = time.perf_counter() - start
            count = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                     .option("subscribe", sink).load().count())
            assert count >= args.records, f"Spark's Kafka sink wrote {count} of {args.records}"
            report(f"  round {round_} Spark format(kafka) on Apache Kafka", records=args.records, seconds=elapsed,
                   rows_per_s=args.records / elapsed, load_1m=os.getloadavg()[0])
            rates.append(args.records / elapsed)
    finally:
        kafka.stop()
    return rates


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
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-eos-") as tmp:
        run(args, Path(tmp))
    report("bench wall time", seconds=time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
