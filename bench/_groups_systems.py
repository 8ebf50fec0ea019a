"""The clusters of ``bench/consumer_groups.py``: a one-broker pylog and a one-broker Apache Kafka,
each of them optional (``--systems pylog`` runs pylog alone, for the smoke test), with what the
group rows need beyond ``bench/_sbs_tools.py``: a restart of the broker timed from the new
process to its first ApiVersions answer, raw OffsetCommit/OffsetFetch on one connection, and
test data written with pylog's producer (the same records on both systems).

Both brokers run with ``group.initial.rebalance.delay.ms=0`` (the issue's condition for the
rebalance row); everything else about groups is each system's default, including Kafka 4.1's
``group.coordinator.append.linger.ms`` of 5 ms (its new coordinator runtime gathers writes for
up to 5 ms before it appends them to ``__consumer_offsets``).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from _sbs_tools import ToolFailed, _ServerJvmInstall
from broker.client.admin import AdminClient
from broker.client.config import ClientConfig
from broker.client.connection import BrokerConnection
from broker.client.errors import KafkaError
from broker.tools.broker_process import answers_api_versions
from broker.tools.kafka_peer import ApacheKafkaCluster, find_kafka_install
from broker.tools.perf_local import LocalCluster
from broker.wire import ApiKey, ErrorCode

__all__ = ["GroupSystems", "Restart", "produce", "commit_offsets", "fetch_offsets", "cpu_seconds"]

BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "1",
                   "auto.create.topics.enable": "false"}
_READY_POLL_S = 0.01
_START_TIMEOUT_S = 180.0
_STOP_TIMEOUT_S = 60.0
_CREATE_TIMEOUT_MS = 120_000


class Restart:
    """Times of one broker restart (``time.monotonic()`` seconds): the new process spawned, and
    the first ApiVersions it answered (the broker serves: the rows' "ready")."""

    def __init__(self, spawned: float, ready: float) -> None:
        self.spawned = spawned
        self.ready = ready


class GroupSystems:
    """``with GroupSystems(root, ["pylog", "kafka"]) as systems: systems.bootstrap("kafka")``."""

    def __init__(self, root: Path, systems: list[str], pylog_settings: dict[str, str] | None = None) -> None:
        """``pylog_settings``: broker properties for pylog only, over ``BROKER_SETTINGS``."""
        self.root = root
        self.names = list(systems)
        self.pylog_settings = {**BROKER_SETTINGS, **(pylog_settings or {})}
        self.pylog: LocalCluster | None = None
        self.kafka: ApacheKafkaCluster | None = None

    def __enter__(self) -> "GroupSystems":
        try:
            if "pylog" in self.names:
                self.pylog = LocalCluster(1, self.pylog_settings, root=self.root / "pylog")
                self.pylog.root.mkdir(parents=True)
                self.pylog.start()
            if "kafka" in self.names:
                install = find_kafka_install()
                self.kafka = ApacheKafkaCluster(self.root / "kafka", 1, BROKER_SETTINGS,
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

    def port(self, system: str) -> int:
        return self.pylog.ports[0] if system == "pylog" else self.kafka.ports[0]

    def broker_pid(self, system: str) -> int | None:
        return self.pylog.processes[0].pid if system == "pylog" else self.kafka.nodes[0].running_pid()

    def create_topic(self, system: str, topic: str, partitions: int) -> None:
        """Create and wait; a CreateTopics that timed out (1,000 partitions on a loaded machine)
        is sent again, and TOPIC_ALREADY_EXISTS then means the first one got through."""
        config = ClientConfig(request_timeout_ms=_CREATE_TIMEOUT_MS)
        deadline = time.monotonic() + 3 * _CREATE_TIMEOUT_MS / 1000
        with AdminClient(self.bootstrap(system), config=config) as admin:
            while True:
                try:
                    admin.create_topics(topic, partitions, 1, {}, timeout_ms=_CREATE_TIMEOUT_MS)
                    return
                except KafkaError as exc:
                    if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                        return
                    if not exc.retriable or time.monotonic() > deadline:
                        raise ToolFailed(f"{system}: creating {topic}: {exc}") from exc

    def restart(self, system: str) -> Restart:
        """Stop the broker cleanly (SIGTERM: both write their clean-shutdown markers, so neither
        recovers its log on start), start it again on the same data and port."""
        port = self.port(system)
        if system == "pylog":
            popen = self.pylog.processes[0]
            popen.terminate()
            popen.wait(_STOP_TIMEOUT_S)
            spawned = time.monotonic()
            self.pylog.processes[0] = _spawn_pylog(self.pylog.root / "broker-1")
            starter = None
        else:
            self.kafka.stop()
            spawned = time.monotonic()
            starter = threading.Thread(target=self.kafka.start, daemon=True)
            starter.start()
        deadline = spawned + _START_TIMEOUT_S
        while not answers_api_versions("127.0.0.1", port, timeout_s=0.5):
            if time.monotonic() > deadline:
                raise ToolFailed(f"{system} did not answer ApiVersions {_START_TIMEOUT_S:.0f} s after a restart")
            time.sleep(_READY_POLL_S)
        ready = time.monotonic()
        if starter is not None:
            starter.join(_START_TIMEOUT_S)
        return Restart(spawned, ready)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process, all its threads (``/proc/PID/stat``); 0 if unknown.
    On a shared machine this is the number that does not move with the load."""
    import os

    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spawn_pylog(directory: Path) -> subprocess.Popen:
    """The broker process ``LocalCluster`` started, again: same config file, same data."""
    with open(directory / "broker.log", "ab") as log_file:
        command = [sys.executable, "-m", "broker.server", "--config", str(directory / "server.properties")]
        return subprocess.Popen(command,
                                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                cwd=Path(__file__).resolve().parents[1], start_new_session=True)


def produce(bootstrap: str, topic: str, records: int, size: int = 100) -> None:
    """``records`` values of ``size`` bytes, spread over the partitions (pylog's producer, acks=1)."""
    from broker.client import Producer

    value = b"x" * size
    with Producer(bootstrap, acks=1, enable_idempotence=False, linger_ms=5, batch_bytes_max=131_072) as producer:
        for _ in range(records):
            producer.send(topic, value)
        producer.flush()


def connect(system_bootstrap: str) -> BrokerConnection:
    """A connection to the one broker (with one broker it is every group's coordinator)."""
    host, port = system_bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    conn.connect()
    return conn


def commit_offsets(conn: BrokerConnection, commits: list[tuple[str, str, dict[int, int]]]) -> None:
    """Simple commits (generation -1), one OffsetCommit per ``(group, topic, {partition: offset})``,
    pipelined; raises on the first partition error."""
    version = conn.version_for(ApiKey.OFFSET_COMMIT, min_version=2, max_version=8)

    def body(group: str, topic: str, offsets: dict[int, int]) -> dict:
        return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [{"name": topic, "partitions": [
                    {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                     "committed_metadata": ""} for p, o in offsets.items()]}]}

    def take() -> None:
        response = conn.receive()
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise ToolFailed(f"OffsetCommit {t.name}-{p.partition_index}: error {p.error_code}")

    for commit in commits:
        if conn.in_flight_count >= 5:
            take()
        conn.send(ApiKey.OFFSET_COMMIT, body(*commit), version)
    while conn.in_flight_count:
        take()


def fetch_offsets(conn: BrokerConnection, group: str, topic: str, partitions: list[int]) -> tuple[int, dict[int, int]]:
    """One OffsetFetch (v1-7 shape): ``(error code, {partition: committed offset})``; the group's
    error, else the first partition error."""
    version = conn.version_for(ApiKey.OFFSET_FETCH, min_version=1, max_version=7)
    response = conn.request(ApiKey.OFFSET_FETCH, {"group_id": group, "require_stable": False,
                                                  "topics": [{"name": topic, "partition_indexes": partitions}]},
                            version)
    code = getattr(response, "error_code", 0) or 0
    offsets: dict[int, int] = {}
    for t in response.topics:
        for p in t.partitions:
            code = code or p.error_code
            offsets[p.partition_index] = p.committed_offset
    return code, offsets
