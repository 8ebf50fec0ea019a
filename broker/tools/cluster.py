"""``pylog cluster {up,down,status}``: a ZooKeeper and N brokers on loopback, as background
processes under one cluster directory. ``pylog broker start`` (in ``broker/cli.py``) runs one
broker in the foreground instead.

The cluster directory (``--dir``, default ``./pylog-cluster``)::

    cluster.json                  what `up` was asked for: broker count, ports, --set overrides
    config/server-<i>.properties  broker i's config, rendered from conf/server-<i>.properties
    data/broker-<i>/              broker i's log.dirs
    zookeeper/                    ZooKeeper's dataDir (snapshots, transaction log) and zoo.cfg
    logs/broker-<i>.log           each process's stdout and stderr, appended across restarts
    logs/zookeeper.log
    run/broker-<i>.pid            pid files; present while the process runs
    run/zookeeper.pid
    run/cluster.lock              held while one `up`/`down` works on the directory

``up`` on a directory that already holds a cluster starts whatever of it is not running, with its
data: the ports come from ``cluster.json`` (giving different ones is an error) and new ``--set``
values are remembered. Broker i listens on ``127.0.0.1:<port + i>``; its config is the template
with ``broker.id``, ``listeners``, ``advertised.listeners``, ``log.dirs`` and
``zookeeper.connect`` replaced, the internal topics' replication settings sized to the cluster
when the template leaves them unset (``internal_topic_settings``), then the ``--set`` overrides.
Every config is validated before
any process starts, and every port is checked to be free, so a mistake starts nothing. A broker
counts as up once it answers ApiVersions; one that exits or does not answer in time fails the
command with the last line of its log, and the processes this command started are stopped again.

``down`` sends SIGTERM to every broker at once (their clean shutdown), waits, SIGKILLs the ones
still running after ``--timeout-s``, then stops ZooKeeper; the data stays. Pid files whose
process is gone, or whose pid now belongs to another program, are treated as "not running" and
removed (see ``broker.tools.broker_process``).

``up --security`` (remembered in ``cluster.json``) makes a CA, broker certificates and an admin
user, serves SASL_SSL only and prints the client settings (``broker.tools.cluster_security``).

User mistakes (bad ``--set``, a port in use, no ZooKeeper installed, a directory without a
cluster) raise ``ClusterToolError`` (a ``ValueError``) with one line; ``pylog`` prints it.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, TextIO

from broker.metrics.scrape_config import metrics_port, scrape_config
from broker.server.config import BrokerConfig, ConfigError, parse_overrides, parse_properties
from broker.tools.broker_process import (
    BrokerProcess,
    answers_api_versions,
    port_in_use,
    render_properties,
    stop_brokers,
)
from broker.tools.cluster_security import (
    add_admin_scram,
    broker_security_properties,
    client_properties,
    ensure_security_files,
    probe_context,
)
from broker.tools.zookeeper import (
    DEFAULT_SETTINGS,
    ZooKeeperError,
    ZooKeeperProcess,
    find_install,
    load_properties,
)

__all__ = [
    "ClusterToolError", "ClusterSpec", "ClusterDir",
    "cluster_up", "cluster_down", "cluster_status",
    "add_cluster_parser", "run_cluster",
]

HOST = "127.0.0.1"
DEFAULT_DIR = "pylog-cluster"
DEFAULT_BROKERS = 1
DEFAULT_PORT = 9092
DEFAULT_ZOOKEEPER_PORT = 2181
START_TIMEOUT_S = 60.0  # a broker restarted after a kill waits out its old ZooKeeper session (18 s)
STOP_TIMEOUT_S = 30.0
_PROBE_INTERVAL_S = 0.1
_CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
_TEMPLATES = 3  # conf/server-0..2.properties; brokers 3+ use server-0's
# The cluster decides these for every broker; a --set for one would break the cluster layout.
MANAGED_KEYS = ("broker.id", "listeners", "advertised.listeners", "log.dirs", "log.dir", "zookeeper.connect")
_SPEC_VERSION = 1


class ClusterToolError(ValueError):
    """A user mistake or a process that failed to start; the message is one line."""


@dataclass(frozen=True)
class ClusterSpec:
    """What ``cluster.json`` records: enough to start the same cluster again."""

    brokers: int
    port: int
    zookeeper_port: int
    overrides: dict[str, str] = field(default_factory=dict)
    security: bool = False  # SASL_SSL listeners, a CA and an admin user (--security)

    def broker_port(self, broker_id: int) -> int:
        return self.port + broker_id

    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{self.broker_port(i)}" for i in range(self.brokers))

    def check(self) -> None:
        if self.brokers < 1:
            raise ClusterToolError(f"--brokers must be at least 1, got {self.brokers}")
        for option, port in (("--port", self.port), ("--zookeeper-port", self.zookeeper_port)):
            if not 1 <= port <= 65535:
                raise ClusterToolError(f"{option} {port} is outside 1-65535")
        if self.port + self.brokers - 1 > 65535:
            raise ClusterToolError(f"{self.brokers} brokers from port {self.port} run past port 65535")
        if self.port <= self.zookeeper_port < self.port + self.brokers:
            raise ClusterToolError(f"--zookeeper-port {self.zookeeper_port} collides with a broker port "
                                   f"({self.port}-{self.port + self.brokers - 1})")
        for key in self.overrides:
            if key in MANAGED_KEYS:
                raise ClusterToolError(f"--set {key}: pylog cluster sets it for every broker "
                                       "(use --port, --zookeeper-port or --dir)")

    def to_json(self) -> str:
        return json.dumps({"version": _SPEC_VERSION, **asdict(self)}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, where: Path) -> "ClusterSpec":
        try:
            raw = json.loads(text)
            if raw.get("version") != _SPEC_VERSION:
                raise ValueError(f"version {raw.get('version')!r}, expected {_SPEC_VERSION}")
            overrides = raw.get("overrides", {})
            if not isinstance(overrides, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()):
                raise ValueError("overrides must map strings to strings")
            spec = cls(int(raw["brokers"]), int(raw["port"]), int(raw["zookeeper_port"]), overrides,
                       bool(raw.get("security", False)))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ClusterToolError(f"{where} is damaged ({exc}); fix it or use another --dir") from None
        spec.check()
        return spec


@dataclass(frozen=True)
class ClusterDir:
    """The paths of one cluster directory (see the module docstring)."""

    root: Path

    @property
    def spec_path(self) -> Path:
        return self.root / "cluster.json"

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    def broker(self, spec: ClusterSpec, broker_id: int) -> BrokerProcess:
        return BrokerProcess(
            broker_id, HOST, spec.broker_port(broker_id),
            config_path=self.root / "config" / f"server-{broker_id}.properties",
            pid_path=self.run_dir / f"broker-{broker_id}.pid",
            log_path=self.log_dir / f"broker-{broker_id}.log",
        )

    def brokers(self, spec: ClusterSpec) -> list[BrokerProcess]:
        return [self.broker(spec, i) for i in range(spec.brokers)]

    def broker_data_dir(self, broker_id: int) -> Path:
        return self.root / "data" / f"broker-{broker_id}"

    def zookeeper(self, spec: ClusterSpec, install=None) -> ZooKeeperProcess:
        process = ZooKeeperProcess(self.root / "zookeeper", spec.zookeeper_port, self.log_dir,
                                   settings=_zookeeper_settings(), install=install)
        # One place for every pid file and every log of the cluster: run/ and logs/*.log.
        process.pid_path = self.run_dir / "zookeeper.pid"
        process.log_path = self.log_dir / "zookeeper.log"
        return process

    def read_spec(self) -> ClusterSpec:
        try:
            text = self.spec_path.read_text()
        except FileNotFoundError:
            raise ClusterToolError(f"no pylog cluster in {self.root} (no cluster.json); "
                                   f"start one with `pylog cluster up --dir {self.root}`") from None
        return ClusterSpec.from_json(text, self.spec_path)

    def write_spec(self, spec: ClusterSpec) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = self.spec_path.with_suffix(".json.tmp")
        temporary.write_text(spec.to_json())
        os.replace(temporary, self.spec_path)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold ``run/cluster.lock`` so two ``up``/``down`` never interleave on one directory."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "cluster.lock", "w") as lock_file:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ClusterToolError(f"another pylog cluster command is working on {self.root}") from None
            yield


def _zookeeper_settings() -> dict[str, str]:
    path = _CONF_DIR / "zookeeper.properties"
    return load_properties(path) if path.is_file() else dict(DEFAULT_SETTINGS)


def _template(broker_id: int) -> tuple[str, Path | None]:
    for name in (f"server-{broker_id}.properties", "server-0.properties"):
        path = _CONF_DIR / name
        if path.is_file() and (broker_id < _TEMPLATES or name == "server-0.properties"):
            return path.read_text(), path
    return "", None  # an installed package without conf/: Kafka's defaults plus the cluster's values


def internal_topic_settings(brokers: int) -> dict[str, str]:
    """Internal topics sized to the cluster (replication factor min(3, N), transaction min ISR
    min(2, N)), as Kafka's own development setups do: the broker never creates them with fewer
    replicas than configured (``broker.cluster.internal_topics``), so a one-broker cluster left
    at Kafka's default 3 would never have a coordinator. A value in the template or ``--set``
    wins."""
    return {
        "offsets.topic.replication.factor": str(min(3, brokers)),
        "transaction.state.log.replication.factor": str(min(3, brokers)),
        "transaction.state.log.min.isr": str(min(2, brokers)),
    }


def render_broker_config(cluster: ClusterDir, spec: ClusterSpec, broker_id: int) -> str:
    """Broker ``broker_id``'s server.properties text, validated (ClusterToolError if invalid)."""
    template, source = _template(broker_id)
    protocol = "SASL_SSL" if spec.security else "PLAINTEXT"
    listener = f"{protocol}://{HOST}:{spec.broker_port(broker_id)}"
    values = {
        "broker.id": str(broker_id),
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": str(cluster.broker_data_dir(broker_id).resolve()),
        "zookeeper.connect": f"{HOST}:{spec.zookeeper_port}",
        **{k: v for k, v in internal_topic_settings(spec.brokers).items()
           if k not in parse_properties(template)},
        **(broker_security_properties(cluster.root) if spec.security else {}),
        **spec.overrides,
    }
    if int(spec.overrides.get("metrics.port", "0") or 0):  # broker i serves /metrics on P + i
        values["metrics.port"] = str(metrics_port(int(spec.overrides["metrics.port"]), broker_id))
    header = (f"# Written by `pylog cluster up` from {source or 'built-in defaults'}; "
              "rewritten at every start of this broker.\n")
    try:
        text = render_properties(template, values, header)
        BrokerConfig.from_properties(parse_properties(text))
    except ValueError as exc:  # ConfigError too
        raise ClusterToolError(f"invalid configuration for broker {broker_id}: {exc}") from None
    return text


# --------------------------------------------------------------------------------------- up


def cluster_up(root: Path, brokers: int | None, port: int | None, zookeeper_port: int | None,
               overrides: list[str], err: TextIO, timeout_s: float = START_TIMEOUT_S,
               security: bool = False) -> ClusterSpec:
    """Start whatever of the cluster in ``root`` is not running (creating it if new); returns
    its spec once every broker answers ApiVersions."""
    cluster = ClusterDir(root)
    try:
        new_overrides = parse_overrides(overrides)
    except ConfigError as exc:
        raise ClusterToolError(str(exc)) from None
    spec = _resolve_spec(cluster, brokers, port, zookeeper_port, new_overrides)
    if security and not spec.security:
        if cluster.spec_path.exists():
            raise ClusterToolError(f"{cluster.root} holds a cluster without --security; use another --dir")
        spec = ClusterSpec(spec.brokers, spec.port, spec.zookeeper_port, spec.overrides, True)
    if spec.security:
        ensure_security_files(cluster.root)
    configs = {i: render_broker_config(cluster, spec, i) for i in range(spec.brokers)}
    is_new = not cluster.spec_path.exists()
    with cluster.locked():
        zookeeper = cluster.zookeeper(spec)
        to_start = [b for b in cluster.brokers(spec) if b.running_pid() is None]
        _check_ports(zookeeper, to_start)
        if not zookeeper.is_running():
            zookeeper = cluster.zookeeper(spec, install=_zookeeper_install())
        cluster.write_spec(spec)  # first, so `down` finds whatever gets started
        try:
            _start_processes(cluster, spec, zookeeper, to_start, configs, err, timeout_s)
        except BaseException:
            if is_new:  # nothing of it runs: the directory may be reused with other ports
                cluster.spec_path.unlink(missing_ok=True)
            raise
    return spec


def _resolve_spec(cluster: ClusterDir, brokers: int | None, port: int | None,
                  zookeeper_port: int | None, overrides: dict[str, str]) -> ClusterSpec:
    """The new cluster's spec, or the existing one's (with ``overrides`` merged in)."""
    if not cluster.spec_path.exists():
        spec = ClusterSpec(DEFAULT_BROKERS if brokers is None else brokers,
                           DEFAULT_PORT if port is None else port,
                           DEFAULT_ZOOKEEPER_PORT if zookeeper_port is None else zookeeper_port, overrides)
        spec.check()
        return spec
    stored = cluster.read_spec()
    for option, given, kept in (("--brokers", brokers, stored.brokers), ("--port", port, stored.port),
                                ("--zookeeper-port", zookeeper_port, stored.zookeeper_port)):
        if given is not None and given != kept:
            raise ClusterToolError(f"{cluster.root} holds a cluster with {option} {kept}; "
                                   f"omit {option} to restart it, or use another --dir")
    spec = ClusterSpec(stored.brokers, stored.port, stored.zookeeper_port, {**stored.overrides, **overrides},
                       stored.security)
    spec.check()
    return spec



def _check_ports(zookeeper: ZooKeeperProcess, to_start: list[BrokerProcess]) -> None:
    wanted = [] if zookeeper.is_running() else [("ZooKeeper", zookeeper.port)]
    wanted += [(f"broker {b.broker_id}", b.port) for b in to_start]
    for name, port in wanted:
        if port_in_use(HOST, port):
            raise ClusterToolError(f"port {port} on {HOST} (for {name}) is already in use; "
                                   "stop what holds it or choose other ports (--port, --zookeeper-port)")


def _zookeeper_install():
    try:
        return find_install()
    except ZooKeeperError as exc:
        raise ClusterToolError(str(exc)) from None


def _start_processes(cluster: ClusterDir, spec: ClusterSpec, zookeeper: ZooKeeperProcess,
                     to_start: list[BrokerProcess], configs: dict[int, str], err: TextIO,
                     timeout_s: float) -> None:
    """Start ZooKeeper (if down) and ``to_start``; on any failure stop what was started here."""
    started_zookeeper = False
    started: list[BrokerProcess] = []
    try:
        if not zookeeper.is_running():
            _start_zookeeper(zookeeper, timeout_s)
            started_zookeeper = True
            print(f"started ZooKeeper on {zookeeper.connect_string} (pid {zookeeper.pid})", file=err)
        spawned = []
        for process in to_start:
            process.config_path.parent.mkdir(parents=True, exist_ok=True)
            process.config_path.write_text(configs[process.broker_id])
            cluster.broker_data_dir(process.broker_id).mkdir(parents=True, exist_ok=True)
            spawned.append((process, process.start()))
            started.append(process)
        probe = probe_context(cluster.root) if spec.security else None
        _wait_until_serving(spawned, timeout_s, probe)
        _wait_for_running(cluster, spec, timeout_s, probe)
        if spec.security:
            add_admin_scram(cluster.root, spec.bootstrap_servers())
    except BaseException:
        stop_brokers(started, STOP_TIMEOUT_S)
        if started_zookeeper:
            zookeeper.stop()
        raise
    for process in started:
        print(f"started broker {process.broker_id} on {process.address} (pid {process.running_pid()}); "
              f"log {process.log_path}", file=err)


def _start_zookeeper(zookeeper: ZooKeeperProcess, timeout_s: float) -> None:
    try:
        zookeeper.start(timeout_s=timeout_s)
    except ZooKeeperError as exc:
        first = str(exc).splitlines()[0]
        if "\n" in str(exc):  # the message ends with the log's tail; point at the log instead
            first = first.split(";")[0] + f"; see {zookeeper.log_path}"
        raise ClusterToolError(first) from None


def _wait_until_serving(spawned: list, timeout_s: float, probe=None) -> None:
    """Wait until every spawned broker answers ApiVersions; a broker that exits or is still
    silent at the deadline is a ClusterToolError naming its log."""
    deadline = time.monotonic() + timeout_s
    waiting = list(spawned)
    while waiting:
        for process, popen in list(waiting):
            code = popen.poll()
            if code is not None:
                raise ClusterToolError(
                    f"broker {process.broker_id} exited with status {code} while starting: "
                    f"{process.log_last_line() or '(empty log)'} (log: {process.log_path})")
            if answers_api_versions(process.host, process.port, timeout_s=1.0, ssl_context=probe):
                waiting.remove((process, popen))
        if waiting and time.monotonic() >= deadline:
            process = waiting[0][0]
            raise ClusterToolError(
                f"broker {process.broker_id} did not answer ApiVersions on {process.address} within "
                f"{timeout_s:g} s; see {process.log_path}")
        if waiting:
            time.sleep(_PROBE_INTERVAL_S)


def _wait_for_running(cluster: ClusterDir, spec: ClusterSpec, timeout_s: float, probe=None) -> None:
    """Brokers that were already running (a previous ``up``) must answer too."""
    deadline = time.monotonic() + timeout_s
    for process in cluster.brokers(spec):
        while not answers_api_versions(process.host, process.port, timeout_s=1.0, ssl_context=probe):
            if process.running_pid() is None:
                raise ClusterToolError(f"broker {process.broker_id} stopped; see {process.log_path}")
            if time.monotonic() >= deadline:
                raise ClusterToolError(f"broker {process.broker_id} (pid {process.running_pid()}) does not "
                                       f"answer on {process.address}; see {process.log_path}")
            time.sleep(_PROBE_INTERVAL_S)


# ------------------------------------------------------------------------------------- down


def cluster_down(root: Path, err: TextIO, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop every broker (together), then ZooKeeper. Data and logs stay."""
    cluster = ClusterDir(root)
    spec = cluster.read_spec()
    with cluster.locked():
        brokers = cluster.brokers(spec)
        pids = {b.broker_id: b.running_pid() for b in brokers}
        outcomes = stop_brokers(brokers, timeout_s)
        for broker_id, outcome in sorted(outcomes.items()):
            pid = f" (pid {pids[broker_id]})" if pids[broker_id] is not None else ""
            print(f"broker {broker_id}{pid}: {outcome}", file=err)
        zookeeper = cluster.zookeeper(spec)
        pid, stale = zookeeper.pid, zookeeper.pid_path.exists() and not zookeeper.is_running()
        try:
            was_running = zookeeper.stop(timeout_s)
        except ZooKeeperError as exc:
            raise ClusterToolError(str(exc).splitlines()[0]) from None
        outcome = "stopped" if was_running else ("stale pid file" if stale else "not running")
        print(f"ZooKeeper{f' (pid {pid})' if was_running else ''}: {outcome}", file=err)


# ----------------------------------------------------------------------------------- status


def cluster_status(root: Path) -> dict:
    """Every process of the cluster: pid (None unless running), port, alive; brokers also
    ``serving`` (answers ApiVersions); the controller's broker id from ``/controller``."""
    cluster = ClusterDir(root)
    spec = cluster.read_spec()
    zookeeper = cluster.zookeeper(spec)
    zk_alive = zookeeper.is_running()
    brokers = []
    for process in cluster.brokers(spec):
        pid = process.running_pid()
        brokers.append({
            "id": process.broker_id, "port": process.port, "pid": pid, "alive": pid is not None,
            "serving": pid is not None and answers_api_versions(
                process.host, process.port, ssl_context=probe_context(root) if spec.security else None),
            "log": str(process.log_path),
        })
    return {
        "dir": str(root.resolve()),
        "bootstrap_servers": spec.bootstrap_servers(),
        "zookeeper": {"port": spec.zookeeper_port, "pid": zookeeper.pid if zk_alive else None,
                      "alive": zk_alive, "log": str(zookeeper.log_path)},
        "brokers": brokers,
        "controller_id": _controller_id(zookeeper.connect_string) if zk_alive else None,
    }


def _controller_id(connect: str) -> int | None:
    """``/controller``'s broker id; None when there is none or ZooKeeper does not answer."""
    from broker.cluster.errors import ClusterError
    from broker.cluster.zk import KafkaZkClient

    client = KafkaZkClient(connect, session_timeout_ms=6000, connection_timeout_ms=3000)
    try:
        client.start()
        controller = client.get_controller_id()
    except ClusterError:
        return None
    finally:
        client.close()
    return controller if controller >= 0 else None


def format_status(status: dict) -> str:
    zk = status["zookeeper"]
    lines = [f"cluster    {status['dir']}",
             f"zookeeper  {HOST}:{zk['port']:<6} {_pid(zk['pid'])}  {'alive' if zk['alive'] else 'stopped'}"]
    for b in status["brokers"]:
        state = "serving" if b["serving"] else ("alive" if b["alive"] else "stopped")
        role = "  controller" if b["id"] == status["controller_id"] else ""
        lines.append(f"broker {b['id']:<3} {HOST}:{b['port']:<6} {_pid(b['pid'])}  {state}{role}")
    controller = status["controller_id"]
    lines.append(f"controller {controller if controller is not None else 'none'}")
    lines.append(f"bootstrap.servers={status['bootstrap_servers']}")
    return "\n".join(lines)


def _scrape_config(root: Path) -> str:
    spec = ClusterDir(root).read_spec()
    base = int(spec.overrides.get("metrics.port", "0") or 0)
    if not base:
        raise ClusterToolError(f"the cluster in {root} serves no metrics: start it with "
                               "--set metrics.port=PORT (broker i then serves PORT+i)")
    return scrape_config(root.resolve().name, HOST, base, list(range(spec.brokers)))


def _pid(pid: int | None) -> str:
    return f"pid {pid:<8}" if pid is not None else f"{'-':<12}"


# -------------------------------------------------------------------------------------- CLI


def add_cluster_parser(subparsers) -> argparse.ArgumentParser:
    cluster = subparsers.add_parser("cluster", help="start, stop and inspect a local cluster")
    actions = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")

    up = actions.add_parser("up", help="start ZooKeeper and N brokers in the background")
    _dir_option(up)
    up.add_argument("--brokers", type=int, default=None, help=f"number of brokers (default {DEFAULT_BROKERS})")
    up.add_argument("--port", type=int, default=None,
                    help=f"port of broker 0; broker i uses PORT+i (default {DEFAULT_PORT})")
    up.add_argument("--zookeeper-port", type=int, default=None,
                    help=f"ZooKeeper's client port (default {DEFAULT_ZOOKEEPER_PORT})")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker config override for every broker; repeat for several")
    up.add_argument("--security", action="store_true",
                    help="SASL_SSL only: make a CA, broker certificates and an admin user; print the client settings")
    up.add_argument("--timeout-s", type=float, default=START_TIMEOUT_S,
                    help=f"how long to wait for each process to serve (default {START_TIMEOUT_S:g})")

    down = actions.add_parser("down", help="stop the cluster's processes (data kept)")
    _dir_option(down)
    down.add_argument("--timeout-s", type=float, default=STOP_TIMEOUT_S,
                      help=f"SIGKILL a process still running after this long (default {STOP_TIMEOUT_S:g})")

    status = actions.add_parser("status", help="processes, ports and the controller")
    _dir_option(status)
    status.add_argument("--json", action="store_true", help="print one JSON object")

    scrape = actions.add_parser("scrape-config", help="print a Prometheus scrape config for the brokers' "
                                "/metrics (the cluster must run with --set metrics.port=PORT)")
    _dir_option(scrape)
    return cluster


def _dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"cluster directory (default ./{DEFAULT_DIR})")


def run_cluster(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    root = Path(args.dir)
    if getattr(args, "timeout_s", 1.0) <= 0:
        raise ClusterToolError(f"--timeout-s must be positive, got {args.timeout_s}")
    if args.cluster_command == "up":
        spec = cluster_up(root, args.brokers, args.port, args.zookeeper_port, args.set, err, args.timeout_s,
                          security=getattr(args, "security", False))
        print(f"bootstrap.servers={spec.bootstrap_servers()}", file=out)
        if spec.security:  # the client settings (also in security/client.properties)
            for key, value in client_properties(root).items():
                print(f"{key}={value}", file=out)
    elif args.cluster_command == "down":
        cluster_down(root, err, args.timeout_s)
    elif args.cluster_command == "scrape-config":
        print(_scrape_config(root), file=out, end="")
    else:
        status = cluster_status(root)
        print(json.dumps(status, indent=2) if args.json else format_status(status), file=out)
    return 0
