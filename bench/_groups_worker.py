"""Client processes for ``bench/consumer_groups.py``: one group member, one committer, or one
consumer, each in its own process so no client shares a GIL with another or with the bench.

    python bench/_groups_worker.py member  --bootstrap H:P --group G --topic T [--announce-join]
    python bench/_groups_worker.py commits --bootstrap H:P --group G --topic T --partitions N \\
        --commits N --warm-up N [--duration-s S]
    python bench/_groups_worker.py consume --bootstrap H:P --group G --topic T --mode assign|subscribe \\
        --records N

Every worker uses pylog's client (``broker.client.Consumer``), the same on both systems, and
prints JSON lines on stdout; times are ``time.monotonic()`` seconds, one clock for every process
on the machine (Linux CLOCK_MONOTONIC), so the bench can compare times of different workers.

- ``member``: subscribe (range assignor, ``heartbeat.interval.ms`` 100, so a member learns of a
  rebalance within 100 ms, as it would with any short interval; Kafka's 3 s default would put up
  to 3 s of waiting into every rebalance on both systems), poll every 20 ms, and print
  ``{"assigned": [...], "generation": G, "t": ...}`` after each assignment. With
  ``--announce-join`` it first finds the coordinator and connects to it, then prints
  ``{"join_sent": t}`` just before the poll that sends its JoinGroup: the rebalance is timed from
  there. Runs until stdin closes.
- ``commits``: a "simple" committer (``assign()``, generation -1, as a Spark job or a
  ``KafkaOffsetStore`` commits): ``commit_async`` of one partition's offset per OffsetCommit,
  round-robin over the partitions (``--commits`` of them, or as many as
  ``--duration-s`` allows), pipelined up to ``max.in.flight.requests.per.connection`` (5);
  each commit's latency is from ``commit_async`` to its callback (which runs as soon as its answer
  is read: the pipeline reads the oldest answer when it is full), and the client's own CPU time
  per commit (``time.process_time``, all its threads). Then ``committed()`` must give
  back the last offset of every partition. Prints one JSON line.
- ``consume``: read ``--records`` records from the start of every partition, with ``assign()``
  or as the one member of a new group (``subscribe``, auto-commit on, its default 5 s), through
  ``poll_arrow``. ``window_s`` is from the moment the partitions are the consumer's (``assign``:
  the first poll; ``subscribe``: its ``on_assign``, so the join itself is ``join_s``, apart) to
  the last record: both windows hold the positioning (committed offsets or ListOffsets) and
  every fetch. ``elapsed_s`` is from the first poll, ``active_s`` from the first record;
  ``cpu_s`` is the process's CPU time from the first poll to the last record (join included).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.client import Consumer  # noqa: E402
from broker.client.group_commit import OffsetAndMetadata  # noqa: E402

_HEARTBEAT_INTERVAL_MS = 100
_SESSION_TIMEOUT_MS = 10_000
_MEMBER_POLL_MS = 20
_IDLE_TIMEOUT_S = 20.0


def _emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def member(args) -> int:
    consumer = Consumer(args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
                        partition_assignment_strategy="range", heartbeat_interval_ms=_HEARTBEAT_INTERVAL_MS,
                        session_timeout_ms=_SESSION_TIMEOUT_MS, enable_auto_commit=False,
                        client_id=f"bench-member-{args.name}")
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()

    def on_assign(tps) -> None:
        _emit(assigned=[p for _, p in tps], generation=consumer.group_metadata()["generation_id"],
              t=time.monotonic(), name=args.name)

    consumer.subscribe([args.topic], on_assign=on_assign)
    if args.announce_join:
        # FindCoordinator and the connection before the clock starts: the time measured is the
        # JoinGroup's and the rebalance's, not a lookup's.
        consumer._group.membership.coordinator_connection(time.monotonic() * 1000 + 30_000)
        _emit(join_sent=time.monotonic(), name=args.name)
    try:
        while not done.is_set():
            consumer.poll_arrow(timeout_ms=_MEMBER_POLL_MS)
    finally:
        consumer.close()
    return 0


def commits(args) -> int:
    consumer = Consumer(args.bootstrap, group_id=args.group, enable_auto_commit=False, client_id="bench-commits")
    tps = [(args.topic, p) for p in range(args.partitions)]
    consumer.assign(tps)
    # A synchronous commit first: it waits (retrying) while the offsets topic is created and its
    # partition loaded, which is not what is measured.
    consumer.commit({tp: 0 for tp in tps}, timeout_ms=60_000)
    latencies: list[float] = []
    errors: list[str] = []
    last = {tp: 0 for tp in tps}

    def run(count: int, duration_s: float, record: bool) -> tuple[int, float]:
        started = time.perf_counter()
        sent_count = 0
        while sent_count < count and (sent_count % 64 or time.perf_counter() - started < duration_s):
            tp = tps[sent_count % len(tps)]
            last[tp] += 1
            sent = time.perf_counter()

            def done(_offsets, error, sent=sent) -> None:
                if record:
                    latencies.append(time.perf_counter() - sent)
                    if error is not None:
                        errors.append(str(error))
            consumer.commit_async({tp: OffsetAndMetadata(last[tp])}, done)
            sent_count += 1
        consumer._group.offsets.drain(block=True)
        return sent_count, time.perf_counter() - started

    run(args.warm_up, args.duration_s, record=False)
    cpu_before = time.process_time()
    count, elapsed = run(args.commits, args.duration_s, record=True)
    client_cpu_s = time.process_time() - cpu_before
    committed = consumer.committed(tps, timeout_ms=30_000)
    wrong = [f"{t}-{p}: {committed[(t, p)]} != {last[(t, p)]}" for t, p in tps
             if committed[(t, p)] is None or committed[(t, p)].offset != last[(t, p)]]
    consumer.close()
    latencies.sort()
    _emit(commits=count, elapsed_s=elapsed, commits_per_sec=count / elapsed,
          p50_ms=1000 * statistics.median(latencies), p99_ms=1000 * latencies[int(0.99 * (len(latencies) - 1))],
          max_ms=1000 * latencies[-1], client_cpu_us_per_commit=1e6 * client_cpu_s / count, errors=len(errors),
          first_error=errors[0] if errors else None,
          committed_wrong=wrong[:5])
    return 0


def consume(args) -> int:
    import pyarrow  # noqa: F401  (imported before the clock starts)

    from broker.tools.perf_runs import warm_up_codec

    warm_up_codec()
    consumer = Consumer(args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
                        client_id=f"bench-{args.mode}")
    if args.mode == "assign":
        partitions = consumer.partitions_for(args.topic)
        consumer.assign([(args.topic, p) for p in partitions])
        consumer.seek_to_beginning()
    count = 0
    first = None
    assigned: list[float] = []
    cpu_started = time.process_time()
    started = last = time.monotonic()
    if args.mode == "subscribe":
        consumer.subscribe([args.topic], on_assign=lambda tps: assigned.append(time.monotonic()))
    else:
        assigned.append(started)
    try:
        while count < args.records:
            batch = consumer.poll_arrow(timeout_ms=100)
            now = time.monotonic()
            if batch.num_rows:
                first = now if first is None else first
                count, last = count + batch.num_rows, now
            elif now - last > _IDLE_TIMEOUT_S:
                break
        cpu_s = time.process_time() - cpu_started
    finally:
        consumer.close()
    window_start = assigned[0] if assigned else started
    _emit(records=count, elapsed_s=last - started, window_s=last - window_start, join_s=window_start - started,
          active_s=last - (first or last), first_record_s=(first or last) - started, cpu_s=cpu_s,
          timed_out=count < args.records)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["member", "commits", "consume"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", default="m")
    parser.add_argument("--announce-join", action="store_true")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--warm-up", type=int, default=2_000)
    parser.add_argument("--duration-s", type=float, default=10.0, help="commits: stop sending after this long")
    parser.add_argument("--mode", choices=["assign", "subscribe"], default="assign")
    parser.add_argument("--records", type=int, default=0)
    args = parser.parse_args()
    return {"member": member, "commits": commits, "consume": consume}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
