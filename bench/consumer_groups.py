"""Consumer groups, pylog beside Apache Kafka: the four numbers of issue 14's Benchmark section,
both systems in one run.

    python bench/consumer_groups.py [--quick] [--rounds N] [--systems pylog,kafka] [--out DIR]

One one-broker pylog (ZooKeeper + ``python -m broker.server``) and one one-broker Apache Kafka
4.1 (KRaft, ``kafka-server-start.sh``'s JVM flags) are started on loopback under one temporary
directory, both with ``group.initial.rebalance.delay.ms=0`` and otherwise their group defaults
(``bench/_groups_systems.py``). Every client is pylog's own (``broker.client.Consumer``), the
same on both systems, in its own process (``bench/_groups_worker.py``). Rows (targets from the
issue, for pylog):

1. **rebalance 3 -> 4 members** (target <= 1 s): from the 4th member's JoinGroup to all 4 having
   their new assignment; range assignor, 12 partitions, ``heartbeat.interval.ms`` 100 (the other
   members learn of the rebalance from a heartbeat).
2. **offset commits from one client** (target >= 20,000 commits/s, p99 <= 10 ms): ``commit_async``
   of one partition's offset per OffsetCommit, simple commits (``assign()``), pipelined up to 100
   in flight (the consumer's bound, Kafka's ``CONSUMER_MAX_INFLIGHT_REQUESTS_PER_CONNECTION``);
   latency from the call to its callback. Kafka serves one request of a connection at
   a time and, in 4.1, gathers coordinator writes for ``group.coordinator.append.linger.ms``
   (5 ms) before appending them: one connection's commits are paced by that linger there.
3. **coordinator takeover** (target <= 3 s): ``--groups`` x ``--partitions`` distinct committed
   offsets (1,000 x 1,000 = 1 M by default), every group hashing to one ``__consumer_offsets``
   partition, then the broker is stopped (SIGTERM) and started again: from its first ApiVersions
   answer to the first OffsetFetch answered without COORDINATOR_LOAD_IN_PROGRESS (or another
   error) and with the offsets written; the time from the new process is printed too.
4. **subscribe vs assign** (target >= 0.95x): the same records (5 M of 100 bytes, written by
   ``kafka-producer-perf-test``) read with ``assign()`` and as the one member of a new group
   (``subscribe``, auto-commit on), ``poll_arrow``, in the order assign, subscribe, subscribe,
   assign in each round (a drift of the load weighs on both); the rate is over the time from
   holding the partitions (assign: the first poll; subscribe: ``on_assign``) to the last record,
   which holds the positioning and every fetch; the join itself is printed beside it. The
   consumer's CPU time per record (assign's / subscribe's) is the form the load does not move.
   Each row also has the broker's and the client's CPU time where it says more than the clock.

``--rounds N`` repeats rows 1, 2 and 4 (alternating which system goes first) and reports
medians; row 3 runs once per system. ``--quick`` is a smaller run (20-50 s for pylog alone,
AB instead of ABBA in row 4: ``--quick --systems pylog`` is the smoke test of tests/integration). The 1-minute load
average is printed with each row: the numbers move with it on a shared machine.
Output: the table, ``JSON`` lines, and ``results.json`` / ``table.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _groups_rows as rows  # noqa: E402
import _sbs_tools as tools  # noqa: E402
from _groups_systems import GroupSystems, produce  # noqa: E402
from _report import report  # noqa: E402
from broker.client.errors import KafkaError  # noqa: E402
from kafka_side_by_side import Row, machine  # noqa: E402

REBALANCE_PARTITIONS = 12
COMMIT_PARTITIONS = 6
CONSUME_PARTITIONS = 6
# Above this many records the consume rows' data is written by kafka-producer-perf-test (a JVM
# start, then ~10x the rate of pylog's producer one record at a time); below, by pylog's producer.
_PYLOG_PRODUCER_RECORDS_MAX = 500_000


@dataclass(frozen=True)
class Sizes:
    commits_max: int       # per commits run (or as many as commit_duration_s allows)
    commit_warm_up: int
    commit_duration_s: float
    groups: int            # takeover: groups x partitions committed offsets
    partitions: int
    records: int           # consume: 100-byte records
    timeout_s: float       # per worker run
    consume_runs: int      # consume: runs of each mode a round (2: ABBA order; 1: AB / BA)


FULL = Sizes(200_000, 2_000, 10.0, 1_000, 1_000, 5_000_000, 300.0, 2)
QUICK = Sizes(10_000, 300, 2.0, 20, 100, 50_000, 60.0, 1)


class Bench:
    def __init__(self, systems: list[str], sizes: Sizes, rounds: int) -> None:
        self.systems = systems
        self.sizes = sizes
        self.rounds = rounds
        self.rows: list[Row] = []
        self.details: dict[str, list] = {}
        self.failed_phases: dict[str, str] = {}

    def alternate(self, name: str, run) -> dict[str, list]:
        """``{system: [result dict or failure text per round]}``, alternating the order."""
        samples: dict[str, list] = {system: [] for system in self.systems}
        for number in range(self.rounds):
            for system in (self.systems if number % 2 == 0 else self.systems[::-1]):
                try:
                    samples[system].append(run(system, number))
                except tools.ToolFailed as exc:
                    samples[system].append(f"failed: {str(exc).splitlines()[0][:160]}")
                    print(f"  {name} on {system}: {exc}", file=sys.stderr, flush=True)
        self.details[name] = [{"system": s, "round": i, "result": r} for s, runs in samples.items()
                              for i, r in enumerate(runs)]
        return samples

    def add(self, name: str, unit: str, samples: dict[str, list], key, lower_is_better: bool = False,
            note: str = "", load: float | None = None) -> Row:
        """One table row: the median over rounds of ``key(result)`` per system."""
        values, spreads = {}, []
        for system, runs in samples.items():
            numbers = [key(r) for r in runs if isinstance(r, dict)]
            values[system] = statistics.median(numbers) if numbers else (runs[0] if runs else "-")
            if len(runs) > 1 and numbers:
                spreads.append(f"{system} {min(numbers):,.4g}-{max(numbers):,.4g}")
        if spreads:
            note += f"{'; ' if note else ''}median of {self.rounds} ({', '.join(spreads)})"
        row = Row(name, "pylog client", unit, values, lower_is_better=lower_is_better,
                  load=tools.load_average() if load is None else load, note=note)
        self.rows.append(row)
        report(name, unit=unit, pylog=values.get("pylog"), kafka=values.get("kafka"),
               ratio=None if row.ratio is None else round(row.ratio, 3), load=row.load)
        return row


def rebalance_rows(bench: Bench, systems: GroupSystems) -> None:
    for system in bench.systems:
        systems.create_topic(system, "rebalance", REBALANCE_PARTITIONS)
    samples = bench.alternate("rebalance", lambda system, n: rows.rebalance(
        systems.bootstrap(system), "rebalance", REBALANCE_PARTITIONS, f"rebalance-{n}"))
    bench.add("rebalance 3 -> 4 members", "ms", samples, lambda r: r["rebalance_ms"], lower_is_better=True,
              note="4th member's JoinGroup to all 4 assigned; range, 12 partitions, heartbeat.interval.ms 100, "
                   "group.initial.rebalance.delay.ms 0; target <= 1,000 ms")


def commit_rows(bench: Bench, systems: GroupSystems) -> None:
    s = bench.sizes
    for system in bench.systems:
        systems.create_topic(system, "commits", COMMIT_PARTITIONS)
    samples = bench.alternate("commits", lambda system, n: rows.commits(
        systems.bootstrap(system), "commits", f"commits-{n}", s.commits_max, s.commit_warm_up,
        s.commit_duration_s, s.timeout_s, systems.broker_pid(system)))
    note = "commit_async, 1 partition per OffsetCommit, simple commits, up to 100 in flight, 1 connection"
    load = tools.load_average()
    bench.add("offset commits, 1 client", "commits/s", samples, lambda r: r["commits_per_sec"],
              note=note + "; target >= 20,000/s", load=load)
    bench.add("offset commit latency p50", "ms", samples, lambda r: r["p50_ms"], lower_is_better=True,
              note="commit_async to its callback", load=load)
    bench.add("offset commit latency p99", "ms", samples, lambda r: r["p99_ms"], lower_is_better=True,
              note="commit_async to its callback; target <= 10 ms", load=load)
    bench.add("broker CPU per commit", "us", samples, lambda r: r["broker_cpu_us_per_commit"], lower_is_better=True,
              note="broker process CPU time (all threads) over the run / commits, the load does not move it; "
                   "1e6 / this = commits/s one free core could serve (Kafka's includes its idle threads)", load=load)
    bench.add("client CPU per commit", "us", samples, lambda r: r["client_cpu_us_per_commit"], lower_is_better=True,
              note="the committing process's CPU time / commits (pylog's client on both)", load=load)


def takeover_rows(bench: Bench, systems: GroupSystems) -> None:
    s = bench.sizes
    groups = rows.takeover_groups(s.groups)
    results: dict[str, list] = {}
    for system in bench.systems:
        try:
            systems.create_topic(system, "takeover", s.partitions)
            written_s = rows.write_offsets(systems.bootstrap(system), "takeover", groups, s.partitions)
            result = rows.takeover(systems, system, "takeover", groups, s.partitions)
            results[system] = [{**result, "write_s": written_s}]
            print(f"  takeover on {system}: {result} (offsets written in {written_s:.1f} s)", flush=True)
        except (tools.ToolFailed, KafkaError) as exc:
            results[system] = [f"failed: {str(exc).splitlines()[0][:160]}"]
            print(f"  takeover on {system}: {exc}", file=sys.stderr, flush=True)
    bench.details["takeover"] = results
    offsets = f"{s.groups:,} groups x {s.partitions:,} partitions = {s.groups * s.partitions:,} offsets"
    bench.add("coordinator takeover after restart", "s", results, lambda r: r["from_ready_s"], lower_is_better=True,
              note=f"{offsets} in one offsets partition; first ApiVersions answer to first good OffsetFetch; "
                   "target <= 3 s")
    bench.add("coordinator takeover, from the new process", "s", results, lambda r: r["from_spawn_s"],
              lower_is_better=True, note="process spawned to first good OffsetFetch (broker start included)")
    bench.add("  of which: ready to leading the partition", "s", results, lambda r: r["ready_to_coordinator_s"],
              lower_is_better=True, note="until the first answer that is not NOT_COORDINATOR")
    bench.add("  of which: loading it", "s", results, lambda r: r["loading_s"], lower_is_better=True,
              note="COORDINATOR_LOAD_IN_PROGRESS until the first good answer")
    bench.add("coordinator takeover, broker CPU", "s", results, lambda r: r["broker_cpu_s"], lower_is_better=True,
              note="broker process CPU time from ready to the first good OffsetFetch (all threads)")
    bench.add("writing the offsets (1 connection)", "offsets/s", results,
              lambda r: s.groups * s.partitions / r["write_s"],
              note=f"{s.groups:,} OffsetCommits of {s.partitions:,} partitions, 5 in flight")


def consume_rows(bench: Bench, systems: GroupSystems) -> None:
    s = bench.sizes
    for system in bench.systems:
        systems.create_topic(system, "consume", CONSUME_PARTITIONS)
        if s.records > _PYLOG_PRODUCER_RECORDS_MAX:
            tools.java_producer_perf(systems.bootstrap(system), "consume", s.records, 100,
                                     {"acks": "1", "linger.ms": "5", "batch.size": "131072",
                                      "enable.idempotence": "false"}, s.timeout_s)
        else:
            produce(systems.bootstrap(system), "consume", s.records)

    def run(system: str, number: int) -> dict:
        """assign, subscribe, subscribe, assign (or the mirror in odd rounds): a drift of the
        machine's load during the round weighs on both modes alike (``--quick``: the first two)."""
        bootstrap = systems.bootstrap(system)
        order = (("assign", "subscribe", "subscribe", "assign") if number % 2 == 0
                 else ("subscribe", "assign", "assign", "subscribe"))[:2 * s.consume_runs]
        runs: dict[str, list[dict]] = {"assign": [], "subscribe": []}
        for i, mode in enumerate(order):
            runs[mode].append(rows.consume(bootstrap, "consume", f"consume-{mode}-{number}-{i}", mode, s.records,
                                           s.timeout_s))
        result = {mode: {"rate": sum(r["records"] for r in done) / max(sum(r["window_s"] for r in done), 1e-9),
                         "join_s": statistics.mean(r["join_s"] for r in done),
                         "cpu_ns_per_record": 1e9 * sum(r["cpu_s"] for r in done) / sum(r["records"] for r in done),
                         "runs": done}
                  for mode, done in runs.items()}
        result["ratio"] = result["subscribe"]["rate"] / result["assign"]["rate"]
        result["cpu_ratio"] = result["assign"]["cpu_ns_per_record"] / result["subscribe"]["cpu_ns_per_record"]
        return result

    samples = bench.alternate("consume", run)
    load = tools.load_average()
    note = (f"{s.records:,} records of 100 bytes, 6 partitions, poll_arrow; from holding the partitions "
            f"(assign: first poll; subscribe: on_assign) to the last record, {s.consume_runs} run(s) of each mode "
            "a round")
    bench.add("consume with assign()", "records/s", samples, lambda r: r["assign"]["rate"], note=note, load=load)
    bench.add("consume with subscribe()", "records/s", samples, lambda r: r["subscribe"]["rate"],
              note=note + "; one member, auto-commit on", load=load)
    bench.add("subscribe / assign", "x", samples, lambda r: r["ratio"], note="target >= 0.95x", load=load)
    bench.add("consumer CPU per record, assign()", "ns", samples, lambda r: r["assign"]["cpu_ns_per_record"],
              lower_is_better=True, note="the consuming process's CPU time / records: the load does not move it",
              load=load)
    bench.add("consumer CPU per record, subscribe()", "ns", samples, lambda r: r["subscribe"]["cpu_ns_per_record"],
              lower_is_better=True, note="join, heartbeat thread and auto-commit included", load=load)
    bench.add("subscribe / assign, by CPU per record", "x", samples, lambda r: r["cpu_ratio"],
              note="assign's CPU per record / subscribe's: the rate ratio one free core would give", load=load)
    bench.add("subscribe: the join", "ms", samples, lambda r: 1000 * r["subscribe"]["join_s"], lower_is_better=True,
              note="first poll to on_assign: FindCoordinator, JoinGroup (twice: KIP-394), SyncGroup", load=load)


def _number(value, unit: str) -> str:
    if not isinstance(value, (int, float)):
        return str(value or "-")[:40]
    if unit in ("ms", "s", "x", "us", "ns"):
        return f"{value:,.2f}"
    return f"{value:,.0f}"


def _ratio(row: Row) -> str:
    if row.ratio is None:
        return "-"
    return f"{row.ratio:.2f}x" + (" (lower is better)" if row.lower_is_better else "")


def table_markdown(table: list[Row]) -> str:
    lines = ["| row | unit | pylog | Apache Kafka | pylog / Kafka | load (1 min) | note |",
             "|---|---|---:|---:|---:|---:|---|"]
    for row in table:
        lines.append(f"| {row.name} | {row.unit} | {_number(row.values.get('pylog'), row.unit)} | "
                     f"{_number(row.values.get('kafka'), row.unit)} | {_ratio(row)} | {row.load:.2f} | {row.note} |")
    return "\n".join(lines)


def print_table(table: list[Row]) -> None:
    print()
    print(f"{'row':<44} {'unit':<10} {'pylog':>11} {'Kafka':>11} {'pylog/Kafka':>11} {'load':>5}")
    for row in table:
        ratio = "-" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"{row.name[:44]:<44} {row.unit:<10} {_number(row.values.get('pylog'), row.unit):>11} "
              f"{_number(row.values.get('kafka'), row.unit):>11} {ratio:>11} {row.load:>5.2f}")
    print(flush=True)


PHASES = {"rebalance": rebalance_rows, "commits": commit_rows, "takeover": takeover_rows, "consume": consume_rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute per system)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of rows 1, 2, 4 (default 3; 1 with --quick)")
    parser.add_argument("--systems", default="pylog,kafka", help="comma-separated: pylog, kafka")
    parser.add_argument("--only", default=",".join(PHASES), help="comma-separated phases: " + ", ".join(PHASES))
    parser.add_argument("--groups", type=int, default=None, help="takeover: groups (default 1,000)")
    parser.add_argument("--partitions", type=int, default=None, help="takeover: partitions per group (default 1,000)")
    parser.add_argument("--out", default=None, help="where results.json and table.md go (default: a new temp dir)")
    parser.add_argument("--pylog-set", action="append", default=[], metavar="KEY=VALUE",
                        help="a pylog broker property (repeatable), e.g. max.inflight.requests.per.connection=2")
    args = parser.parse_args()
    if any("=" not in kv for kv in args.pylog_set):
        parser.error("--pylog-set takes KEY=VALUE")
    pylog_settings = dict(kv.split("=", 1) for kv in args.pylog_set)
    systems_wanted = [s.strip() for s in args.systems.split(",") if s.strip()]
    phases = [p.strip() for p in args.only.split(",") if p.strip()]
    if not systems_wanted or any(s not in ("pylog", "kafka") for s in systems_wanted):
        parser.error("--systems takes pylog, kafka or both")
    if any(p not in PHASES for p in phases):
        parser.error(f"--only takes {', '.join(PHASES)}")
    sizes = QUICK if args.quick else FULL
    sizes = Sizes(**{**asdict(sizes), **{k: v for k, v in (("groups", args.groups), ("partitions", args.partitions))
                                          if v is not None}})
    rounds = args.rounds or (1 if args.quick else 3)
    bench = Bench(systems_wanted, sizes, rounds)
    out = Path(args.out or tempfile.mkdtemp(prefix="pylog-groups-out-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="pylog-groups-"))
    started, started_load = time.time(), os.getloadavg()
    print(f"machine: {machine()}; load average at start: {started_load}", flush=True)
    try:
        with GroupSystems(root, systems_wanted, pylog_settings) as systems:
            for phase in phases:
                try:
                    PHASES[phase](bench, systems)
                except Exception as exc:  # noqa: BLE001 - one phase's setup failing must not lose the others
                    print(f"  phase {phase} failed: {exc!r}", file=sys.stderr, flush=True)
                    bench.failed_phases[phase] = repr(exc)[:300]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(bench.rows)
    summary = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)), "machine": machine(),
               "mode": "quick" if args.quick else "full", "rounds": rounds, "sizes": asdict(sizes),
               "systems": systems_wanted, "pylog_settings": pylog_settings, "duration_s": round(time.time() - started),
               "load_average_start": started_load, "load_average_end": os.getloadavg(),
               "rows": [{**asdict(r), "ratio": r.ratio} for r in bench.rows], "details": bench.details,
               "failed_phases": bench.failed_phases}
    (out / "results.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "table.md").write_text(table_markdown(bench.rows) + "\n")
    print(f"took {summary['duration_s']} s; load average at end: {summary['load_average_end']}; "
          f"results in {out} (results.json, table.md)", flush=True)


if __name__ == "__main__":
    main()
