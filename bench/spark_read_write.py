"""The Spark connector end to end, against Spark's own Parquet reader in the same run.

Setup: ``pylog cluster up`` (ZooKeeper + 1 broker) in a temporary directory; ``--records``
records of ``--value-bytes`` bytes (no key) are produced with ``Producer.send_arrow`` into a
topic of ``--partitions`` partitions; one SparkSession ``local[2]`` (the target machine's two
cores) copies the topic to Parquet with ``spark.read.format("pylog")`` so both sides hold the
same rows.

Measured (median of ``--repeat`` rounds; contenders run interleaved after one warm-up run each,
so load from elsewhere on the machine hits them alike):

- read: ``count(*)`` and ``sum(length(value))`` over ``spark.read.format("pylog")`` and over
  ``spark.read.parquet`` of the same rows; ratio = Parquet time / pylog time (target >= 0.5).
  A third contender, a Python DataSource with pylog's schema that yields the same rows from
  memory, is the ceiling of any Python source: Spark's own cost of taking Arrow batches from a
  Python worker (no column pruning in the Python DataSource API, so all seven columns become
  rows) -- ``parquet_over_ceiling`` is the best ratio a Python source can reach here.
- batch write: ``df.write.format("pylog")`` of the Parquet rows' ``value`` column into a fresh
  one-broker topic, rows/s (target >= 1,000,000).
- streaming write: the same rows through ``readStream.parquet`` -> ``writeStream.format("pylog")``
  with ``Trigger.AvailableNow``, rows/s (target >= 1,000,000).
- write peers, interleaved with the writes: a no-op Python DataSource Arrow writer (batch and
  streaming; it only counts the Arrow batches Spark hands it) is the ceiling of any Python sink
  on this machine: Spark's own cost of reading the Parquet rows, turning them into Arrow batches
  and shipping them to the Python workers. Spark's own Parquet write of the same rows is the
  honest peer of a sink that does real work.

Each write line gives the min, median and max rows/s over the rounds and the 1-minute load
average when the rounds ended (2 cores: a load above ~2 means other work took CPU from the run).

Every run checks its result (row counts, byte sums, the topics' high watermarks). CPU seconds per
role (Spark's JVM, its Python workers, the broker, everything else on the machine) are printed
so "where the time goes" is visible: with two cores, Spark's task threads, its Python workers and
the broker compete for them, and ``cpu_s_other`` shows how much a busy machine took away. The
read ratio is also given over CPU seconds of the run's own processes, which a busy machine
disturbs less than wall time.

Not part of the tests: ``python bench/spark_read_write.py [--records N] [--skip-read]``.
``PYLOG_WRITE_PROFILE_DIR=<dir>`` in the environment makes every pylog write task dump a
cProfile (thread CPU time) there (``spark_log.sink``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from _report import report  # noqa: E402
from broker.client import AdminClient, Producer  # noqa: E402
from broker.tools.cluster import cluster_down, cluster_up  # noqa: E402
from broker.tools.zookeeper import find_free_port  # noqa: E402

TARGET_READ_RATIO = 0.5
TARGET_WRITE_ROWS_PER_S = 1_000_000
CHUNK_ROWS = 250_000
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: str, with_children: bool) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if with_children:  # workers the Python daemon forked and already reaped
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _CLOCK_TICKS


def cpu_by_role(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of Spark's JVM, its Python workers, the broker, and everything else
    (other work on the machine, which slows a run down without being part of it)."""
    out = {"jvm": 0.0, "python_workers": 0.0, "broker": 0.0, "other": 0.0}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if int(pid) == broker_pid:
                out["broker"] += _proc_cpu(pid, False)
            elif b"org.apache.spark.deploy.SparkSubmit" in cmd:
                out["jvm"] += _proc_cpu(pid, False)
            elif b"pyspark.daemon" in cmd or b"pyspark.worker" in cmd or b"pyspark.sql.worker" in cmd:
                out["python_workers"] += _proc_cpu(pid, b"pyspark.daemon" in cmd)
            elif int(pid) != os.getpid():
                out["other"] += _proc_cpu(pid, False)
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return out


class Meter:
    """Wall time and CPU seconds per role of one measured call."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid

    def run(self, fn):
        before, t0 = cpu_by_role(self.broker_pid), time.perf_counter()
        result = fn()
        wall = time.perf_counter() - t0
        after = cpu_by_role(self.broker_pid)
        return result, wall, {k: after[k] - before[k] for k in after}


def _values(rows: int, size: int, seed: int) -> pa.Array:
    """``rows`` distinct-looking values of ``size`` bytes (not compressible, not all equal)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(32, 127, rows * size, dtype=np.uint8)
    offsets = np.arange(0, (rows + 1) * size, size, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def produce(bootstrap: str, topic: str, records: int, value_bytes: int, partitions: int) -> float:
    with AdminClient(bootstrap) as admin:
        admin.create_topics(topic, partitions=partitions, replication_factor=1)
    start = time.perf_counter()
    with Producer(bootstrap, acks=1, enable_idempotence=False, linger_ms=5, batch_bytes_max=1 << 20) as producer:
        for i, first in enumerate(range(0, records, CHUNK_ROWS)):
            rows = min(CHUNK_ROWS, records - first)
            table = pa.table({"value": _values(rows, value_bytes, i)})
            for p in range(partitions):  # round robin in blocks: equal partitions
                part = table.slice(p * rows // partitions, (p + 1) * rows // partitions - p * rows // partitions)
                producer.send_arrow(topic, part, partition=p)
        producer.flush()
    return time.perf_counter() - start


def high_watermarks(bootstrap: str, topic: str) -> int:
    with AdminClient(bootstrap) as admin:
        return sum(admin.list_offsets(topic, None, "latest").values())


def read_agg(df):
    from pyspark.sql import functions as F

    row = df.agg(F.count("*").alias("rows"), F.sum(F.length("value")).alias("bytes")).first()
    return row.rows, row.bytes


def measure(meter: Meter, runs: dict, repeat: int) -> dict:
    """Run each named call once to warm up, then ``repeat`` rounds of all of them interleaved
    (so load from elsewhere on the machine hits every contender alike). Per name: the first
    result, the median wall time and the median CPU seconds per role."""
    for fn in runs.values():
        fn()
    samples: dict = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            samples[name].append(meter.run(fn))
    out = {}
    for name, results in samples.items():
        roles = results[0][2].keys()
        out[name] = {"result": results[0][0], "seconds": statistics.median(r[1] for r in results),
                     "seconds_min": min(r[1] for r in results), "seconds_max": max(r[1] for r in results),
                     "cpu": {k: statistics.median(r[2][k] for r in results) for k in roles}}
    return out


def _memory_source(records: int, value_bytes: int, partitions: int, batch_rows: int = 37_000):
    """A Python DataSource with pylog's schema whose readers yield Arrow batches built in memory
    (no broker, no decoding): what Spark itself costs to take a Python source's rows -- the
    ceiling of any Python DataSource read on this machine, and the honest peer for how much of
    pylog's read time is pylog's. Same rows per partition and about the batch size pylog's
    reader yields (4 MiB fetches of 100-byte records)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_log.schema import source_schema

    class MemoryReader(DataSourceReader):
        def partitions(self):
            share = [records // partitions + (1 if i < records % partitions else 0) for i in range(partitions)]
            return [InputPartition((i, n)) for i, n in enumerate(share)]

        def read(self, partition):
            index, count = partition.value
            values = _values(min(batch_rows, count), value_bytes, seed=index)
            topic = pa.array(["bench-read"] * len(values), pa.string())
            done = 0
            while done < count:
                n = min(batch_rows, count - done)
                offsets = pa.array(np.arange(done, done + n, dtype=np.int64))
                yield pa.RecordBatch.from_arrays([
                    pa.nulls(n, pa.binary()), values.slice(0, n), topic.slice(0, n),
                    pa.array(np.full(n, index, np.int32)), offsets,
                    pa.array(np.full(n, 1_700_000_000_000, np.int64)).cast(pa.timestamp("ms")).cast(pa.timestamp("us", tz="UTC")),
                    pa.array(np.zeros(n, np.int32))],
                    names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])
                done += n

    class MemorySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pylog_bench_memory"

        def schema(self):
            return source_schema()

        def reader(self, schema):
            return MemoryReader()

    return MemorySource


def _noop_source():
    """A Python DataSource whose Arrow writers only count rows: the ceiling of a Python sink."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceStreamArrowWriter,
        WriterCommitMessage,
    )

    def count(iterator) -> WriterCommitMessage:
        for _batch in iterator:
            pass
        return WriterCommitMessage()

    class NoopWriter(DataSourceArrowWriter):
        def write(self, iterator):
            return count(iterator)

    class NoopStreamWriter(DataSourceStreamArrowWriter):
        def write(self, iterator):
            return count(iterator)

        def commit(self, messages, batchId) -> None:
            pass

        def abort(self, messages, batchId) -> None:
            pass

    class NoopDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pylog_bench_noop"

        def writer(self, schema, overwrite):
            return NoopWriter()

        def streamWriter(self, schema, overwrite):
            return NoopStreamWriter()

    return NoopDataSource


def _cpu_fields(cpu: dict) -> dict:
    return {f"cpu_s_{k}": v for k, v in cpu.items()}


def run(args, root: Path) -> None:
    import spark_log

    port, zk_port = find_free_port(), find_free_port()
    cluster_up(root / "cluster", 1, port, zk_port, [], sys.stderr)
    bootstrap = f"127.0.0.1:{port}"
    meter = Meter(int((root / "cluster" / "run" / "broker-0.pid").read_text().split()[0]))
    spark = None
    try:
        seconds = produce(bootstrap, "bench-read", args.records, args.value_bytes, args.partitions)
        assert high_watermarks(bootstrap, "bench-read") == args.records
        report("produce (send_arrow, setup)", records=args.records, seconds=seconds,
               records_per_s=args.records / seconds)
        spark = spark_log.session(app_name="bench", master="local[2]", **{
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("ERROR")
        source = (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "bench-read").load())
        parquet = str(root / "parquet")
        source.write.mode("overwrite").parquet(parquet)

        if not args.skip_read:
            measure_read(args, meter, spark, source, parquet)
        if not args.skip_write:
            measure_write(args, meter, spark, bootstrap, root, parquet)
    finally:
        if spark is not None:
            spark.stop()
        cluster_down(root / "cluster", sys.stderr)


def measure_read(args, meter: Meter, spark, source, parquet: str) -> None:
    expected = (args.records, args.records * args.value_bytes)
    spark.dataSource.register(_memory_source(args.records, args.value_bytes, args.partitions))
    memory = spark.read.format("pylog_bench_memory").load()
    reads = measure(meter, {"pylog": lambda: read_agg(source),
                            "parquet": lambda: read_agg(spark.read.parquet(parquet)),
                            "memory": lambda: read_agg(memory)}, args.repeat)
    ceiling = reads["memory"]
    assert ceiling["result"] == expected, (ceiling["result"], expected)
    pylog, peer = reads["pylog"], reads["parquet"]
    assert pylog["result"] == expected == peer["result"], (pylog["result"], peer["result"], expected)
    ratio = peer["seconds"] / pylog["seconds"]
    own = [k for k in pylog["cpu"] if k != "other"]
    cpu_ratio = sum(peer["cpu"][k] for k in own) / sum(pylog["cpu"][k] for k in own)
    report("spark read pylog", rows=args.records, seconds=pylog["seconds"],
           rows_per_s=args.records / pylog["seconds"], **_cpu_fields(pylog["cpu"]))
    report("spark read parquet (peer)", rows=args.records, seconds=peer["seconds"],
           rows_per_s=args.records / peer["seconds"], **_cpu_fields(peer["cpu"]))
    report("  Python source from memory (ceiling)", rows=args.records, seconds=ceiling["seconds"],
           rows_per_s=args.records / ceiling["seconds"], **_cpu_fields(ceiling["cpu"]))
    report("spark read ratio", parquet_over_pylog=ratio, cpu_parquet_over_pylog=cpu_ratio,
           parquet_over_ceiling=peer["seconds"] / ceiling["seconds"],
           pylog_of_ceiling=ceiling["seconds"] / pylog["seconds"],
           target=TARGET_READ_RATIO, met=ratio >= TARGET_READ_RATIO, load_1m=os.getloadavg()[0])


def measure_write(args, meter: Meter, spark, bootstrap: str, root: Path, parquet: str) -> None:
    spark.dataSource.register(_noop_source())
    values = spark.read.parquet(parquet).select("value")
    schema = spark.read.parquet(parquet).schema
    names = iter(range(1_000_000))
    producer_options = {"kafka.bootstrap.servers": bootstrap, "kafka.acks": "1", **dict(args.sink_option)}

    def fresh_topic(kind: str) -> str:
        topic = f"bench-{kind}-{next(names)}"
        with AdminClient(bootstrap) as admin:
            admin.create_topics(topic, partitions=1, replication_factor=1)
        return topic

    def batch_write():
        topic = fresh_topic("write")
        values.write.format("pylog").mode("append").options(**producer_options).option("topic", topic).save()
        return high_watermarks(bootstrap, topic)

    def batch_noop():
        values.write.format("pylog_bench_noop").mode("append").save()
        return args.records

    def batch_parquet():
        values.write.mode("overwrite").parquet(str(root / "parquet-out"))
        return spark.read.parquet(str(root / "parquet-out")).count()

    def stream(fmt: str, options: dict, topic: str | None) -> None:
        writer = (spark.readStream.schema(schema).parquet(parquet).select("value")
                  .writeStream.format(fmt).options(**options)
                  .option("checkpointLocation", str(root / f"checkpoint-{next(names)}")))
        if topic is not None:
            writer = writer.option("topic", topic)
        writer.trigger(availableNow=True).start().awaitTermination()

    def stream_write():
        topic = fresh_topic("stream")
        stream("pylog", producer_options, topic)
        return high_watermarks(bootstrap, topic)

    def stream_noop():
        stream("pylog_bench_noop", {}, None)
        return args.records

    runs = {"batch": batch_write, "batch_noop": batch_noop, "batch_parquet": batch_parquet,
            "stream": stream_write, "stream_noop": stream_noop}
    writes = measure(meter, runs, args.repeat)
    load = os.getloadavg()[0]
    names_out = {"batch": "spark batch write pylog", "batch_noop": "  no-op Python writer (ceiling)",
                 "batch_parquet": "  parquet write (peer)", "stream": "spark stream write pylog",
                 "stream_noop": "  no-op Python stream writer"}
    for kind, w in writes.items():
        assert w["result"] == args.records, (kind, w["result"])
        rate = args.records / w["seconds"]
        fields = {"rows": args.records, "seconds": w["seconds"], "rows_per_s": rate,
                  "rows_per_s_min": args.records / w["seconds_max"],
                  "rows_per_s_max": args.records / w["seconds_min"]}
        if kind in ("batch", "stream"):
            fields.update(target=TARGET_WRITE_ROWS_PER_S, met=rate >= TARGET_WRITE_ROWS_PER_S,
                          of_ceiling=rate / (args.records / writes[f"{kind}_noop"]["seconds"]))
        report(names_out[kind], **fields, load_1m=load, **_cpu_fields(w["cpu"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2, help="of the read topic (default 2: one per core)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    parser.add_argument("--skip-read", action="store_true", help="measure the writes only")
    parser.add_argument("--skip-write", action="store_true", help="measure the read only")
    parser.add_argument("--sink-option", action="append", default=[], type=lambda t: tuple(t.split("=", 1)),
                        metavar="KEY=VALUE", help="extra pylog sink option, e.g. kafka.compression.type=lz4")
    args = parser.parse_args(argv)
    if args.dir:
        root = Path(args.dir)
        root.mkdir(parents=True, exist_ok=True)
        run(args, root)
    else:
        with tempfile.TemporaryDirectory(prefix="pylog-bench-spark-") as tmp:
            run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
