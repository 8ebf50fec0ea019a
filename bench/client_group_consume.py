"""Consuming through a group (``subscribe``) against ``assign``, same data, same client (issue 14's
target: subscribe >= 0.95x the rate of assign).

    python bench/client_group_consume.py [--records 1000000] [--partitions 6] [--repeat 3]
                                         [--bootstrap-server H:P] [--api poll_arrow|poll]

Without ``--bootstrap-server`` a throwaway ZooKeeper + pylog broker is started
(``broker.tools.perf_local``, ``group.initial.rebalance.delay.ms=0``); with it, any broker (e.g.
an Apache Kafka started by ``pylog kafka-peer``). The records (100-byte values) are produced
once and read once through a group as a warm-up (creating ``__consumer_offsets``); then rounds
run assign and subscribe in alternating order (ABBA; a new group each round, so both start at
the earliest offset). Three rates per run: *total* counts from the first ``poll`` call, so the
group's join (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch) is in it; *steady* counts from
the first record returned; *cpu* is records per CPU second of the client process (both of its
threads), which a busy shared box disturbs least. Subscribe runs with auto-commit on (the default, every 5 s) and the heartbeat
thread; medians of ``--repeat`` rounds, the load average with each line (the box is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.client import AdminClient, Consumer, Producer  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402

VALUE = b"x" * 100


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics(topic, partitions=partitions, replication_factor=1)
    with Producer(bootstrap, acks=1, linger_ms=5, batch_bytes_max=1 << 20, buffer_bytes_max=64 << 20) as producer:
        producer.partitions_for(topic)
        for i in range(records):
            producer.produce(topic, VALUE, partition=i % partitions)
        producer.flush()


def consume(bootstrap: str, topic: str, partitions: int, records: int, api: str,
            group: str | None) -> tuple[float, float, float]:
    """(total seconds from the first poll call, seconds from the first record, CPU seconds of
    this process -- both threads -- from the first poll call) to read ``records``."""
    options = {"auto_offset_reset": "earliest", "max_partition_fetch_bytes": 1 << 20}
    with Consumer(bootstrap, group_id=group, **options) as consumer:
        if group is None:
            consumer.assign([(topic, p) for p in range(partitions)])
        else:
            consumer.subscribe([topic])
        seen, first_at = 0, None
        start, cpu_start = time.perf_counter(), time.process_time()
        while seen < records:
            if api == "poll_arrow":
                got = consumer.poll_arrow(timeout_ms=1000).num_rows
            else:
                got = len(consumer.poll(timeout_ms=1000, max_records=10_000))
            if got and first_at is None:
                first_at = time.perf_counter()
            seen += got
        end, cpu_end = time.perf_counter(), time.process_time()
    return end - start, end - (first_at or start), cpu_end - cpu_start


def run(bootstrap: str, args) -> None:
    topic = f"group-bench-{int(time.time())}"
    produce(bootstrap, topic, args.partitions, args.records)
    totals = {"assign": [], "subscribe": []}
    steadies = {"assign": [], "subscribe": []}
    cpus = {"assign": [], "subscribe": []}
    # warm-up, not counted: the first group creates __consumer_offsets (and the page cache fills)
    consume(bootstrap, topic, args.partitions, args.records, args.api, f"{topic}-warm-up")
    for round_number in range(args.repeat):
        modes = ("assign", "subscribe") if round_number % 2 == 0 else ("subscribe", "assign")  # ABBA
        for mode in modes:
            group = None if mode == "assign" else f"{topic}-g{round_number}"
            total, steady, cpu = consume(bootstrap, topic, args.partitions, args.records, args.api, group)
            totals[mode].append(args.records / total)
            steadies[mode].append(args.records / steady)
            cpus[mode].append(args.records / cpu)
            print(f"round {round_number + 1} {mode:9s} total {args.records / total:12,.0f} rec/s  "
                  f"steady {args.records / steady:12,.0f} rec/s  per CPU s {args.records / cpu:12,.0f}  "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    for name, rates in (("total", totals), ("steady", steadies), ("cpu", cpus)):
        a, s = statistics.median(rates["assign"]), statistics.median(rates["subscribe"])
        print(f"{name:6s} median: assign {a:12,.0f} rec/s   subscribe {s:12,.0f} rec/s   "
              f"subscribe/assign {s / a:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--api", choices=["poll_arrow", "poll"], default="poll_arrow")
    parser.add_argument("--bootstrap-server", default=None)
    args = parser.parse_args()
    print(f"{args.records:,} records of {len(VALUE)} B over {args.partitions} partitions, {args.api}")
    if args.bootstrap_server:
        run(args.bootstrap_server, args)
        return
    overrides = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "1"}
    with LocalCluster(brokers=1, overrides=overrides) as cluster:
        run(cluster.bootstrap, args)


if __name__ == "__main__":
    main()
