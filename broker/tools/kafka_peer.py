"""Apache Kafka beside pylog: start a KRaft cluster of 1 or 3 brokers on loopback, and run Kafka's
own command-line tools, from the jars ``make setup`` fetched from Maven Central.

Apache Kafka is pylog's reference: the differential tests (``tests/peer``) run one scenario against
both and compare what a client sees, and the benchmarks (``bench/``) measure both in one run. Users
get the same launcher as ``pylog peer kafka up|down|status --dir D --brokers N``, to try a job
against the real thing before pointing it at a production cluster.

Files under the cluster directory ``D``:

- ``D/kafka-<node>/server.properties``: the broker's config (combined broker+controller roles;
  every node is a voter of the KRaft quorum, so 3 nodes survive the loss of one).
- ``D/kafka-<node>/data``: its log dir, formatted by Kafka's ``StorageTool`` with the cluster id in
  ``D/cluster.id`` (the same id for every node, as ``kafka-storage format`` requires).
- ``D/kafka-<node>/kafka.pid`` and ``kafka.out``: the java process id and its stdout and stderr
  (the log at WARN, and the JVM's own early errors); ``hs_err_pid<pid>.log`` if the JVM crashed.
- ``D/ports``: ``node client_port controller_port`` per line, so ``down`` and ``status`` need no
  arguments but the directory.

Nothing here downloads anything: a missing install raises ``KafkaPeerError`` naming
``make setup``. Processes are detached (their own session), so they outlive the command that
started them; ``stop`` sends SIGTERM (Kafka's controlled shutdown), then SIGKILL after a deadline.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.tools import kafka_tool_runner
from broker.tools.broker_process import answers_api_versions, is_process_alive
from broker.tools.zookeeper import reserve_free_port

__all__ = [
    "KAFKA_VERSION",
    "TOOL_CLASSES",
    "ApacheKafkaCluster",
    "KafkaInstall",
    "KafkaPeerError",
    "find_kafka_install",
    "run_kafka_tool",
]

KAFKA_VERSION = "4.1.1"  # also in conf/apache-kafka/pom.xml
REPO_ROOT = Path(__file__).resolve().parents[2]
_LOG4J_CONFIG = REPO_ROOT / "conf" / "apache-kafka" / "log4j2.properties"
_INSTALL_HINT = "run `make setup` (it fetches Apache Kafka from Maven Central into .cache/apache-kafka)"

# The scripts in Kafka's bin/ directory are `kafka-run-class.sh <main class>`; these are the
# classes of the 4.1 scripts, so a tool runs exactly as the script would run it.
TOOL_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
}

# A peer for tests and benchmarks on a 2-core machine: small heaps, no waiting for group joins,
# internal topics that fit the cluster's size.
_BROKER_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "auto.create.topics.enable": "false",
}
_HEAP = "-Xmx1g"
_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 30.0
_LOG_TAIL_LINES = 30


class KafkaPeerError(OSError):
    """Apache Kafka could not be found, started or stopped; the message says what to do."""


@dataclass(frozen=True)
class KafkaInstall:
    """The jars ``make setup`` copied: ``java -cp '<libs>/*' <main class>`` runs any part."""

    java: str
    libs: Path

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    def command(self, main_class: str, args: Sequence[str], heap: str = "-Xmx512m",
                jvm_options: Sequence[str] = ()) -> list[str]:
        return [self.java, heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *jvm_options,
                f"-Dlog4j2.configurationFile={_LOG4J_CONFIG}",
                "-cp", self.classpath, main_class, *args]


def find_kafka_install(env: Mapping[str, str] | None = None) -> KafkaInstall:
    """The fetched Apache Kafka (``KAFKA_PEER_LIBS`` overrides where its jars are)."""
    env = os.environ if env is None else env
    libs = Path(env.get("KAFKA_PEER_LIBS") or REPO_ROOT / ".cache" / "apache-kafka" / KAFKA_VERSION / "libs")
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise KafkaPeerError(f"Apache Kafka {KAFKA_VERSION} is not in {libs}: {_INSTALL_HINT}")
    java = shutil.which("java", path=env.get("PATH"))
    if java is None:
        raise KafkaPeerError(f"no `java` on PATH: {_INSTALL_HINT}")
    return KafkaInstall(java, libs)


def run_kafka_tool(tool: str, args: Sequence[str], *, timeout_s: float = 120.0, input: bytes | None = None,
                   install: KafkaInstall | None = None) -> subprocess.CompletedProcess:
    """Run one of Kafka's tools (a key of ``TOOL_CLASSES``) to completion, output captured.

    The tool's exit status is not checked here: tests assert it, with its stderr in the message.
    """
    if tool not in TOOL_CLASSES:
        raise ValueError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOL_CLASSES))}")
    install = install or find_kafka_install()
    # Fast path: a pooled JVM that runs tool after tool (kafka_tool_runner), where make setup built it.
    pooled = kafka_tool_runner.run(
        lambda main_class, main_args, options: install.command(main_class, main_args, jvm_options=options),
        install.classpath, install.libs, TOOL_CLASSES[tool], args, input=input, timeout_s=timeout_s,
        archive=_class_archive(install, kafka_tool_runner.RUNNER_CLASS), quiet_cds=_QUIET_CDS)
    if pooled is not None:
        return pooled
    # The tools' JVM is short-lived: C1 only and the serial GC start it about twice as fast, and the
    # tool's classes come parsed and verified from its class data archive (_class_archive).
    archive, recording, options = _class_archive(install, TOOL_CLASSES[tool]), None, []
    if archive is not None and archive.exists():
        options = [f"-XX:SharedArchiveFile={archive}", *_QUIET_CDS]
    elif archive is not None:
        recording = archive.with_name(f"{archive.name}.{uuid.uuid4().hex}.tmp")
        options = [f"-XX:ArchiveClassesAtExit={recording}", *_QUIET_CDS]
    try:
        # Writing the archive at exit costs a recording run ~2 s of CPU more (tens of seconds of wall
        # time at load 30, where a 90 s tool deadline ran out once): that time is not the tool's.
        result = subprocess.run(install.command(TOOL_CLASSES[tool], args, jvm_options=options),
                                input=input, capture_output=True,
                                timeout=timeout_s + (_RECORDING_ALLOWANCE_S if recording else 0.0),
                                stdin=None if input is not None else subprocess.DEVNULL)
        if recording is not None and recording.exists():
            recording.replace(archive)  # atomic: a tool started meanwhile reads a whole archive or none
        return result
    finally:
        if recording is not None:
            recording.unlink(missing_ok=True)


# Class data sharing (JEP 350, dynamic archives): a tool's JVM spends most of its ~1.5 s of CPU
# start-up loading, parsing and verifying a few thousand classes of the Kafka jars. The first run of
# a tool records them in an archive at exit; later runs map it and skip that work (kafka-get-offsets
# against a broker: 1.1 s of CPU per launch without, 0.6 s with). The archive is named by a fingerprint of the JVM and
# the jars, so a new install or JDK records a new one; a JVM that cannot use an archive (another
# JDK build, flags that do not match) runs without it, silently, exactly as before. Archives live
# beside the jars in the cache that `make setup` fills, never in the repository (jars somewhere
# read-only: no archive).
_RECORDING_ALLOWANCE_S = 60.0
_QUIET_CDS = ["-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # CDS warnings go to stdout


def _class_archive(install: KafkaInstall, main_class: str) -> Path | None:
    directory = install.libs.parent / "class-archives"
    try:
        directory.mkdir(exist_ok=True)
    except OSError:
        return None
    return directory / f"{main_class}-{_install_fingerprint(install)}.jsa"


@functools.cache
def _install_fingerprint(install: KafkaInstall) -> str:
    java = Path(install.java).resolve()
    parts = [str(java), str(java.stat().st_mtime_ns)]
    parts += [f"{jar.name}:{jar.stat().st_size}:{jar.stat().st_mtime_ns}" for jar in sorted(install.libs.glob("*.jar"))]
    runner = kafka_tool_runner.runner_directory(install.libs)  # its classes are in its archive too
    parts += [f"{path.name}:{path.stat().st_mtime_ns}" for path in sorted(runner.glob("*.class"))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class _Node:
    node_id: int
    client_port: int
    controller_port: int
    home: Path

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def pid_path(self) -> Path:
        return self.home / "kafka.pid"

    @property
    def out_path(self) -> Path:
        return self.home / "kafka.out"

    @property
    def jvm_options(self) -> list[str]:
        # A crash report next to kafka.out (the JVM's default is the working directory).
        return [f"-XX:ErrorFile={self.home / 'hs_err_pid%p.log'}"]

    def recorded_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def running_pid(self) -> int | None:
        pid = self.recorded_pid()
        return pid if pid is not None and is_process_alive(pid) and _is_kafka(pid, self.config_path) else None


class ApacheKafkaCluster:
    """A KRaft Apache Kafka of ``brokers`` nodes under ``directory`` (see the module docstring).

    ``ApacheKafkaCluster(d, brokers=3).start()`` formats and starts a new cluster (or starts the
    stopped nodes of an existing one, with their data); ``bootstrap`` is the client address list;
    ``stop()`` stops every node. ``overrides`` are broker properties applied to every node.
    """

    def __init__(self, directory: str | Path, brokers: int = 1, overrides: Mapping[str, str] | None = None,
                 install: KafkaInstall | None = None) -> None:
        if brokers < 1:
            raise ValueError(f"--brokers must be at least 1, got {brokers}")
        self.directory = Path(directory)
        self.install = install or find_kafka_install()
        self.overrides = dict(overrides or {})
        self.nodes = self._load_or_plan(brokers)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.client_port}" for node in self.nodes)

    @property
    def ports(self) -> list[int]:
        return [node.client_port for node in self.nodes]

    def _load_or_plan(self, brokers: int) -> list[_Node]:
        ports_file = self.directory / "ports"
        if ports_file.exists():
            rows = [line.split() for line in ports_file.read_text().splitlines() if line.strip()]
            return [_Node(int(n), int(c), int(k), self.directory / f"kafka-{n}") for n, c, k in rows]
        ports = _distinct_free_ports(2 * brokers)
        return [_Node(n, ports[2 * n - 2], ports[2 * n - 1], self.directory / f"kafka-{n}")
                for n in range(1, brokers + 1)]

    def _properties(self, node: _Node) -> dict[str, str]:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        replication = str(min(3, len(self.nodes)))
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.client_port},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.client_port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.home / "data"),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": str(min(2, len(self.nodes))),
            **_BROKER_DEFAULTS,
            **self.overrides,
        }

    def _format(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        cluster_id_file = self.directory / "cluster.id"
        if not cluster_id_file.exists():
            cluster_id_file.write_text(_random_cluster_id() + "\n")
        cluster_id = cluster_id_file.read_text().strip()
        for node in self.nodes:
            node.home.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in self._properties(node).items()))
            if (node.home / "data" / "meta.properties").exists():
                continue
            result = subprocess.run(
                self.install.command(TOOL_CLASSES["kafka-storage"],
                                     ["format", "-t", cluster_id, "-c", str(node.config_path)]),
                capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
            if result.returncode != 0:
                raise KafkaPeerError(f"kafka-storage format failed for node {node.node_id}: "
                                     f"{(result.stderr or result.stdout).decode(errors='replace')[-2000:]}")
        (self.directory / "ports").write_text(
            "".join(f"{n.node_id} {n.client_port} {n.controller_port}\n" for n in self.nodes))

    def start(self, timeout_s: float = _START_TIMEOUT_S) -> None:
        """Format what is new, start every node that is not running, return once all serve."""
        self._format()
        started: list[tuple[_Node, subprocess.Popen]] = []
        try:
            for node in self.nodes:
                if node.running_pid() is not None:
                    continue
                with open(node.out_path, "ab") as out:
                    popen = subprocess.Popen(
                        self.install.command("kafka.Kafka", [str(node.config_path)], heap=_HEAP,
                                             jvm_options=node.jvm_options),
                        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                started.append((node, popen))
                node.pid_path.write_text(f"{popen.pid}\n")
            self.wait_until_serving(timeout_s, children={node.node_id: popen for node, popen in started})
        except BaseException:
            _terminate(started)  # a failed start leaves none of the nodes it started running
            raise

    def wait_until_serving(self, timeout_s: float, children: Mapping[int, subprocess.Popen] | None = None) -> None:
        """Every node answers ApiVersions and lists every node in Metadata.

        ``children`` are the processes this call's caller just started, by node id: whether one
        exited is its ``poll()``, never ``running_pid()``. A child's /proc/<pid>/cmdline is empty
        until the kernel finishes its exec, after Popen has returned, so ``_is_kafka`` called a JVM
        that was starting "exited" (and start() then stopped it): 1 start in 18 with 6 at once.
        """
        children = children or {}
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            while not answers_api_versions("127.0.0.1", node.client_port):
                child = children.get(node.node_id)
                if _has_exited(node, child):
                    raise KafkaPeerError(f"Apache Kafka node {node.node_id} {_exit_status(child)}; "
                                         f"{self._tail(node)}")
                if time.monotonic() > deadline:
                    raise KafkaPeerError(f"Apache Kafka node {node.node_id} did not serve within "
                                         f"{timeout_s} s:\n{self._tail(node)}")
                time.sleep(0.1)
        self._wait_for_brokers(deadline)

    def _wait_for_brokers(self, deadline: float) -> None:
        from broker.client.metadata import Cluster

        cluster = Cluster(self.bootstrap)
        try:
            while True:
                try:
                    cluster.refresh_brokers()
                    if len(cluster.brokers) == len(self.nodes):
                        return
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise KafkaPeerError(f"Apache Kafka did not list {len(self.nodes)} brokers in time")
                time.sleep(0.1)
        finally:
            cluster.close()

    def stop(self, timeout_s: float = _STOP_TIMEOUT_S) -> dict[int, str]:
        """SIGTERM every node, SIGKILL what is left at the deadline; ``{node: outcome}``."""
        outcomes: dict[int, str] = {}
        running = {node.node_id: (node, pid) for node in self.nodes if (pid := node.running_pid()) is not None}
        for node, pid in running.values():
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for node_id, (node, pid) in running.items():
            while is_process_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if is_process_alive(pid):
                os.kill(pid, signal.SIGKILL)
                outcomes[node_id] = "killed"
            else:
                outcomes[node_id] = "stopped"
            node.pid_path.unlink(missing_ok=True)
        for node in self.nodes:
            outcomes.setdefault(node.node_id, "not running")
        return outcomes

    def status(self) -> list[tuple[int, int, int | None]]:
        """``(node id, client port, running pid or None)`` per node."""
        return [(node.node_id, node.client_port, node.running_pid()) for node in self.nodes]

    def _tail(self, node: _Node) -> str:
        """The end of ``kafka.out`` (stdout and stderr, so also the JVM's own errors such as
        "Could not reserve enough space"), and which crash reports the node's JVM left."""
        try:
            lines = node.out_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]
            text = (f"last {len(lines)} lines of {node.out_path}:\n" + "\n".join(lines) if lines
                    else f"{node.out_path} is empty")
        except FileNotFoundError:
            text = f"{node.out_path} does not exist"
        crashes = sorted(str(path) for path in node.home.glob("hs_err_pid*.log"))
        return text + (f"\nJVM crash reports: {', '.join(crashes)}" if crashes else "")

    def __enter__(self) -> "ApacheKafkaCluster":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def add_peer_parser(sub) -> None:
    peer = sub.add_parser("peer", help="run Apache Kafka beside pylog (the reference peer)")
    systems = peer.add_subparsers(dest="peer_system", required=True, metavar="SYSTEM")
    kafka = systems.add_parser("kafka", help=f"a KRaft Apache Kafka {KAFKA_VERSION} on loopback")
    actions = kafka.add_subparsers(dest="peer_action", required=True, metavar="ACTION")
    for name, text in (("up", "format (if new) and start, print bootstrap.servers"),
                       ("down", "stop every node, keep the data"), ("status", "nodes, ports, pids")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--dir", required=True, help="cluster directory")
        if name == "up":
            action.add_argument("--brokers", type=int, default=1, help="number of nodes (default 1)")
            action.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                                help="override one broker property; repeat for several")


def run_peer(args, out, err) -> int:
    """``pylog peer kafka up|down|status``; user mistakes raise ValueError/OSError (one line)."""
    directory = Path(args.dir)
    if args.peer_action == "up":
        overrides = dict(_split_setting(item) for item in args.set)
        cluster = ApacheKafkaCluster(directory, args.brokers, overrides)
        cluster.start()
        print(f"bootstrap.servers={cluster.bootstrap}", file=out)
        return 0
    if not (directory / "ports").exists():
        raise ValueError(f"{directory} holds no Apache Kafka cluster (start one with `pylog peer kafka up`)")
    cluster = ApacheKafkaCluster(directory)
    if args.peer_action == "down":
        for node_id, outcome in sorted(cluster.stop().items()):
            print(f"kafka node {node_id}: {outcome}", file=out)
        return 0
    for node_id, port, pid in cluster.status():
        state = f"running (pid {pid})" if pid else "stopped"
        print(f"kafka node {node_id}: 127.0.0.1:{port} {state}", file=out)
    return 0


def _terminate(started: list, timeout_s: float = _STOP_TIMEOUT_S) -> None:
    """SIGTERM the processes this call started (our children), SIGKILL at the deadline."""
    for _, popen in started:
        if popen.poll() is None:
            popen.terminate()
    deadline = time.monotonic() + timeout_s
    for node, popen in started:
        try:
            popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
        node.pid_path.unlink(missing_ok=True)


def _has_exited(node: _Node, child: subprocess.Popen | None) -> bool:
    """A child of this process by its exit status; a node started earlier by its pid file."""
    return child.poll() is not None if child is not None else node.running_pid() is None


def _exit_status(child: subprocess.Popen | None) -> str:
    """How a node's JVM ended, for the start error (a signal points at the OOM killer or a user)."""
    if child is None:
        return "is not running (a node started before this call)"
    code = child.returncode
    if code < 0:
        return f"was killed by {signal.Signals(-code).name} (pid {child.pid})"
    return f"exited with status {code} (pid {child.pid})"


def _distinct_free_ports(count: int, find=None) -> list[int]:
    """``count`` different free ports, reserved (``reserve_free_port``) so that another process's
    probe cannot take one before Kafka binds it, seconds later. Distinct is checked still: a
    client and a controller listener on one port stop kafka-storage format."""
    find = find or reserve_free_port
    ports: list[int] = []
    while len(ports) < count:
        port = find()
        if port not in ports:
            ports.append(port)
    return ports


def _random_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes in unpadded URL-safe base64,
    drawn again while it starts with "-" (kafka-storage would read ``-t -abc`` as an option)."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _split_setting(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
    return key.strip(), value.strip()


def _is_kafka(pid: int, config_path: Path) -> bool:
    """The pid is a java running kafka.Kafka with this config (a stale pid file kills nothing).
    False too for a process still in its exec (its cmdline is empty until the kernel is done):
    ask the Popen of a child just started instead."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"kafka.Kafka" in argv and str(config_path).encode() in argv
