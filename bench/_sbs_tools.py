"""The two systems and the clients of ``bench/kafka_side_by_side.py``.

Systems: a pylog cluster (``broker.tools.perf_local.LocalCluster``: ZooKeeper + N
``python -m broker.server``) and an Apache Kafka KRaft cluster (``broker.tools.kafka_peer``), both
on free loopback ports under one temporary directory. Kafka's broker runs with the JVM flags of
Kafka's own ``kafka-server-start.sh`` (1 GB heap, G1, ``MaxGCPauseMillis=20``), not the launcher's
test flags (C1 only, serial GC), which are tuned for a fast start and would handicap it here.

Clients (each a separate process, so no client shares a GIL or a JVM with the benchmark):

- ``java_producer_perf``: Kafka's ``kafka-producer-perf-test`` (``ProducerPerformance``), full JIT;
  ``producer_perf_windows`` also yields its 5-second window lines while it runs.
- ``java_e2e``: Kafka's ``EndToEndLatency`` (one record at a time: send, ``get``, poll until it is
  back). It commits its group's offsets when done, which both systems serve (pylog's internal
  topics get the replication factor ApacheKafkaCluster gives Kafka's, min(3, brokers): with the
  default 3 a 1-broker pylog could not create ``__consumer_offsets`` and the commit timed out after
  60 s); the percentiles come before the commit, so the process is stopped once it printed them.
- ``pylog_perf``: ``python -m broker.tools.perf MODE --json ...`` (``pylog perf``).
- ``assign_consumers``: ``bench/_sbs_consume.py`` workers (confluent-kafka or pylog's client with
  ``assign()``; no group, so the consumers measure fetching only).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from broker.tools.kafka_peer import TOOL_CLASSES, ApacheKafkaCluster, KafkaInstall, find_kafka_install
from broker.tools.perf_local import LocalCluster

__all__ = ["Systems", "java_producer_perf", "start_producer_perf", "finish_producer_perf",
           "producer_perf_windows", "java_e2e", "pylog_perf", "assign_consumers", "start_assign_consumer",
           "wait_ready", "go", "finish_assign_consumer", "end_offsets", "ToolFailed", "load_average"]

REPO = Path(__file__).resolve().parents[1]
_LOG4J = REPO / "conf" / "apache-kafka" / "log4j2.properties"
_CONSUME_WORKER = Path(__file__).resolve().parent / "_sbs_consume.py"
# kafka-server-start.sh's KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS defaults.
_SERVER_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
               "-Djava.awt.headless=true"]
# The consumer workers wait for this signal after "ready", so several start polling at once.
_GO_SIGNAL = signal.SIGUSR1
_CLIENT_JVM = ["-Xmx1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]

_FINAL = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
_WINDOW = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                     r"([\d.]+) ms max latency\.$")
_E2E = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")
_E2E_AVG = re.compile(r"Avg latency: ([\d.]+) ms")


class ToolFailed(RuntimeError):
    """A client exited badly or did not finish in its time; the row is reported as failed."""


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


@dataclass(frozen=True)
class _ServerJvmInstall(KafkaInstall):
    """The fetched jars, with Kafka's own server JVM flags for the broker."""

    def command(self, main_class: str, args, heap: str = "-Xmx512m", jvm_options=()) -> list[str]:
        if main_class != "kafka.Kafka":
            return super().command(main_class, args, heap, jvm_options)
        return [self.java, *_SERVER_JVM, *jvm_options, f"-Dlog4j2.configurationFile={_LOG4J}", "-cp",
                self.classpath, main_class, *args]


class Systems:
    """pylog and Apache Kafka, each with ``brokers`` brokers, started together and stopped together."""

    def __init__(self, root: Path, brokers: int) -> None:
        self.root = root
        self.brokers = brokers
        self.pylog: LocalCluster | None = None
        self.kafka: ApacheKafkaCluster | None = None

    def __enter__(self) -> "Systems":
        overrides = {"min.insync.replicas": "1"}
        internal_topics = {"offsets.topic.replication.factor": str(min(3, self.brokers)),
                           "transaction.state.log.replication.factor": str(min(3, self.brokers)),
                           "transaction.state.log.min.isr": str(min(2, self.brokers))}
        try:
            self.pylog = LocalCluster(self.brokers, {**overrides, **internal_topics},
                                      root=self.root / f"pylog-{self.brokers}")
            self.pylog.root.mkdir(parents=True)
            self.pylog.start()
            install = find_kafka_install()
            self.kafka = ApacheKafkaCluster(self.root / f"kafka-{self.brokers}", self.brokers, overrides,
                                            install=_ServerJvmInstall(install.java, install.libs))
            self.kafka.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        if self.kafka is not None:
            self.kafka.stop()
        if self.pylog is not None:
            self.pylog.stop()

    def bootstrap(self, system: str) -> str:
        return self.pylog.bootstrap if system == "pylog" else self.kafka.bootstrap

    def create_topic(self, system: str, topic: str, partitions: int, replication: int,
                     config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap(system)})
        admin.create_topics([NewTopic(topic, partitions, replication, config=config or {})])[topic].result(120)
        _wait_for_leaders(self.bootstrap(system), topic, partitions)


def _wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is not None and metadata.error is None and len(metadata.partitions) == partitions and all(
                p.leader >= 0 for p in metadata.partitions.values()):
            return
        time.sleep(0.2)
    raise ToolFailed(f"topic {topic}: not every partition has a leader after {timeout_s} s")


def _java(install: KafkaInstall, tool: str, args: list[str]) -> list[str]:
    # Full JIT (C2) and G1, as Kafka's scripts run the tools: the measuring client must not be
    # the bottleneck of either system.
    return [install.java, *_CLIENT_JVM, f"-Dlog4j2.configurationFile={_LOG4J}", "-cp", install.classpath,
            TOOL_CLASSES[tool], *args]


def _producer_args(bootstrap: str, topic: str, records: int, size: int, props: dict[str, str]) -> list[str]:
    return ["--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in props.items())]


def java_producer_perf(bootstrap: str, topic: str, records: int, size: int, props: dict[str, str],
                       timeout_s: float) -> dict:
    """``kafka-producer-perf-test`` to completion: its summary line as a dict."""
    return finish_producer_perf(start_producer_perf(bootstrap, topic, records, size, props), timeout_s)


def start_producer_perf(bootstrap: str, topic: str, records: int, size: int,
                        props: dict[str, str]) -> subprocess.Popen:
    install = find_kafka_install()
    return subprocess.Popen(_java(install, "kafka-producer-perf-test",
                                  _producer_args(bootstrap, topic, records, size, props)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def finish_producer_perf(popen: subprocess.Popen, timeout_s: float) -> dict:
    try:
        out, err = popen.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.communicate()
        raise ToolFailed(f"kafka-producer-perf-test did not finish in {timeout_s:.0f} s") from None
    match = _FINAL.search(out.decode(errors="replace"))
    if popen.returncode != 0 or match is None:
        raise ToolFailed(f"kafka-producer-perf-test exited {popen.returncode}: "
                         f"{(err or out).decode(errors='replace')[-600:]}")
    records, rate, mb, avg, worst, p50, p95, p99, p999 = match.groups()
    return {"records": int(records), "records_per_sec": float(rate), "mb_per_sec": float(mb),
            "latency_ms": {"avg": float(avg), "max": float(worst), "p50": float(p50), "p95": float(p95),
                           "p99": float(p99), "p99_9": float(p999)}}


def producer_perf_windows(bootstrap: str, topic: str, size: int, props: dict[str, str], duration_s: float,
                          bytes_max: int) -> list[dict]:
    """Produce without a throttle for ``duration_s`` (or until ``bytes_max``); the tool's 5-second
    windows, each with the bytes stored before it ended (``stored_bytes``)."""
    records = bytes_max // size
    popen = start_producer_perf(bootstrap, topic, records, size, props)
    windows, sent = [], 0
    started = time.monotonic()
    try:
        for line in popen.stdout:
            match = _WINDOW.match(line.decode(errors="replace").strip())
            if match is None:
                continue
            count, rate, mb = int(match.group(1)), float(match.group(2)), float(match.group(3))
            sent += count
            windows.append({"elapsed_s": round(time.monotonic() - started, 1), "records": count,
                            "records_per_sec": rate, "mb_per_sec": mb, "stored_bytes": sent * size,
                            "latency_avg_ms": float(match.group(4))})
            if time.monotonic() - started > duration_s:
                break
    finally:
        if popen.poll() is None:
            popen.terminate()
        try:
            popen.wait(30)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
    if not windows:
        raise ToolFailed(f"kafka-producer-perf-test printed no window: {popen.stderr.read()[-600:]!r}")
    return windows


def java_e2e(bootstrap: str, topic: str, records: int, acks: str, size: int, timeout_s: float) -> dict:
    """Kafka's ``EndToEndLatency`` (whole-ms percentiles, as it prints them)."""
    install = find_kafka_install()
    popen = subprocess.Popen(_java(install, "kafka-e2e-latency", [bootstrap, topic, str(records), acks, str(size)]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    text, average = "", None
    try:
        for raw in popen.stdout:  # the tool prints its results, then commits (which pylog cannot serve)
            line = raw.decode(errors="replace")
            text += line
            average = _E2E_AVG.search(line) or average
            match = _E2E.search(line)
            if match is not None:
                p50, p99, p999 = (float(g) for g in match.groups())
                return {"records": records, "latency_ms": {"avg": float(average.group(1)) if average else None,
                                                           "p50": p50, "p99": p99, "p99_9": p999}}
            if time.monotonic() > deadline:
                break
    finally:
        if popen.poll() is None:
            popen.kill()
        popen.wait()
    raise ToolFailed(f"kafka-e2e-latency printed no percentiles: {text[-600:]}")


def pylog_perf(mode: str, args: list[str], timeout_s: float) -> dict:
    """``pylog perf MODE --json ARGS`` in its own process; its JSON line."""
    command = [sys.executable, "-m", "broker.tools.perf", mode, "--json", *args]
    try:
        result = subprocess.run(command, capture_output=True, timeout=timeout_s, cwd=REPO,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ToolFailed(f"pylog perf {mode} did not finish in {timeout_s:.0f} s") from None
    lines = [line for line in result.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise ToolFailed(f"pylog perf {mode} exited {result.returncode}: "
                         f"{result.stderr.decode(errors='replace')[-600:]}")
    return json.loads(lines[-1])


def start_assign_consumer(client: str, bootstrap: str, topic: str, partitions: list[int], records: int,
                          idle_timeout_s: float) -> subprocess.Popen:
    command = [sys.executable, str(_CONSUME_WORKER), "--client", client, "--bootstrap", bootstrap,
               "--topic", topic, "--partitions", ",".join(map(str, partitions)), "--records", str(records),
               "--idle-timeout-s", str(idle_timeout_s)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                            stdin=subprocess.DEVNULL)


def wait_ready(popen: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """The worker prints ``ready`` once it is assigned and positioned (before its first poll)."""
    import select

    readable, _, _ = select.select([popen.stdout], [], [], timeout_s)
    line = popen.stdout.readline().decode().strip() if readable else "(nothing in time)"
    if line != "ready":
        popen.kill()
        raise ToolFailed(f"consumer worker did not get ready: {line!r} {popen.stderr.read()[-600:]!r}")


def finish_assign_consumer(popen: subprocess.Popen, timeout_s: float) -> dict:
    try:
        out, err = popen.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.communicate()
        raise ToolFailed(f"consumer worker did not finish in {timeout_s:.0f} s") from None
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    if popen.returncode != 0 or not lines:
        raise ToolFailed(f"consumer worker exited {popen.returncode}: {err.decode(errors='replace')[-600:]}")
    return json.loads(lines[-1])


def assign_consumers(client: str, bootstrap: str, topic: str, partition_sets: list[list[int]],
                     records_each: list[int], timeout_s: float) -> list[dict]:
    """One worker process per partition set, started together (each waits until all are ready)."""
    workers = [start_assign_consumer(client, bootstrap, topic, parts, n, 10.0)
               for parts, n in zip(partition_sets, records_each)]
    try:
        for worker in workers:
            wait_ready(worker)
        for worker in workers:
            go(worker)
        return [finish_assign_consumer(worker, timeout_s) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


def go(popen: subprocess.Popen) -> None:
    """Let a ready consumer worker start polling."""
    os.kill(popen.pid, _GO_SIGNAL)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The high watermark of each partition (confluent-kafka's ListOffsets; no group needed)."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "side-by-side-offsets",
                                         "enable.auto.commit": False, "log_level": 0})
    try:
        return [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)]
    finally:
        consumer.close()
