"""Client throughput against one pylog broker, ours against confluent-kafka in the same run.

    python bench/client_produce_consume.py [--records 1000000] [--repeat 3] [--bootstrap-server H:P]

Without ``--bootstrap-server`` a throwaway ZooKeeper + broker is started (``broker.tools.perf_local``;
``--broker-root DIR`` runs the broker from another source tree). Every measurement alternates ours
and the peer, ``--repeat`` rounds, and reports the median (with min and max) and the ratio; the load
average is printed with each line because the box is shared.

Produce (100-byte values, acks=1, batch.size 1 MiB, linger.ms 5, one partition, no idempotence):
- ours, Arrow: ``Producer.send_arrow`` of 100,000-row tables, then ``flush``;
- ours, records: one ``Producer.produce`` per record (no handle, as confluent-kafka's), then
  ``flush``; and one ``Producer.send`` per record (a ``Delivery`` handle each);
- peer: confluent-kafka ``Producer.produce`` per record (``poll(0)`` when its queue is full), ``flush``.

Consume (the same records, one partition, max.partition.fetch.bytes 1 MiB for both):
- ours: ``Consumer.poll_arrow`` until every record is in Arrow (Spark's Kafka schema);
- peer: confluent-kafka ``Consumer.consume(10000)`` in a loop, building the same Arrow table from
  each batch of messages (key, value, topic, partition, offset, timestamp, timestampType).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import confluent_kafka  # noqa: E402
import pyarrow as pa  # noqa: E402

from _report import report  # noqa: E402
from broker.client import AdminClient, Consumer, Producer  # noqa: E402
from broker.records.arrow import SPARK_KAFKA_SCHEMA  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402

VALUE = b"x" * 100
PARTITION_FETCH_BYTES = 1 << 20


def load() -> str:
    return "%.2f" % os.getloadavg()[0]


# ---------------------------------------------------------------------------------- produce


def ours_arrow(bootstrap: str, topic: str, n: int) -> float:
    chunk = 100_000
    table = pa.table({"value": pa.array([VALUE] * chunk, pa.binary())})
    with Producer(bootstrap, acks=1, linger_ms=5, batch_bytes_max=1 << 20, buffer_bytes_max=64 << 20) as p:
        p.partitions_for(topic)
        start = time.perf_counter()
        for offset in range(0, n, chunk):
            p.send_arrow(topic, table.slice(0, min(chunk, n - offset)), partition=0)
        p.flush()
        return time.perf_counter() - start


def ours_records(bootstrap: str, topic: str, n: int, api: str = "send") -> float:
    """One ``Producer.send`` (or ``Producer.produce``, ``api``) per record, then ``flush``."""
    with Producer(bootstrap, acks=1, linger_ms=5, batch_bytes_max=1 << 20, buffer_bytes_max=64 << 20) as p:
        p.partitions_for(topic)
        call = getattr(p, api)
        start = time.perf_counter()
        for _ in range(n):
            call(topic, VALUE, partition=0)
        p.flush()
        return time.perf_counter() - start


def peer_produce(bootstrap: str, topic: str, n: int) -> float:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                                  "batch.size": 1 << 20, "queue.buffering.max.messages": 2_000_000,
                                  "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False})
    p.list_topics(topic, timeout=10)
    produce = p.produce
    start = time.perf_counter()
    for _ in range(n):
        try:
            produce(topic, VALUE, partition=0)
        except BufferError:
            p.poll(0.001)
            produce(topic, VALUE, partition=0)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - start
    assert remaining == 0, f"confluent-kafka left {remaining} messages undelivered"
    return elapsed


# ---------------------------------------------------------------------------------- consume


def ours_consume(bootstrap: str, topic: str, n: int) -> float:
    with Consumer(bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=PARTITION_FETCH_BYTES) as c:
        c.assign([(topic, 0)])
        c.seek_to_beginning()
        start = time.perf_counter()
        got = 0
        while got < n:
            got += c.poll_arrow(timeout_ms=1000, max_records=n - got).num_rows
        return time.perf_counter() - start


def peer_consume(bootstrap: str, topic: str, n: int) -> float:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-peer",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
                                  "fetch.max.bytes": 52_428_800,
                                  "isolation.level": "read_uncommitted"})  # as ours (its default is committed)
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        start = time.perf_counter()
        got = 0
        while got < n:
            messages = c.consume(num_messages=min(10_000, n - got), timeout=1.0)
            if messages:
                got += _to_arrow(messages).num_rows
        return time.perf_counter() - start
    finally:
        c.close()


def _to_arrow(messages) -> pa.RecordBatch:
    timestamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([m.topic() for m in messages], pa.string()),
        pa.array([m.partition() for m in messages], pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([t[1] * 1000 for t in timestamps], pa.timestamp("us", tz="UTC")),
        pa.array([0 if t[0] == confluent_kafka.TIMESTAMP_CREATE_TIME else 1 for t in timestamps], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SPARK_KAFKA_SCHEMA)


# ---------------------------------------------------------------------------------- driver


def measure(name: str, runs: dict, n: int) -> dict:
    rates = {k: [n / t for t in v] for k, v in runs.items()}
    out = {}
    for key, values in rates.items():
        out[key] = statistics.median(values)
        report(f"{name}: {key}", records_per_s=statistics.median(values), min=min(values),
               max=max(values), mb_per_s=statistics.median(values) * len(VALUE) / 1e6, runs=len(values),
               load=load())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--broker-root", default=None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=("produce", "consume"), default=None,
                        help="run one half of the benchmark")
    args = parser.parse_args()
    cluster = None
    if args.bootstrap_server is None:
        cluster = LocalCluster(1, broker_root=args.broker_root).start()
    bootstrap = args.bootstrap_server or cluster.bootstrap
    try:
        tag = str(int(time.time()))
        produce_topic, consume_topic = f"bench-produce-{tag}", f"bench-consume-{tag}"
        with AdminClient(bootstrap) as admin:
            for topic in (produce_topic, consume_topic):
                admin.create_topics(topic, partitions=1, replication_factor=1)
        n = args.records
        print(f"records={n} value_bytes={len(VALUE)} load={load()}", flush=True)
        if args.only != "consume":
            produce(bootstrap, produce_topic, n, args.repeat)
        if args.only != "produce":
            consume(bootstrap, consume_topic, n, args.repeat)
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


def produce(bootstrap: str, produce_topic: str, n: int, repeat: int) -> None:
    ours_arrow(bootstrap, produce_topic, min(n, 200_000))  # warm-up: codec compilation cache
    runs = {"ours_send_arrow": [], "confluent_produce": [], "ours_produce": [], "ours_send": []}
    for _ in range(repeat):
        runs["ours_send_arrow"].append(ours_arrow(bootstrap, produce_topic, n))
        runs["confluent_produce"].append(peer_produce(bootstrap, produce_topic, n))
        runs["ours_produce"].append(ours_records(bootstrap, produce_topic, n, api="produce"))
        runs["ours_send"].append(ours_records(bootstrap, produce_topic, n))
    produced = measure("produce acks=1", runs, n)
    report("produce ratio", arrow_vs_confluent=produced["ours_send_arrow"] / produced["confluent_produce"],
           produce_vs_confluent=produced["ours_produce"] / produced["confluent_produce"],
           send_vs_confluent=produced["ours_send"] / produced["confluent_produce"])


def consume(bootstrap: str, consume_topic: str, n: int, repeat: int) -> None:
    ours_arrow(bootstrap, consume_topic, n)
    runs = {"ours_poll_arrow": [], "confluent_consume_to_arrow": []}
    ours_consume(bootstrap, consume_topic, min(n, 100_000))  # warm-up
    for _ in range(repeat):
        runs["ours_poll_arrow"].append(ours_consume(bootstrap, consume_topic, n))
        runs["confluent_consume_to_arrow"].append(peer_consume(bootstrap, consume_topic, n))
    consumed = measure("consume to Arrow", runs, n)
    report("consume ratio", ours_vs_confluent=consumed["ours_poll_arrow"] / consumed["confluent_consume_to_arrow"])


if __name__ == "__main__":
    sys.exit(main())
