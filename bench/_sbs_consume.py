"""A consumer worker for ``bench/kafka_side_by_side.py``: read given partitions of a topic from
the beginning with ``assign()`` (no consumer group: pylog does not serve groups yet, so Kafka's
``kafka-consumer-perf-test``, which subscribes, cannot run against it), until ``--records`` records
or ``--idle-timeout-s`` without one.

    python bench/_sbs_consume.py --client confluent|pylog --bootstrap H:P --topic T \\
        --partitions 0,1 --records N [--idle-timeout-s 10]

Prints ``ready`` once assigned, waits for SIGUSR1 (so several workers start together), then
prints one JSON line: ``records``, ``bytes`` (values), ``elapsed_s`` (SIGUSR1 to the last record)
and ``active_s`` (first record to last record).

- ``confluent``: confluent-kafka (librdkafka) ``Consumer.consume(10000, 0.1)``; a ``group.id`` is
  set because the Python binding asks for one, but nothing is committed or subscribed.
- ``pylog``: pylog's ``Consumer.poll_arrow`` (what ``pylog perf consume`` runs).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _confluent(args, partitions: list[int]):
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": "side-by-side-assign", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "fetch.wait.max.ms": 100, "log_level": 0})
    consumer.assign([confluent_kafka.TopicPartition(args.topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in partitions])

    def poll() -> tuple[int, int]:
        messages = consumer.consume(10_000, 0.1)
        size = 0
        for message in messages:
            if message.error() is not None:
                raise RuntimeError(str(message.error()))
            size += len(message.value() or b"")
        return len(messages), size

    return consumer, poll


def _pylog(args, partitions: list[int]):
    import pyarrow.compute as pc

    from broker.client import Consumer
    from broker.tools.perf_runs import warm_up_codec

    warm_up_codec()
    consumer = Consumer(args.bootstrap, auto_offset_reset="earliest")
    consumer.assign([(args.topic, p) for p in partitions])
    consumer.seek_to_beginning()

    def poll() -> tuple[int, int]:
        batch = consumer.poll_arrow(timeout_ms=100)
        if not batch.num_rows:
            return 0, 0
        return batch.num_rows, pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0

    return consumer, poll


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=["confluent", "pylog"], required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", required=True, help="comma-separated partition numbers")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--idle-timeout-s", type=float, default=10.0)
    args = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    consumer, poll = (_confluent if args.client == "confluent" else _pylog)(args, [int(p) for p in args.partitions.split(",")])
    print("ready", flush=True)
    signal.sigwait({signal.SIGUSR1})
    count = size = 0
    start = last = time.monotonic()
    first = None
    try:
        while count < args.records:
            got, got_bytes = poll()
            now = time.monotonic()
            if got:
                first = now if first is None else first
                count, size, last = count + got, size + got_bytes, now
            elif now - last > args.idle_timeout_s:
                break
    finally:
        consumer.close()
    print(json.dumps({"records": count, "bytes": size, "elapsed_s": last - start,
                      "active_s": last - (first or last), "timed_out": count < args.records}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
