"""pylog beside Apache Kafka: Kreps's 2014 benchmark table, both systems in one run.

The table is the one of Kreps (2014), "Benchmarking Apache Kafka: 2 Million Writes Per Second
(On Three Cheap Machines)", run on both systems on one machine.

    python bench/kafka_side_by_side.py [--quick] [--rounds N] [--out DIR] [--plot FILE.png]

Both systems are started here, on free loopback ports under one temporary directory, and stopped
at the end: first a one-broker pylog (ZooKeeper + ``python -m broker.server``) and a one-broker
Apache Kafka (KRaft, the fetched 4.1 jars, ``kafka-server-start.sh``'s JVM flags), then three
brokers of each. Every row runs the same client against pylog, then against Kafka, so both see
about the same load on this shared machine; the 1-minute load average is printed with each row.
``--rounds N`` repeats the producer, consumer and latency rows N times, alternating which system
goes first, and reports the median with the min-max of each system (on a shared machine one
sample per row moves by tens of percent).

Rows (100-byte values unless said; 6 partitions; producers: acks as listed, idempotence off so
that only acks differs, linger.ms 5, batch.size 128 KiB, no compression):

- producer, 1 broker, no replication (acks=1); 1,000 partitions vs 6; 1 KB and 4 KB records;
  throughput versus stored data (one producer writing for ``--stored-s`` seconds, the tool's
  5-second windows, plotted);
- producer, 3 brokers, RF=3 (min.insync.replicas 2): acks=1 ("async"), acks=all ("sync"),
  3 producers at once (acks=1, rates summed);
- consumer: 1 consumer (all 6 partitions), 3 consumers (2 partitions each, rates over the
  slowest one's time), producer and consumer at once;
- end-to-end latency p50/p99/p99.9: one record at a time (Kafka's ``EndToEndLatency``), acks=1.

Clients, the same on both systems: Kafka's ``kafka-producer-perf-test`` and ``EndToEndLatency``
(Java, full JIT); ``pylog perf produce`` (Arrow path) and ``pylog perf e2e``; for consuming,
confluent-kafka and pylog's client with ``assign()`` (``bench/_sbs_consume.py``), because
``kafka-consumer-perf-test`` subscribes with a group and pylog has no group coordinator yet.
Ratios are pylog / Kafka (for latencies, lower is better). A row whose client failed or ran
out of time says so and the run goes on. ``--quick`` is the same table with about a seventh of
the records: 5.5 minutes at load 10-18 on 2 cores, mostly starting JVMs. The default took
16 minutes at load 15-20.

Output: the table (human lines, ``JSON`` lines as every bench prints), and under ``--out``:
``results.json``, ``table.md`` and the stored-data plot (``--plot`` to put it elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _sbs_tools as tools  # noqa: E402
from _report import report  # noqa: E402

SYSTEMS = ("pylog", "kafka")
PARTITIONS = 6
PRODUCER = {"enable.idempotence": "false", "linger.ms": "5", "batch.size": "131072", "compression.type": "none"}


@dataclass(frozen=True)
class Sizes:
    records: int          # 100-byte records per single-broker producer row
    records_rf3: int      # per RF=3 producer row
    records_1000p: int
    records_1kb: int
    records_4kb: int
    records_each_of_3: int
    records_both: int     # producer and consumer at once
    e2e_records: int
    stored_s: float       # the stored-data curve: seconds of writing per system
    stored_bytes_max: int
    timeout_s: float      # per client run


    warm_up_records: int  # written to each cluster before its rows (JIT, page cache, connections)


FULL = Sizes(2_000_000, 600_000, 1_000_000, 200_000, 50_000, 300_000, 1_000_000, 5_000, 75.0, 8 << 30, 240.0,
             1_000_000)
QUICK = Sizes(300_000, 100_000, 200_000, 30_000, 8_000, 60_000, 200_000, 1_000, 15.0, 2 << 30, 90.0, 200_000)


@dataclass
class Row:
    name: str
    client: str
    unit: str
    values: dict = field(default_factory=dict)   # system -> number or error text
    lower_is_better: bool = False
    load: float = 0.0
    note: str = ""

    @property
    def ratio(self) -> float | None:
        pylog, kafka = self.values.get("pylog"), self.values.get("kafka")
        if not isinstance(pylog, (int, float)) or not isinstance(kafka, (int, float)) or not kafka:
            return None
        return pylog / kafka


class Bench:
    def __init__(self, sizes: Sizes, rounds: int = 1) -> None:
        self.sizes = sizes
        self.rounds = rounds
        self.rows: list[Row] = []
        self.curves: dict[str, list[dict]] = {}

    def warm_up(self, systems: tools.Systems, replication: int) -> None:
        """Both brokers see some load before the first row: Kafka's JIT compiles its hot paths
        (C2) and both fill their caches, so the first row does not measure a cold JVM."""
        for system in SYSTEMS:
            systems.create_topic(system, "warm-up", PARTITIONS, replication)
            try:
                tools.java_producer_perf(systems.bootstrap(system), "warm-up", self.sizes.warm_up_records, 100,
                                         {**PRODUCER, "acks": "1"}, self.sizes.timeout_s)
            except tools.ToolFailed as exc:
                print(f"  warm-up on {system}: {exc}", file=sys.stderr, flush=True)

    def measure(self, name: str, client: str, unit: str, run, lower_is_better: bool = False,
                note: str = "") -> Row:
        """``run(system) -> number`` on both systems, ``rounds`` times, the order alternating
        (pylog first in odd rounds); the cell is the median. A failure becomes the cell's text."""
        row = Row(name, client, unit, lower_is_better=lower_is_better, load=tools.load_average(), note=note)
        samples = self.alternate(lambda system: run(system), name)
        for system in SYSTEMS:
            row.values[system] = _median_or_failure(samples[system])
        if self.rounds > 1:
            row.note += f"{'; ' if row.note else ''}median of {self.rounds} (" + ", ".join(
                f"{system} {_spread(samples[system], unit)}" for system in SYSTEMS) + ")"
        self.add(row)
        return row

    def alternate(self, run, name: str) -> dict[str, list]:
        """``{system: [result or failure text per round]}``, alternating which system goes first."""
        samples: dict[str, list] = {system: [] for system in SYSTEMS}
        for number in range(self.rounds):
            for system in (SYSTEMS if number % 2 == 0 else SYSTEMS[::-1]):
                try:
                    samples[system].append(run(system))
                except tools.ToolFailed as exc:
                    samples[system].append(f"failed: {str(exc).splitlines()[0][:120]}")
                    print(f"  {name} on {system}: {exc}", file=sys.stderr, flush=True)
        return samples

    def add(self, row: Row) -> None:
        self.rows.append(row)
        report(f"{row.name} [{row.client}]", unit=row.unit, pylog=row.values.get("pylog"),
               kafka=row.values.get("kafka"), ratio=None if row.ratio is None else round(row.ratio, 3),
               load=row.load)


# ------------------------------------------------------------------------------- one broker


def single_broker(bench: Bench, systems: tools.Systems) -> None:
    s = bench.sizes
    for system in SYSTEMS:
        for topic, partitions in (("p6", 6), ("p6-pylog-perf", 6), ("p1000", 1000), ("kb1", 6), ("kb4", 6),
                                  ("stored", 6), ("both", 6), ("e2e", 1), ("e2e-pylog-perf", 1)):
            systems.create_topic(system, topic, partitions, 1)
    acks1 = {**PRODUCER, "acks": "1"}
    bench.warm_up(systems, 1)

    def java_produce(topic: str, records: int, size: int, props=acks1, field_="records_per_sec"):
        return lambda system: tools.java_producer_perf(systems.bootstrap(system), topic, records, size, props,
                                                       s.timeout_s)[field_]

    six = bench.measure("1 producer, no replication", "kafka-producer-perf-test", "records/s",
                        java_produce("p6", s.records, 100), note="acks=1, 1 broker, 6 partitions")
    bench.measure("1 producer, no replication", "pylog perf produce", "records/s",
                  pylog_produce(systems, "p6-pylog-perf", s.records, 100, "1", s.timeout_s),
                  note=_PYLOG_PERF_NOTE)
    thousand = bench.measure("1 producer, 1,000 partitions", "kafka-producer-perf-test", "records/s",
                             java_produce("p1000", s.records_1000p, 100), note="acks=1, 1 broker")
    thousand.note += "; vs 6 partitions: " + ", ".join(
        f"{system} {_ratio_text(thousand.values.get(system), six.values.get(system))}" for system in SYSTEMS)
    for topic, size, records in (("kb1", 1024, s.records_1kb), ("kb4", 4096, s.records_4kb)):
        bench.measure(f"1 producer, {size // 1024} KB records", "kafka-producer-perf-test", "MB/s",
                      java_produce(topic, records, size, field_="mb_per_sec"), note="acks=1, 1 broker")
    stored_curve(bench, systems)
    consumers(bench, systems, "p6", s.records)
    produce_and_consume(bench, systems, acks1)
    end_to_end(bench, systems)


# pylog's client sends Arrow-encoded batches whose baseOffset counts on from the previous batch
# of the call; Kafka 4.1 rejects those ("The baseOffset of the record batch in the append to
# t-0 should be 0", INVALID_RECORD), so the Arrow path cannot be measured against Kafka: the
# record path (one ``produce`` per record, what Kafka's perf tool does) runs on both.
_PYLOG_PERF_NOTE = "--api record (one produce() per record); acks as the row says"


def pylog_produce(systems: tools.Systems, topic: str, records: int, size: int, acks: str, timeout_s: float):
    props = [f"{k}={v}" for k, v in PRODUCER.items()]

    def run(system: str) -> float:
        result = tools.pylog_perf("produce", ["--bootstrap-server", systems.bootstrap(system), "--topic", topic,
                                              "--num-records", str(records), "--record-size", str(size),
                                              "--acks", acks, "--api", "record", "--producer-props", *props],
                                 timeout_s)
        return result["records_per_sec"]

    return run


def stored_curve(bench: Bench, systems: tools.Systems) -> None:
    s = bench.sizes
    first, last = {}, {}
    load = tools.load_average()
    for system in SYSTEMS:
        try:
            windows = tools.producer_perf_windows(systems.bootstrap(system), "stored", 100,
                                                  {**PRODUCER, "acks": "1"}, s.stored_s, s.stored_bytes_max)
        except tools.ToolFailed as exc:
            first[system] = last[system] = f"failed: {exc}"
            continue
        bench.curves[system] = windows
        first[system], last[system] = windows[0]["records_per_sec"], windows[-1]["records_per_sec"]
    stored = {system: bench.curves[system][-1]["stored_bytes"] / 1e9 for system in bench.curves}
    note = "stored at the end: " + ", ".join(f"{k} {v:.2f} GB" for k, v in stored.items())
    for label, values in (("first 5 s window", first), ("last 5 s window", last)):
        bench.add(Row(f"throughput vs stored data, {label}", "kafka-producer-perf-test", "records/s", values,
                      load=load, note=note))


def consumers(bench: Bench, systems: tools.Systems, topic: str, records: int) -> None:
    s = bench.sizes
    ends = {system: tools.end_offsets(systems.bootstrap(system), topic, PARTITIONS) for system in SYSTEMS}

    def run(client: str, groups: list[list[int]]):
        def measure(system: str) -> float:
            counts = [sum(ends[system][p] for p in group) for group in groups]
            results = tools.assign_consumers(client, systems.bootstrap(system), topic, groups, counts, s.timeout_s)
            got = sum(r["records"] for r in results)
            if got < sum(counts):
                raise tools.ToolFailed(f"{got} of {sum(counts)} records consumed")
            return got / max(r["elapsed_s"] for r in results)
        return measure

    every = [list(range(PARTITIONS))]
    thirds = [[0, 1], [2, 3], [4, 5]]
    for client, label in (("confluent", "confluent-kafka assign()"), ("pylog", "pylog client assign()")):
        bench.measure("1 consumer", label, "records/s", run(client, every), note="6 partitions, from the start")
    bench.measure("3 consumers", "confluent-kafka assign()", "records/s", run("confluent", thirds),
                  note="3 processes x 2 partitions; total / slowest's time")


def produce_and_consume(bench: Bench, systems: tools.Systems, props: dict) -> None:
    s = bench.sizes
    results: dict[str, dict] = {}
    load = tools.load_average()
    for system in SYSTEMS:
        bootstrap = systems.bootstrap(system)
        consumer = tools.start_assign_consumer("confluent", bootstrap, "both", list(range(PARTITIONS)),
                                               s.records_both, 20.0)
        try:
            tools.wait_ready(consumer)
            tools.go(consumer)
            produced = tools.java_producer_perf(bootstrap, "both", s.records_both, 100, props, s.timeout_s)
            consumed = tools.finish_assign_consumer(consumer, s.timeout_s)
            results[system] = {"producer": produced["records_per_sec"],
                               "consumer": consumed["records"] / max(consumed["active_s"], 1e-9)}
        except tools.ToolFailed as exc:
            results[system] = {"producer": f"failed: {exc}", "consumer": f"failed: {exc}"}
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
    bench.add(Row("producer and consumer at once: producer", "kafka-producer-perf-test", "records/s",
                  {k: v["producer"] for k, v in results.items()}, load=load))
    bench.add(Row("producer and consumer at once: consumer", "confluent-kafka assign()", "records/s",
                  {k: v["consumer"] for k, v in results.items()}, load=load,
                  note="first to last record, while the producer writes"))


def end_to_end(bench: Bench, systems: tools.Systems) -> None:
    s = bench.sizes
    load = tools.load_average()
    for client in ("kafka-e2e-latency", "pylog perf e2e"):
        def run(system: str, client=client) -> dict:
            bootstrap = systems.bootstrap(system)
            if client == "kafka-e2e-latency":
                return tools.java_e2e(bootstrap, "e2e", s.e2e_records, "1", 100, s.timeout_s)["latency_ms"]
            return tools.pylog_perf("e2e", ["--bootstrap-server", bootstrap, "--topic", "e2e-pylog-perf",
                                            "--num-records", str(s.e2e_records), "--throughput", "0", "--acks", "1"],
                                    s.timeout_s)["latency_ms"]

        latencies = bench.alternate(run, f"end-to-end latency [{client}]")
        note = "whole ms, as the tool prints them" if client == "kafka-e2e-latency" else ""
        for key, label in (("p50", "p50"), ("p99", "p99"), ("p99_9", "p99.9")):
            samples = {k: [v[key] if isinstance(v, dict) else v for v in runs] for k, runs in latencies.items()}
            row = Row(f"end-to-end latency {label}", client, "ms",
                      {k: _median_or_failure(v) for k, v in samples.items()}, lower_is_better=True, load=load,
                      note="1 record at a time, acks=1" + (f"; {note}" if note else ""))
            if bench.rounds > 1:
                row.note += f"; median of {bench.rounds} (" + ", ".join(
                    f"{k} {_spread(v, 'ms')}" for k, v in samples.items()) + ")"
            bench.add(row)


# ---------------------------------------------------------------------------- three brokers


def three_brokers(bench: Bench, systems: tools.Systems) -> None:
    s = bench.sizes
    rf3 = {"min.insync.replicas": "2"}
    bench.warm_up(systems, 3)
    for system in SYSTEMS:
        for topic in ("rf3-acks1", "rf3-acks1-pylog-perf", "rf3-all", "rf3-all-pylog-perf", "rf3-three"):
            systems.create_topic(system, topic, PARTITIONS, 3, rf3)
    for acks, label in (("1", "async (acks=1)"), ("all", "sync (acks=all)")):
        topic = "rf3-acks1" if acks == "1" else "rf3-all"
        props = {**PRODUCER, "acks": acks}
        bench.measure(f"1 producer, RF=3 {label}", "kafka-producer-perf-test", "records/s",
                      lambda system, t=topic, p=props: tools.java_producer_perf(
                          systems.bootstrap(system), t, s.records_rf3, 100, p, s.timeout_s)["records_per_sec"],
                      note="3 brokers, min.insync.replicas 2")
        bench.measure(f"1 producer, RF=3 {label}", "pylog perf produce", "records/s",
                      pylog_produce(systems, f"{topic}-pylog-perf", s.records_rf3, 100, acks, s.timeout_s),
                      note=_PYLOG_PERF_NOTE)

    def three(system: str) -> float:
        bootstrap = systems.bootstrap(system)
        producers = [tools.start_producer_perf(bootstrap, "rf3-three", s.records_each_of_3, 100,
                                               {**PRODUCER, "acks": "1"}) for _ in range(3)]
        return sum(tools.finish_producer_perf(p, s.timeout_s)["records_per_sec"] for p in producers)

    bench.measure("3 producers, RF=3 async (acks=1)", "kafka-producer-perf-test x3", "records/s", three,
                  note="3 processes at once, rates summed")


# ---------------------------------------------------------------------------------- output


def _number(value, unit: str) -> str:
    if not isinstance(value, (int, float)):
        return str(value or "-")[:40]
    if unit == "ms":
        return f"{value:,.2f}"
    return f"{value:,.1f}" if unit == "MB/s" else f"{value:,.0f}"


def _median_or_failure(values: list):
    numbers = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(numbers) if numbers else (values[0] if values else "-")


def _spread(values: list, unit: str) -> str:
    numbers = [v for v in values if isinstance(v, (int, float))]
    if not numbers:
        return "failed"
    return f"{_number(min(numbers), unit)}-{_number(max(numbers), unit)}"


def _ratio_text(a, b) -> str:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
        return f"{a / b:.2f}x"
    return "-"


def table_markdown(rows: list[Row]) -> str:
    lines = ["| row | client | unit | pylog | Apache Kafka | pylog / Kafka | load (1 min) | note |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x" + (" (lower is better)" if row.lower_is_better else "")
        lines.append(f"| {row.name} | {row.client} | {row.unit} | {_number(row.values.get('pylog'), row.unit)} | "
                     f"{_number(row.values.get('kafka'), row.unit)} | {ratio} | {row.load:.2f} | {row.note} |")
    return "\n".join(lines)


def print_table(rows: list[Row]) -> None:
    print()
    print(f"{'row':<44} {'client':<28} {'unit':<9} {'pylog':>11} {'Kafka':>11} {'pylog/Kafka':>11} {'load':>5}")
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"{row.name[:44]:<44} {row.client[:28]:<28} {row.unit:<9} {_number(row.values.get('pylog'), row.unit):>11} "
              f"{_number(row.values.get('kafka'), row.unit):>11} {ratio:>11} {row.load:>5.2f}")
    print(flush=True)


def plot_curves(curves: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for system, color, label in (("pylog", "#cc3311", "pylog"), ("kafka", "#4477aa", "Apache Kafka 4.1.1")):
        windows = curves.get(system) or []
        if windows:
            axes.plot([w["stored_bytes"] / 1e9 for w in windows], [w["records_per_sec"] / 1e3 for w in windows],
                      marker="o", color=color, label=label)
    axes.set_xlabel("data stored in the topic (GB)")
    axes.set_ylabel("thousand 100-byte records/s (5 s windows)")
    axes.set_title("Producer throughput vs stored data (1 broker, acks=1, kafka-producer-perf-test)")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    memory_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemTotal"))
    return {"cpus": os.cpu_count(), "cpu": model, "memory_gb": round(memory_kb / 1e6, 1),
            "kernel": platform.release(), "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about a seventh of the records (minutes, not a quarter hour)")
    parser.add_argument("--out", default=None, help="where results.json, table.md and the plot go "
                        "(default: a new directory under the system temp dir)")
    parser.add_argument("--plot", default=None, help="the stored-data plot (default: OUT/stored_data.png)")
    parser.add_argument("--only", choices=["single", "triple"], default=None, help="one phase only")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat each producer, consumer and latency row, alternating which system goes "
                             "first, and report the median (the stored-data curve and 'at once' run once)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    bench = Bench(QUICK if args.quick else FULL, args.rounds)
    out = Path(args.out or tempfile.mkdtemp(prefix="pylog-side-by-side-out-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="pylog-side-by-side-"))
    started, started_load = time.time(), os.getloadavg()
    print(f"machine: {machine()}; load average at start: {started_load}", flush=True)
    try:
        if args.only in (None, "single"):
            with tools.Systems(root / "one", 1) as systems:
                single_broker(bench, systems)
            shutil.rmtree(root / "one", ignore_errors=True)
        if args.only in (None, "triple"):
            with tools.Systems(root / "three", 3) as systems:
                three_brokers(bench, systems)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    plot = Path(args.plot) if args.plot else out / "stored_data.png"
    if bench.curves:
        plot_curves(bench.curves, plot)
    print_table(bench.rows)
    summary = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)), "machine": machine(),
               "mode": "quick" if args.quick else "full", "rounds": args.rounds, "sizes": asdict(bench.sizes),
               "duration_s": round(time.time() - started), "load_average_start": started_load,
               "load_average_end": os.getloadavg(), "rows": [{**asdict(r), "ratio": r.ratio} for r in bench.rows],
               "stored_data_curves": bench.curves}
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    (out / "table.md").write_text(table_markdown(bench.rows) + "\n")
    print(f"took {summary['duration_s']} s; load average at end: {summary['load_average_end']}; "
          f"results in {out} (results.json, table.md" + (f", {plot.name})" if bench.curves else ")"), flush=True)


if __name__ == "__main__":
    main()
