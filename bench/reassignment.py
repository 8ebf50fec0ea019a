"""Partition reassignment under a replication throttle, pylog and Apache Kafka (issue 18).

Each system is a 2-broker cluster; every step uses the same pylog admin client on both (the
throttles are what ``pylog reassign --throttle`` writes, the same configs as
kafka-reassign-partitions), and the same librdkafka producer (acks=1, ``--value-bytes`` values)
writes ``--size-mb`` MiB to one partition first:

* ``throttled``: the partition (on broker 1 only) moves to broker 2 under
  ``--throttle-bytes`` B/s (leader and follower rates on both brokers, the partition's
  replicas listed as kafka-reassign-partitions lists them). Time from AlterPartitionReassignments
  to ListPartitionReassignments showing none in progress, against the throttle-bound time
  ``log bytes / rate`` (1 GiB at 10 MB/s: 107 s). Target: ratio within 1 +/- 0.10.
* ``catch-up``: the same move unthrottled; the new replica's copy rate (its log size, polled
  with DescribeLogDirs, reaching the leader's), against
* ``normal``: the follower fetch rate of normal replication: the follower of an RF 2 partition
  is stopped (SIGTERM) while the same bytes are written, then started on its data: the rate at
  which it catches up from serving again, measured the same way. Target: catch-up >= 0.7x normal.
  Both also print the brokers' CPU seconds per GiB copied (from /proc, leader and follower apart):
  on a loaded machine the wall rates swing with the neighbours, the CPU cost much less.
  Each copy is timed twice: from the request (the Alter call; for ``normal`` the follower serving
  again) to the poll that saw every byte, and *fetching*: between the first poll that saw bytes
  arrive and the last that saw some missing (``Copy``), the catch-up the issue compares. The
  whole window of a move also holds its start (controller, new log, 0.1-0.2 s) and its end (ISR
  join, the move's completion and the old log's deletion, the poll's answer waiting behind them),
  fixed costs that weigh on a copy of 1-4 s. The second "catch-up" row is the fetching window.

The machine is shared: the 1-minute load average is printed with every row. Medians of
``--runs`` runs. ``python bench/reassignment.py [--systems pylog,kafka] [--size-mb 1024]
[--throttle-bytes 10000000] [--runs 1]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import report  # noqa: E402
from _sbs_tools import _ServerJvmInstall  # noqa: E402
from broker.client.admin import AdminClient  # noqa: E402
from broker.client.config import ClientConfig  # noqa: E402
from broker.client.partition_admin import alter_partition_reassignments, list_partition_reassignments  # noqa: E402
from broker.tools.kafka_peer import ApacheKafkaCluster, find_kafka_install  # noqa: E402
from broker.tools.broker_process import answers_api_versions  # noqa: E402
from broker.tools.log_dirs import describe_log_dirs  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402
from broker.tools.reassign_throttle import clear_throttles, move_map, set_throttles  # noqa: E402

DEADLINE_S = 1800.0
POLL_S = 0.1
SETTINGS = {"auto.create.topics.enable": "false", "offsets.topic.replication.factor": "1",
            "log.segment.bytes": str(256 << 20)}


def load() -> float:
    return os.getloadavg()[0]


def start(system: str, root: Path):
    if system == "pylog":
        cluster = LocalCluster(2, SETTINGS, root=root / "pylog")
        cluster.root.mkdir(parents=True)
        cluster.start()
        return cluster
    install = find_kafka_install()
    cluster = ApacheKafkaCluster(root / "kafka", 2, SETTINGS, install=_ServerJvmInstall(install.java, install.libs))
    cluster.start()
    return cluster


def create_topic(bootstrap: str, topic: str, replicas: list[int]) -> None:
    from confluent_kafka.admin import AdminClient as KafkaAdmin, NewTopic

    admin = KafkaAdmin({"bootstrap.servers": bootstrap})  # held until the result is in
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])])[topic].result(60)
    deadline = time.monotonic() + 60
    while getattr(admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0), "leader", -1) != replicas[0]:
        assert time.monotonic() < deadline, f"no leader for {topic}"
        time.sleep(POLL_S)


def delete_topic(admin: AdminClient, topic: str) -> None:
    admin.delete_topics(topic, timeout_ms=60_000)


def produce(bootstrap: str, topic: str, total_bytes: int, value_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                         "compression.type": "none", "queue.buffering.max.kbytes": 256_000})
    value, errors = os.urandom(value_bytes), []
    for i in range(total_bytes // value_bytes):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 100 == 0:
            producer.poll(0)
    assert producer.flush(600) == 0 and not errors, errors[:3]


def known(admin: AdminClient, broker: int) -> bool:
    admin.cluster.refresh_brokers()
    return broker in admin.cluster.brokers


def settle() -> None:
    """The bytes just written on disk before a copy starts (``sync``), so that neither copy shares
    the disk and the CPUs with the kernel writing back the producer's bytes: normal replication's
    follower restart left about a second for that, a move started at once had none."""
    os.sync()


def replica_bytes(admin: AdminClient, broker: int, topic: str) -> int:
    for log_dir in describe_log_dirs(admin, broker, [topic]):
        for p in log_dir["partitions"]:
            if p["partition"] == f"{topic}-0" and not p["isFuture"]:
                return p["size"]
    return 0


def wait(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(POLL_S)


def broker_pids(system: str, cluster) -> list[int]:
    if system == "pylog":
        return [p.pid for p in cluster.processes]
    return [pid for node in cluster.nodes if (pid := node.running_pid()) is not None]


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of the processes (and their waited-for children)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def cpu_each(pids: list[int]) -> list[float]:
    return [cpu_s([pid]) for pid in pids]


class Copy:
    """A replica's copy, polled every ``POLL_S``: the window from ``started`` (the request, or the
    follower serving again) to the first poll that saw every byte, and the *fetching* window, from
    the first poll that saw bytes arrive to the last poll that still saw some missing (the copy
    itself: the controller's work, the new log's creation and the first round trip left out at
    the start; the new replica joining the ISR, the move's completion, the old replica's deletion
    and a poll answered late by a broker busy with them left out at the end). Each with the
    brokers' CPU seconds (one number per broker: leader, follower)."""

    def __init__(self, admin: AdminClient, broker: int, topic: str, target: int, pids: list[int],
                 base: int = 0, started: tuple[float, list[float]] | None = None) -> None:
        self.started, self.cpu0 = started or (time.monotonic(), cpu_each(pids))
        self.base, self.target = base, target
        first = last = None
        deadline = self.started + DEADLINE_S
        while True:
            asked = time.monotonic()
            size = replica_bytes(admin, broker, topic)
            sample = ((asked + time.monotonic()) / 2, cpu_each(pids), size)  # the size is from mid-call
            if size >= target:
                break
            if size > base:
                first = first or sample
                last = sample
            assert time.monotonic() < deadline, f"timed out waiting for {topic} on broker {broker}"
            time.sleep(POLL_S)
        self.ended, self.cpu1 = time.monotonic(), sample[1]
        if first is None or last is first:  # too fast for two polls inside: the whole window
            first, last = (self.started, self.cpu0, base), (self.ended, self.cpu1, target)
        self.first, self.last = first, last

    def window(self, fetching: bool) -> tuple[float, list[float], float]:
        """(seconds, CPU seconds per broker, bytes) of the whole or the fetching window."""
        if fetching:
            (t0, cpu0, b0), (t1, cpu1, b1) = self.first, self.last
        else:
            t0, cpu0, b0, t1, cpu1, b1 = self.started, self.cpu0, self.base, self.ended, self.cpu1, self.target
        return max(t1 - t0, 1e-3), [b - a for a, b in zip(cpu0, cpu1)], max(b1 - b0, 1)

    def rate(self, fetching: bool = False) -> float:
        seconds, _, size = self.window(fetching)
        return size / seconds

    def cpu_per_gib(self, fetching: bool = False) -> list[float]:
        _, cpu, size = self.window(fetching)
        return [c / (size / (1 << 30)) for c in cpu]

    def describe(self) -> str:
        whole, fetching = self.cpu_per_gib(), self.cpu_per_gib(True)
        return (f"{self.rate() / 1e6:.1f} MB/s, CPU {sum(whole):.2f} s/GiB (leader {whole[0]:.2f}, follower "
                f"{whole[1]:.2f}); fetching ({self.first[0] - self.started:.2f}-{self.last[0] - self.started:.2f} "
                f"s of {self.ended - self.started:.2f} s, {(self.last[2] - self.first[2]) >> 20} MiB): "
                f"{self.rate(True) / 1e6:.1f} MB/s, CPU {sum(fetching):.2f} s/GiB (leader {fetching[0]:.2f}, "
                f"follower {fetching[1]:.2f})")


def stop_follower(system: str, cluster) -> None:
    """SIGTERM broker 2 (a controlled shutdown: it leaves the ISR) and wait for its exit."""
    if system == "pylog":
        popen = cluster.processes[1]
        popen.send_signal(signal.SIGTERM)
        popen.wait(120)
        return
    node = cluster.nodes[1]
    pid = node.running_pid()
    os.kill(pid, signal.SIGTERM)
    wait(lambda: node.running_pid() is None, "Kafka node 2 to stop")


def start_follower(system: str, cluster) -> None:
    """Broker 2 again, on its data, until it serves."""
    if system == "pylog":
        directory = cluster.root / "broker-2"
        with open(directory / "broker.log", "ab") as log_file:
            cluster.processes[1] = subprocess.Popen(
                [sys.executable, "-m", "broker.server", "--config", str(directory / "server.properties")],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, cwd=cluster.broker_root,
                start_new_session=True)
        wait(lambda: answers_api_versions("127.0.0.1", cluster.ports[1]), "pylog broker 2 to serve")
        return
    cluster.start()  # starts the stopped node, on its data


def normal_rate(system: str, cluster, admin: AdminClient, topic: str, args) -> Copy:
    """The follower (broker 2) of an RF 2 partition, down while the bytes were written, catches up."""
    create_topic(cluster.bootstrap, topic, [1, 2])
    stop_follower(system, cluster)
    produce(cluster.bootstrap, topic, args.size_mb << 20, args.value_bytes)
    leader = replica_bytes(admin, 1, topic)
    settle()
    start_follower(system, cluster)
    wait(lambda: known(admin, 2), "broker 2 registered again")  # it serves before it registers
    base = replica_bytes(admin, 2, topic)
    copy = Copy(admin, 2, topic, leader, broker_pids(system, cluster), base)
    print(f"  normal: follower restarted at {base >> 20} of {leader >> 20} MiB, caught up at {copy.describe()}",
          flush=True)
    delete_topic(admin, topic)
    return copy


def reassign(admin: AdminClient, bootstrap: str, topic: str, args, throttle: int | None,
             pids: list[int]) -> tuple[float, Copy, int]:
    """Move the partition from broker 1 to broker 2: (seconds to done, the copy, log bytes)."""
    create_topic(bootstrap, topic, [1])
    produce(bootstrap, topic, args.size_mb << 20, args.value_bytes)
    leader = replica_bytes(admin, 1, topic)
    wanted = {(topic, 0): [2]}
    if throttle is not None:
        set_throttles(admin, move_map({}, wanted, {(topic, 0): [1]}), throttle, sys.stdout)
    settle()
    started = (time.monotonic(), cpu_each(pids))
    assert alter_partition_reassignments(admin, wanted) == {(topic, 0): (0, None)}
    copy = Copy(admin, 2, topic, leader, pids, started=started)  # the whole window from the request
    wait(lambda: not list_partition_reassignments(admin), f"{topic} reassignment")
    seconds = time.monotonic() - started[0]
    if throttle is not None:
        clear_throttles(admin, wanted, sys.stdout)
    delete_topic(admin, topic)
    return seconds, copy, leader


def one_run(system: str, cluster, run: int, args) -> dict[str, float]:
    row = {"load_1m": load()}
    steps = args.steps.split(",")
    with AdminClient(cluster.bootstrap, config=ClientConfig(request_timeout_ms=60_000)) as admin:
        if "catchup" in steps:
            normal = normal_rate(system, cluster, admin, f"normal-{run}", args)
            _, catchup, _ = reassign(admin, cluster.bootstrap, f"catchup-{run}", args, None,
                                     broker_pids(system, cluster))
            print(f"  catch-up: {catchup.describe()}", flush=True)
            for name, copy in (("normal", normal), ("catchup", catchup)):
                row[f"{name}_mb_s"] = copy.rate() / 1e6
                row[f"{name}_cpu_s_gib"] = sum(copy.cpu_per_gib())
                row[f"{name}_fetching_mb_s"] = copy.rate(True) / 1e6
                row[f"{name}_fetching_cpu_s_gib"] = sum(copy.cpu_per_gib(True))
        if "throttled" in steps:
            seconds, _, log_bytes = reassign(admin, cluster.bootstrap, f"throttled-{run}", args,
                                                args.throttle_bytes, broker_pids(system, cluster))
            row["throttled_s"], row["expected_s"] = seconds, log_bytes / args.throttle_bytes
        row["load_1m_end"] = load()
    print(system, run, {k: round(v, 2) for k, v in row.items()}, flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default="pylog,kafka")
    parser.add_argument("--size-mb", type=int, default=1024, help="MiB written to the partition moved")
    parser.add_argument("--throttle-bytes", type=int, default=10_000_000, help="B/s")
    parser.add_argument("--value-bytes", type=int, default=64 << 10)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--steps", default="catchup,throttled", help="catchup (with normal), throttled")
    args = parser.parse_args(argv)
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-reassign-") as tmp:
        for system in args.systems.split(","):
            cluster = start(system, Path(tmp))
            try:
                for run in range(args.runs):
                    results.setdefault(system, []).append(one_run(system, cluster, run, args))
            finally:
                cluster.stop()
    print(f"\nmedians of {args.runs} run(s), {args.size_mb} MiB moved, throttle {args.throttle_bytes} B/s")
    medians = {system: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for system, rows in results.items()}
    for system, med in medians.items():
        if "throttled_s" in med:
            report(f"reassign throttled ({system})", seconds=med["throttled_s"], throttle_bound_s=med["expected_s"],
                   ratio=med["throttled_s"] / med["expected_s"], target="0.90-1.10", load_1m=med["load_1m"])
        if "catchup_mb_s" in med:
            report(f"reassign catch-up ({system})", mb_per_s=med["catchup_mb_s"],
                   normal_follower_mb_per_s=med["normal_mb_s"], ratio=med["catchup_mb_s"] / med["normal_mb_s"],
                   target=">= 0.7", cpu_s_per_gib=med["catchup_cpu_s_gib"],
                   normal_cpu_s_per_gib=med["normal_cpu_s_gib"], load_1m=med["load_1m"])
            report(f"reassign catch-up fetching ({system})", mb_per_s=med["catchup_fetching_mb_s"],
                   normal_follower_mb_per_s=med["normal_fetching_mb_s"],
                   ratio=med["catchup_fetching_mb_s"] / med["normal_fetching_mb_s"], target=">= 0.7",
                   cpu_s_per_gib=med["catchup_fetching_cpu_s_gib"],
                   normal_cpu_s_per_gib=med["normal_fetching_cpu_s_gib"], load_1m=med["load_1m"])
    if "pylog" in medians and "kafka" in medians:
        pylog, kafka = medians["pylog"], medians["kafka"]
        report("reassign pylog vs kafka (peer)", **{f"{k}_ratio": pylog[k] / kafka[k] for k in pylog
                                                     if k in ("throttled_s", "catchup_mb_s", "normal_mb_s")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
