"""The exactly-once sink's driver commit alone, without Spark (issue 16): where its time goes.

Setup: ``pylog cluster up`` with 3 brokers (transaction log RF 3, min ISR 2) in a temporary
directory, a sink topic of ``--partitions`` partitions at RF 3. Per round, ``--tasks``
transactions are prepared as the sink's tasks prepare them (``Producer.prepare_transaction``:
flushed, left open, 100 records each), then the driver's ``Committer.commit`` completes them; its
wall time, this process's CPU time, its phases (checked: the replay check, intent, ended, swept:
ms since the commit began) and, after it, the time of the sweep's listing alone (``open_transactions``) are recorded.
``--baseline FILE`` also times another ``spark_log/transactions.py`` (e.g. ``git show
<commit>:spark_log/transactions.py > /tmp/old.py``) in the same rounds, interleaved, so both see
the same load.

Not part of the tests: ``python bench/spark_eos_commit.py [--rounds 30] [--baseline /tmp/old.py]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import time  # noqa: E402

from _report import report  # noqa: E402
from broker.client import AdminClient, Producer  # noqa: E402
from broker.tools.cluster import ClusterToolError, cluster_down, cluster_up  # noqa: E402
from broker.tools.zookeeper import find_free_port  # noqa: E402

from spark_exactly_once import TXN_SETTINGS  # noqa: E402


def prepare(bootstrap: str, topic: str, tid: str, partition: int):
    with Producer(bootstrap, transactional_id=tid, transaction_timeout_ms=60_000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(100):
            producer.send(topic, b"x" * 100, partition=partition)
        return producer.prepare_transaction(), producer.transaction_coordinator


def load_module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run(args, root: Path) -> None:
    from spark_log import transactions

    for attempt in range(5):
        port, zk_port = find_free_port(), find_free_port()
        try:
            cluster_up(root / "cluster", 3, port, zk_port, TXN_SETTINGS, sys.stderr)
            break
        except ClusterToolError:
            if attempt == 4:
                raise
            shutil.rmtree(root / "cluster", ignore_errors=True)
    bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(3))
    try:
        with AdminClient(bootstrap) as admin:
            admin.create_topics("eos-commit", partitions=args.partitions, replication_factor=3)
        variants = {"current": transactions}
        if args.baseline:
            variants["baseline"] = load_module(args.baseline, "pylog_eos_commit_baseline")
        times: dict[str, list[float]] = {name: [] for name in variants}
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        listing: dict[str, list[float]] = {name: [] for name in variants}
        phases: list[dict] = []
        for round_ in range(args.rounds + 1):  # round 0 warms up (topic, connections)
            for name, module in variants.items():
                settings = module.TxnSettings(f"bench-{name}", 60_000, "pylog-spark-commits", bootstrap)
                tasks = [prepare(bootstrap, "eos-commit", module.transactional_id(settings.prefix, round_, t, 0, t),
                                 t % args.partitions) for t in range(args.tasks)]
                prepared = [p for p, _ in tasks]
                # The tasks' coordinators, as the sink's commit messages carry them (not for a
                # baseline from before that: it looks each one up).
                hints = {} if name == "baseline" else {"coordinators": {p.transactional_id: c for p, c in tasks}}
                committer = module.Committer(settings)
                cpu_started = time.process_time()  # this process only: the brokers run in their own
                started = time.perf_counter()
                committer.commit(prepared, round_, **hints)
                if name == "baseline" and args.baseline_sweeps_after:
                    committer.abort_lingering()  # the sink before 64ab99c swept after commit()
                elapsed = (time.perf_counter() - started) * 1000
                cpu_ms = (time.process_time() - cpu_started) * 1000
                # The sweep's listing alone (ListTransactions to every broker and the broker list).
                list_started = time.perf_counter()
                committer.open_transactions()
                listed_ms = (time.perf_counter() - list_started) * 1000
                if round_:
                    times[name].append(elapsed)
                    cpu[name].append(cpu_ms)
                    listing[name].append(listed_ms)
                    if name == "current":
                        phases.append(dict(committer.phases))
        load = os.getloadavg()[0]
        for name, values in times.items():
            values.sort()
            report(f"driver commit {name}", tasks=args.tasks, rounds=len(values),
                   p50_ms=statistics.median(values), p90_ms=values[int(len(values) * 0.9)], max_ms=values[-1],
                   cpu_ms_p50=statistics.median(cpu[name]), open_transactions_ms_p50=statistics.median(listing[name]),
                   load_1m=load)
        for phase in ("checked", "intent", "ended", "swept"):
            report(f"  current: {phase} at (ms since start, p50)", p50_ms=statistics.median(p[phase] for p in phases))
    finally:
        cluster_down(root / "cluster", sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=2, help="prepared transactions per commit (Spark tasks)")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--baseline", help="another spark_log/transactions.py to time alongside")
    parser.add_argument("--baseline-sweeps-after", action="store_true",
                        help="the baseline's commit() does not sweep (before 64ab99c): sweep after it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-eos-commit-") as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
