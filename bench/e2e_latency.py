"""End-to-end latency at a fixed rate against one pylog broker, ours against confluent-kafka.

    python bench/e2e_latency.py [--rate 10000] [--records 30000] [--repeat 3] [--bootstrap-server H:P]

Both sides do the same thing in one process: the main thread sends ``--records`` 100-byte records
at ``--rate`` records/s (acks=1, linger.ms=0), each value starting with its send time
(``time.monotonic_ns``); a consumer thread polls them and records receive time - send time.
Ours is ``pylog perf e2e`` (``broker.tools.perf_runs.run_e2e``: ``Producer.produce`` +
``Consumer.poll_arrow``); the peer is a confluent-kafka Producer + Consumer
(``produce``/``poll(0)``, and ``poll(0.05)`` per message: ``consume(n, timeout)`` would hold
messages until ``n`` arrived or the timeout passed, which once made the peer look 20x slower).
``--rate 0`` is Kafka's ``EndToEndLatency`` on both sides: one record at a time, acknowledged
(``get``/``flush``) and then consumed before the next is sent. Rounds alternate; the median of
each percentile is reported with its min and max, and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import confluent_kafka  # noqa: E402

from _report import report  # noqa: E402
from broker.client import AdminClient  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402
from broker.tools.perf_runs import E2EOptions, run_e2e  # noqa: E402
from broker.tools.perf_stats import LatencySamples, Progress, Throttle  # noqa: E402

_NS = struct.Struct(">q")


def ours(bootstrap: str, topic: str, rate: float, n: int) -> dict:
    result = run_e2e(bootstrap, E2EOptions(topic, n, 100, rate), {"acks": "1", "linger_ms": 0}, {},
                     Progress(n, "e2e", enabled=False))
    assert result.records == n, f"received {result.records} of {n}"
    return result.latency


def peer_one_at_a_time(bootstrap: str, topic: str, n: int) -> dict:
    samples = LatencySamples()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-peer",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                                         "isolation.level": "read_uncommitted"})
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, high)])
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    filler = b"x" * 92
    for _ in range(n):
        began = time.monotonic_ns()
        producer.produce(topic, _NS.pack(began) + filler, partition=0)
        producer.flush(30)  # Kafka's tool: send(...).get()
        while True:
            message = consumer.poll(30)
            assert message is not None and message.error() is None, "no record within 30 s"
            if _NS.unpack_from(message.value())[0] == began:
                break
        samples.add((time.monotonic_ns() - began) / 1e6)
    consumer.close()
    return samples.percentiles()


def peer(bootstrap: str, topic: str, rate: float, n: int) -> dict:
    if rate <= 0:
        return peer_one_at_a_time(bootstrap, topic, n)
    samples = LatencySamples()
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-peer",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                                         "isolation.level": "read_uncommitted"})
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, high)])
    received = [0]

    def receive() -> None:
        # poll() returns each message as soon as librdkafka has it; consume(num_messages, timeout)
        # would wait until num_messages arrived or the timeout passed, adding up to the timeout.
        while received[0] < n:
            message = consumer.poll(0.05)
            now = time.monotonic_ns()
            if message is not None and message.error() is None:
                samples.add((now - _NS.unpack_from(message.value())[0]) / 1e6)
                received[0] += 1

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    time.sleep(0.5)  # the consumer's assignment takes effect before anything is sent
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0,
                                         "max.in.flight.requests.per.connection": 5})  # as ours
    filler = b"x" * 92
    throttle = Throttle(rate)
    for i in range(n):
        producer.produce(topic, _NS.pack(time.monotonic_ns()) + filler, partition=0)
        producer.poll(0)
        throttle.wait(i + 1)
    producer.flush(30)
    thread.join(60)
    consumer.close()
    assert received[0] >= n, f"received {received[0]} of {n}"
    return samples.percentiles()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", default=None)
    parser.add_argument("--broker-root", default=None)
    parser.add_argument("--rate", type=float, default=10_000)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cluster = None if args.bootstrap_server else LocalCluster(1, broker_root=args.broker_root).start()
    bootstrap = args.bootstrap_server or cluster.bootstrap
    try:
        tag = str(int(time.time()))
        with AdminClient(bootstrap) as admin:
            for side in ("ours", "peer"):
                admin.create_topics(f"e2e-{side}-{tag}", partitions=1, replication_factor=1)
        ours(bootstrap, f"e2e-ours-{tag}", args.rate, min(args.records, 5000))  # warm-up
        results = {"ours": [], "confluent": []}
        for _ in range(args.repeat):
            results["ours"].append(ours(bootstrap, f"e2e-ours-{tag}", args.rate, args.records))
            results["confluent"].append(peer(bootstrap, f"e2e-peer-{tag}", args.rate, args.records))
        for side, runs in results.items():
            fields = {}
            for key in ("p50", "p99", "p99_9", "max"):
                values = [r[key] for r in runs]
                fields[f"{key}_ms"] = statistics.median(values)
                fields[f"{key}_ms_min_max"] = f"{min(values):.2f}/{max(values):.2f}"
            mode = f"{args.rate:.0f} rec/s" if args.rate > 0 else "one at a time"
            report(f"e2e {mode}: {side}", **fields, runs=len(runs),
                   load="%.2f" % os.getloadavg()[0])
    finally:
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
