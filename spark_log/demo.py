"""End-to-end demonstration of the Spark connector (``make demo``)::

    python -m spark_log.demo [--dir DIR] [--events N] [--keep]

1. starts a local cluster (ZooKeeper + one broker) with ``pylog cluster up`` in a fresh
   directory, on free ports;
2. produces a sample event stream (JSON clicks and purchases, keyed by user) to ``events``;
3. runs a streaming query ``events`` -> parse, enrich -> ``events-enriched`` with a checkpoint and
   ``Trigger.AvailableNow`` (bounded by ``maxOffsetsPerTrigger``), written exactly-once (Kafka
   transactions committed by the driver, ``deliveryGuarantee=exactly-once``; the summary counts
   the output as a read_committed consumer sees it), committing its consumed offsets
   to Kafka's ``__consumer_offsets`` as group ``demo-enrich`` (``offsets.store=kafka``, where
   ``kafka-consumer-groups`` and ``pylog groups describe`` see them);
4. runs an incremental offline load of ``events-enriched`` into Parquet, keeping its place in
   ZooKeeper as group ``demo-offline`` (``offsets.store=zookeeper``);
5. prints a summary (rows, offsets, lag per group) and stops the cluster (``pylog cluster down``).

The cluster is driven through the ``pylog`` command line in a subprocess: the connector's import
rules keep ``spark_log`` away from the broker's tools.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from broker.client import AdminClient, Producer
from broker.client.offset_store import KafkaOffsetStore, ZkOffsetStore

__all__ = ["main"]

EVENTS, ENRICHED = "events", "events-enriched"
PARTITIONS = 3
STREAM_GROUP, OFFLINE_GROUP = "demo-enrich", "demo-offline"
EVENT_SCHEMA = "user string, action string, amount double, ts long"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pylog(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pylog {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _sample_events(count: int) -> pa.Table:
    """Deterministic clicks and purchases of 50 users, as JSON values keyed by user."""
    users = [f"user-{i % 50:02d}" for i in range(count)]
    values = [json.dumps({"user": u, "action": "purchase" if i % 7 == 0 else "click",
                          "amount": round((i % 100) * 1.25, 2) if i % 7 == 0 else 0.0, "ts": 1_700_000_000_000 + i})
              for i, u in enumerate(users)]
    return pa.table({"key": pa.array(users, pa.string()), "value": pa.array(values, pa.string())})


def _produce(bootstrap: str, count: int) -> None:
    with AdminClient(bootstrap) as admin:
        for topic in (EVENTS, ENRICHED):
            admin.create_topics(topic, partitions=PARTITIONS, replication_factor=1)
    with Producer(bootstrap, linger_ms=20, batch_bytes_max=1 << 20) as producer:
        producer.send_arrow(EVENTS, _sample_events(count))
        producer.flush()


def _stream(spark, bootstrap: str, checkpoint: Path) -> list[dict]:
    from pyspark.sql import functions as F

    events = (spark.readStream.format("pylog")
              .option("kafka.bootstrap.servers", bootstrap).option("subscribe", EVENTS)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "4000")
              .option("kafka.group.id", STREAM_GROUP).option("offsets.store", "kafka").load())
    parsed = events.select("key", F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
    enriched = parsed.select(
        "key",
        F.to_json(F.struct(
            "e.user", F.upper("e.action").alias("action"),
            (F.col("e.amount") * 100).cast("long").alias("amount_cents"),
            (F.col("e.action") == "purchase").alias("is_purchase"),
            F.col("e.ts").alias("ts"))).alias("value"))
    query = (enriched.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", ENRICHED).option("checkpointLocation", str(checkpoint))
             .option("deliveryGuarantee", "exactly-once")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return [{"batch": p["batchId"], "rows": p["numInputRows"], "end": p["sources"][0]["endOffset"]}
            for p in query.recentProgress]


def _offline_load(spark, bootstrap: str, zookeeper: str, output: Path) -> tuple[int, dict]:
    from spark_log import offline

    load = offline.plan_load({"kafka.bootstrap.servers": bootstrap, "subscribe": ENRICHED,
                              "kafka.group.id": OFFLINE_GROUP, "offsets.store": "zookeeper",
                              "zookeeper.connect": zookeeper})
    rows = offline.read(spark, load).selectExpr("partition", "offset", "cast(value as string) as value")
    rows.write.mode("append").parquet(str(output))
    offline.commit(load)
    return spark.read.parquet(str(output)).count(), dict(load.end)


def _lag(bootstrap: str, zookeeper: str) -> dict[str, dict]:
    out = {}
    with KafkaOffsetStore(bootstrap) as kafka, ZkOffsetStore(zookeeper) as zk, AdminClient(bootstrap) as admin:
        for group, topic, store, name in ((STREAM_GROUP, EVENTS, kafka, "kafka"),
                                          (OFFLINE_GROUP, ENRICHED, zk, "zookeeper")):
            committed = store.fetch(group, [topic])
            ends = admin.list_offsets(topic, list(range(PARTITIONS)), "latest")
            out[group] = {"store": name, "topic": topic, "committed": sum(committed.values()),
                          "log_end": sum(ends.values()),
                          "lag": sum(ends[p] - committed.get((topic, p), 0) for p in ends)}
    return out


def run(root: Path, events: int, out=sys.stdout) -> dict:
    import spark_log

    port, zk_port = _free_port(), _free_port()
    cluster_dir = root / "cluster"
    started = time.monotonic()
    _pylog("cluster", "up", "--dir", str(cluster_dir), "--brokers", "1", "--port", str(port),
           "--zookeeper-port", str(zk_port), "--set", "transaction.state.log.replication.factor=1",
           "--set", "transaction.state.log.min.isr=1", "--set", "transaction.state.log.num.partitions=5")
    bootstrap, zookeeper = f"127.0.0.1:{port}", f"127.0.0.1:{zk_port}"
    try:
        print(f"cluster up: bootstrap {bootstrap}, ZooKeeper {zookeeper} ({root})", file=out)
        _produce(bootstrap, events)
        print(f"produced {events} events to {EVENTS} ({PARTITIONS} partitions)", file=out)
        spark = spark_log.session(app_name="pylog-demo", **{"spark.ui.enabled": "false",
                                                             "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            batches = _stream(spark, bootstrap, root / "checkpoint")
            for b in batches:
                print(f"  stream batch {b['batch']}: {b['rows']} rows, end {b['end']}", file=out)
            enriched = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap) \
                .option("subscribe", ENRICHED).option("isolation.level", "read_committed").load().count()
            loaded, load_end = _offline_load(spark, bootstrap, zookeeper, root / "parquet")
        finally:
            spark.stop()
        summary = {
            "events_produced": events,
            "stream_batches": len(batches),
            "rows_streamed": sum(b["rows"] for b in batches),
            "rows_in_enriched_topic_read_committed": enriched,
            "rows_in_parquet": loaded,
            "offline_load_end": {f"{t}-{p}": o for (t, p), o in sorted(load_end.items())},
            "groups": _lag(bootstrap, zookeeper),
            "seconds": round(time.monotonic() - started, 1),
        }
        print(json.dumps(summary, indent=2), file=out)
        print(f"note: group {STREAM_GROUP} shows lag: Spark commits source offsets one batch late, so the "
              f"last batch of an AvailableNow run is published by the next run", file=out)
        return summary
    finally:
        _pylog("cluster", "down", "--dir", str(cluster_dir))
        print("cluster down", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_log.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="working directory (default: a new temporary one)")
    parser.add_argument("--events", type=int, default=20_000, help="events to produce (default 20000)")
    args = parser.parse_args(argv)
    if args.events <= 0:
        parser.error("--events must be positive")
    if args.dir is None:
        with tempfile.TemporaryDirectory(prefix="pylog-demo-") as tmp:
            run(Path(tmp), args.events)
    else:
        root = Path(args.dir)
        root.mkdir(parents=True, exist_ok=True)
        run(root, args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
