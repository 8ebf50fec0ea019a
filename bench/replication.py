"""Replication cost and failover time, on real broker processes and a real ZooKeeper.

1. Throughput: the same librdkafka producer (confluent-kafka, idempotence off so that only
   ``acks`` differs) writes the same records to a one-broker cluster (RF=1, acks=1) and to a
   three-broker cluster (RF=3, min.insync.replicas=2, acks=all), alternating, ``--rounds``
   rounds each; the medians and their ratio are reported (target >= 0.6).
2. Failover: on the three-broker cluster, SIGKILL the leader of a one-partition topic while a
   producer keeps writing, ``--kills`` times; the time from the kill to the first write the
   cluster accepts afterwards (its delivery report) is reported, median and max. With
   ZooKeeper, a killed broker is noticed when its session expires, so this is about
   ``zookeeper.session.timeout.ms`` (``--session-timeout-ms``, Kafka 2.x's old default 6000)
   plus the election and the client's retry. The same with SIGTERM (``--terms`` times): the
   controlled shutdown moves leadership before the broker exits, so no session has to expire.

    python bench/replication.py [--records 200000] [--kills 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import report  # noqa: E402
from broker.cluster.zk import KafkaZkClient  # noqa: E402
from broker.tools.broker_process import answers_api_versions  # noqa: E402
from broker.tools.zookeeper import DEFAULT_SETTINGS, ZooKeeperProcess, find_free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


class Cluster:
    def __init__(self, root: Path, zk_connect: str, brokers: int, props: dict[str, str]) -> None:
        self.zk_connect = zk_connect
        self.brokers: dict[int, dict] = {}
        for broker_id in range(1, brokers + 1):
            directory = root / f"broker-{broker_id}"
            directory.mkdir(parents=True)
            port = find_free_port()
            config = {"broker.id": str(broker_id), "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                      "log.dirs": str(directory / "data"), "zookeeper.connect": zk_connect, **props}
            path = directory / "server.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
            self.brokers[broker_id] = {"port": port, "config": path, "log": directory / "broker.log", "popen": None}
        for broker_id in self.brokers:
            self.start(broker_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b['port']}" for b in self.brokers.values())

    def start(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        if broker["popen"] is not None:
            broker["popen"].wait(60)
        with open(broker["log"], "ab") as log:
            broker["popen"] = subprocess.Popen([sys.executable, "-m", "broker.server", "--config", str(broker["config"])],
                                               stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        deadline = time.monotonic() + 60
        while not answers_api_versions("127.0.0.1", broker["port"]):
            assert broker["popen"].poll() is None, f"broker {broker_id} exited"
            assert time.monotonic() < deadline, f"broker {broker_id} did not start"
            time.sleep(0.05)

    def kill(self, broker_id: int, sig: int = signal.SIGKILL) -> None:
        """Signal the broker; returns at once (the exit is awaited before a restart)."""
        self.brokers[broker_id]["popen"].send_signal(sig)

    def stop(self) -> None:
        for broker in self.brokers.values():
            popen = broker["popen"]
            if popen is not None and popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        for broker in self.brokers.values():
            popen = broker["popen"]
            if popen is not None:
                try:
                    popen.wait(30)
                except subprocess.TimeoutExpired:
                    popen.kill()


def create_topic(bootstrap: str, name: str, partitions: int, rf: int, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(60)


def produce(bootstrap: str, topic: str, records: int, value: bytes, acks: str) -> float:
    """Records per second for ``records`` values, all delivered."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False,
                         "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 256_000,
                         "compression.type": "none"})
    errors = []
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0 and not errors, errors[:3]
    return records / (time.perf_counter() - start)


def throughput(args, single: Cluster, triple: Cluster) -> None:
    value = os.urandom(args.value_bytes)
    rf1, rf3 = [], []
    for round_ in range(args.rounds):
        create_topic(single.bootstrap, f"rf1-{round_}", 3, 1, {})
        create_topic(triple.bootstrap, f"rf3-{round_}", 3, 3, {"min.insync.replicas": "2"})
        time.sleep(1)
        rf1.append(produce(single.bootstrap, f"rf1-{round_}", args.records, value, "1"))
        rf3.append(produce(triple.bootstrap, f"rf3-{round_}", args.records, value, "all"))
    one, three = statistics.median(rf1), statistics.median(rf3)
    mb = args.value_bytes / 1e6
    report("replication RF=1 acks=1 (1 broker)", records_per_s=one, mb_per_s=one * mb)
    report("replication RF=3 acks=all (3 brokers)", records_per_s=three, mb_per_s=three * mb,
           ratio=three / one, target=0.6)


def failover(args, triple: Cluster, sig: int, count: int) -> None:
    from confluent_kafka import Producer

    name = signal.Signals(sig).name
    topic = f"failover-{name.lower()}"
    create_topic(triple.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    zk = KafkaZkClient(triple.zk_connect, 30_000, 30_000)
    zk.start()
    times = []
    try:
        wait(lambda: len(zk.get_partition_state(topic, 0)[0].isr) == 3, 60)
        for kill in range(count):
            leader = zk.get_partition_state(topic, 0)[0].leader
            acked: list[float] = []
            stop = threading.Event()

            def write() -> None:
                producer = Producer({"bootstrap.servers": triple.bootstrap, "acks": "all",
                                     "enable.idempotence": True, "linger.ms": 0, "retry.backoff.ms": 50,
                                     "retry.backoff.max.ms": 100, "topic.metadata.refresh.interval.ms": 500,
                                     "message.timeout.ms": 60_000})
                while not stop.is_set():
                    producer.produce(topic, value=b"x", on_delivery=lambda e, m: e is None and acked.append(time.monotonic()))
                    producer.poll(0.005)
                producer.flush(60)

            writer = threading.Thread(target=write)
            writer.start()
            time.sleep(1.0)
            killed_at = time.monotonic()
            triple.kill(leader, sig)
            wait(lambda: any(t > killed_at + 0.05 for t in acked) and zk.get_partition_state(topic, 0)[0].leader
                 not in (-1, leader), 60)
            first = min(t for t in acked if t > killed_at + 0.05)
            stop.set()
            writer.join(90)
            times.append(first - killed_at)
            triple.start(leader)
            wait(lambda: len(zk.get_partition_state(topic, 0)[0].isr) == 3, 60)
            print(f"  {name} {kill + 1}: leader {leader}, first accepted write after {times[-1]:.2f} s",
                  flush=True)
    finally:
        zk.close()
    report(f"failover leader {name} -> first write", kills=len(times), median_s=statistics.median(times),
           max_s=max(times), session_timeout_ms=args.session_timeout_ms)


def wait(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--terms", type=int, default=5)
    parser.add_argument("--session-timeout-ms", type=int, default=6_000)
    parser.add_argument("--throughput", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="pylog-bench-replication-"))
    zookeeper = ZooKeeperProcess(root / "zk", find_free_port(), root / "zk-log",
                                 settings={**DEFAULT_SETTINGS, "tickTime": "500"})
    zookeeper.start(timeout_s=60)
    props = {"zookeeper.session.timeout.ms": str(args.session_timeout_ms), "replica.lag.time.max.ms": "10000",
             "log.flush.offset.checkpoint.interval.ms": "60000"}
    single = triple = None
    try:
        single = Cluster(root / "single", f"{zookeeper.connect_string}/single", 1, props)
        triple = Cluster(root / "triple", f"{zookeeper.connect_string}/triple", 3, props)
        if args.throughput:
            throughput(args, single, triple)
        single.stop()
        if args.kills:
            failover(args, triple, signal.SIGKILL, args.kills)
        if args.terms:
            failover(args, triple, signal.SIGTERM, args.terms)
    finally:
        for cluster in (single, triple):
            if cluster is not None:
                cluster.stop()
        zookeeper.stop()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
