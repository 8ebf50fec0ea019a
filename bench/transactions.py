"""Transactions side by side (issue 15): pylog and Apache Kafka in one run, each a 3-broker
cluster, one topic of 6 partitions at RF 3 (min.insync.replicas 2), pylog's own client on both
(so the rows compare the brokers and their coordinators, not two clients):

* ``idempotent``: records/s of an idempotent producer, acks=all;
* ``transactional``: records/s of a transactional producer, 1,000 records per transaction over
  the 6 partitions, acks=all (target: >= 0.9x the idempotent rate of the same system);
* ``end_txn``: the EndTxn round trip (commit_transaction after an explicit flush, so nothing but
  EndTxn is left in it), p50 and p99 (target: p99 <= 20 ms at RF 3);
* ``read_committed`` / ``read_uncommitted``: records/s of a consumer reading the transactional
  topic from the start under each isolation level (target: read_committed >= 0.9x).

Per-phase breakdown (the machine is shared: judge by these, not only by the rates): ``flush``,
p50 of the time from the last send of a transaction to its last acknowledgement (with
transaction version 2 this holds the implicit add, which waits for the previous transaction's
markers and Complete* record, and the acks=all replication of the data); and the brokers' CPU
seconds per 1,000 records (``*_cpu_ms_per_krec``: user+system of every broker process over the
idempotent and the transactional phase).

Records-per-transaction sweep (``--records-per-txn 1000,5000,20000``): the transactional phase
runs once per size (its own topic, each size sending ``max(--records, 3 x size)`` records), and a
``sweep`` line per system gives each size's rate as a multiple of the idempotent rate: at what
transaction size a system reaches 0.9x (a transaction's fixed cost, Prepare + markers + Complete,
is spread over more records). The first size is the one the other rows (EndTxn, flush, consume)
use; the default, 1000, is the issue's row.

Each row is the median of ``--runs`` runs (default 3). The machine is shared: the 1-minute load
average is printed with every run. ``python bench/transactions.py [--systems pylog,kafka]
[--records N] [--runs 3] [--brokers 3] [--records-per-txn 1000[,5000,...]]``.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _sbs_tools import _ServerJvmInstall  # noqa: E402
from broker.client import Consumer, Producer  # noqa: E402
from broker.client.admin import AdminClient  # noqa: E402
from broker.client.config import ClientConfig  # noqa: E402
from broker.tools.kafka_peer import ApacheKafkaCluster, find_kafka_install  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402

PARTITIONS = 6
RECORDS_PER_TXN = 1_000
VALUE = b"v" * 100
DEADLINE_MS = 120_000
CONSUME_TIMEOUT_S = 300.0
WARM_UP_RECORDS = 1_200


def settings(brokers: int) -> dict[str, str]:
    rf = str(min(3, brokers))
    return {"auto.create.topics.enable": "false", "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, brokers)),
            "min.insync.replicas": str(min(2, brokers)), "group.initial.rebalance.delay.ms": "0"}


def load() -> float:
    return os.getloadavg()[0]


def create_topic(bootstrap: str, topic: str, brokers: int) -> None:
    with AdminClient(bootstrap, config=ClientConfig(request_timeout_ms=60_000)) as admin:
        admin.create_topics(topic, PARTITIONS, min(3, brokers), {}, timeout_ms=60_000)


def produce_idempotent(bootstrap: str, topic: str, records: int) -> float:
    with Producer(bootstrap, acks="all", linger_ms=5) as producer:
        # Not timed: metadata, producer id, every leader ready, and full batches encoded once
        # (the first multi-record batch imports the vectorized encoder: ~3 s on a loaded machine).
        for i in range(WARM_UP_RECORDS):
            producer.send(topic, VALUE, partition=i % PARTITIONS)
        producer.flush(DEADLINE_MS)
        started = time.perf_counter()
        for i in range(records):
            producer.send(topic, VALUE, partition=i % PARTITIONS)
        producer.flush(DEADLINE_MS)
        return records / (time.perf_counter() - started)


def cpu_s(pids: list[int]) -> float:
    """User+system CPU seconds of the broker processes so far, from /proc/<pid>/stat (utime
    and stime, fields 14-15; 0 for one that is gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def broker_pids(cluster) -> list[int]:
    if hasattr(cluster, "broker_pids"):
        return list(cluster.broker_pids)
    return [pid for pid in (node.running_pid() for node in cluster.nodes) if pid is not None]


def produce_transactional(bootstrap: str, topic: str, records: int, tid: str,
                          per_txn: int = RECORDS_PER_TXN) -> tuple[float, list[float], list[float]]:
    """(records/s, EndTxn round trips in ms, flush times in ms) with ``per_txn`` records per
    transaction."""
    end_ms, flush_ms = [], []
    with Producer(bootstrap, acks="all", linger_ms=5, transactional_id=tid) as producer:
        producer.init_transactions(DEADLINE_MS)
        producer.begin_transaction()  # a warm-up transaction over every partition: not timed
        for p in range(PARTITIONS):
            producer.send(topic, VALUE, partition=p)
        producer.commit_transaction(DEADLINE_MS)
        started = time.perf_counter()
        for first in range(0, records, per_txn):
            producer.begin_transaction()
            for i in range(first, min(first + per_txn, records)):
                producer.send(topic, VALUE, partition=i % PARTITIONS)
            sent = time.perf_counter()
            producer.flush(DEADLINE_MS)
            before = time.perf_counter()
            producer.commit_transaction(DEADLINE_MS)
            end_ms.append((time.perf_counter() - before) * 1000)
            flush_ms.append((before - sent) * 1000)
        return records / (time.perf_counter() - started), end_ms, flush_ms


def consume(bootstrap: str, topic: str, isolation: str, records: int) -> float:
    consumer = Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest")
    try:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        seen = 0
        started = time.perf_counter()
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{isolation}: {seen} of {records} records in {CONSUME_TIMEOUT_S} s")
            seen += len(consumer.poll(200))
        return seen / (time.perf_counter() - started)
    finally:
        consumer.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def sweep_records(records: int, per_txn: int) -> int:
    """Records sent at one transaction size: at least three whole transactions."""
    return max(records, 3 * per_txn)


def one_run(bootstrap: str, brokers: int, records: int, run: int, system: str, pids: list[int],
            sizes: tuple[int, ...] = (RECORDS_PER_TXN,)) -> dict[str, float]:
    stamp = f"{system}-{run}-{time.monotonic_ns() % 10**9}"
    idem_topic, txn_topic = f"bench-idem-{stamp}", f"bench-txn-{stamp}"
    create_topic(bootstrap, idem_topic, brokers)
    create_topic(bootstrap, txn_topic, brokers)
    row = {"load_1m": load()}
    cpu = cpu_s(pids)
    row["idempotent"] = produce_idempotent(bootstrap, idem_topic, records)
    cpu, row["idem_cpu_ms_per_krec"] = cpu_s(pids), (cpu_s(pids) - cpu) * 1e6 / records
    row["transactional"], end_ms, flush_ms = produce_transactional(bootstrap, txn_topic, records, f"bench-{stamp}",
                                                                   sizes[0])
    row["txn_cpu_ms_per_krec"] = (cpu_s(pids) - cpu) * 1e6 / records
    row["flush_p50_ms"] = percentile(flush_ms, 0.5)
    row["end_txn_p50_ms"] = percentile(end_ms, 0.5)
    row["end_txn_p99_ms"] = percentile(end_ms, 0.99)
    total = records + PARTITIONS  # the warm-up transaction's records too
    row["read_uncommitted"] = consume(bootstrap, txn_topic, "read_uncommitted", total)
    row["read_committed"] = consume(bootstrap, txn_topic, "read_committed", total)
    row[f"txn_x@{sizes[0]}"] = row["transactional"] / row["idempotent"]
    for size in sizes[1:]:
        topic, count = f"bench-txn{size}-{stamp}", sweep_records(records, size)
        create_topic(bootstrap, topic, brokers)
        cpu = cpu_s(pids)
        rate, _, _ = produce_transactional(bootstrap, topic, count, f"bench-{size}-{stamp}", size)
        row[f"txn_x@{size}"] = rate / row["idempotent"]
        row[f"txn_cpu_ms_per_krec@{size}"] = (cpu_s(pids) - cpu) * 1e6 / count
    return row


def start(system: str, root: Path, brokers: int):
    if system == "pylog":
        cluster = LocalCluster(brokers, settings(brokers), root=root / "pylog")
        cluster.root.mkdir(parents=True)
        cluster.start()
        return cluster, cluster.bootstrap
    install = find_kafka_install()
    cluster = ApacheKafkaCluster(root / "kafka", brokers, settings(brokers),
                                 install=_ServerJvmInstall(install.java, install.libs))
    cluster.start()
    return cluster, cluster.bootstrap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="pylog,kafka")
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--records-per-txn", default=str(RECORDS_PER_TXN),
                        help="comma-separated transaction sizes (the sweep); the first feeds every other row")
    args = parser.parse_args(argv)
    sizes = tuple(int(size) for size in args.records_per_txn.split(","))
    if sizes[0] > args.records:
        parser.error("--records must hold at least one transaction of the first --records-per-txn size")
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        for system in args.systems.split(","):
            cluster, bootstrap = start(system, Path(tmp), args.brokers)
            try:
                for run in range(args.runs):
                    row = one_run(bootstrap, args.brokers, args.records, run, system, broker_pids(cluster), sizes)
                    print(system, run, {k: round(v, 1) for k, v in row.items()}, flush=True)
                    results.setdefault(system, []).append(row)
            finally:
                cluster.stop()
    print(f"\nmedians of {args.runs} runs, {args.records} records of {len(VALUE)} B, {PARTITIONS} partitions, "
          f"RF {min(3, args.brokers)}, acks=all, {sizes[0]} records per transaction")
    for system, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"{system:6} idempotent {med['idempotent']:8.0f}/s  transactional {med['transactional']:8.0f}/s "
              f"(x{med['transactional'] / med['idempotent']:.2f})  EndTxn p50 {med['end_txn_p50_ms']:5.1f} ms "
              f"p99 {med['end_txn_p99_ms']:5.1f} ms  read_committed {med['read_committed']:8.0f}/s "
              f"read_uncommitted {med['read_uncommitted']:8.0f}/s "
              f"(x{med['read_committed'] / med['read_uncommitted']:.2f})  flush p50 {med['flush_p50_ms']:5.1f} ms  "
              f"broker CPU ms/1k records idempotent {med['idem_cpu_ms_per_krec']:.0f} "
              f"transactional {med['txn_cpu_ms_per_krec']:.0f}  load {med['load_1m']:.1f}")
        if len(sizes) > 1:
            print(f"{system:6} sweep (transactional / idempotent by records per transaction): " + "  ".join(
                f"{size}: x{med[f'txn_x@{size}']:.2f}" for size in sizes)
                + "  broker CPU ms/1k records: " + "  ".join(
                f"{size}: {med.get(f'txn_cpu_ms_per_krec@{size}', med['txn_cpu_ms_per_krec']):.0f}" for size in sizes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
