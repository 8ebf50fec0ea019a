"""Real ZooKeeper and pylog broker processes for the integration, peer and Spark tiers: one
ZooKeeper server per test session, and pylog broker processes against it (``broker_cluster``,
``ClusterFactory``, at the end of this file).

Test modules import helpers from here (``from integration_support import ClusterFactory``), never
from ``conftest``: every tier's conftest.py is a module named ``conftest``, so which one
``import conftest`` finds depends on which files one pytest run was given. The fixtures defined
here are registered by tests/conftest.py (``zookeeper``, one for the whole run, every tier's) and
tests/integration/conftest.py (the rest); this module is loaded once per process under this name
(and the older alias ``pylog_integration_fixtures``), so its counters of chroots and clusters are
shared by every tier and their names never repeat on the shared ZooKeeper.

``zookeeper`` starts a standalone server on a free loopback port in a temporary directory and
stops it when the session ends. Every test that asks for ``zk_connect`` (directly or through
``zk_client``) gets its own chroot ``/pylog-test-<n>``: the znodes of one test are invisible to
the others, so a test can assert what a *fresh* cluster does (first producer id block starts at
0, first controller epoch is 1) whatever ran before it. A chroot is also how operators share one
ZooKeeper between clusters (``zookeeper.connect=host:2181/kafka``), so every integration test
exercises that path too.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from broker.cluster.zk import KafkaZkClient
from broker.tools.zookeeper import DEFAULT_SETTINGS, ZooKeeperProcess, reserve_free_port
from broker.wire import decode_response, encode_request

# tickTime 500 ms lets sessions be as short as 1 s (2 ticks), so tests about session expiry are
# quick; 6 s is Kafka 2.x's default zookeeper.session.timeout.ms before 2.5.
ZOOKEEPER_SETTINGS = {**DEFAULT_SETTINGS, "tickTime": "500"}
SESSION_TIMEOUT_MS = 6000
CONNECTION_TIMEOUT_MS = 5000
ZOOKEEPER_START_TIMEOUT_S = 60.0

_chroot_numbers = itertools.count()

# What ``from integration_support import *`` gives a conftest: the helpers, not the fixtures (a
# fixture registered by two conftests is two fixtures: a session-scoped one would run twice).
__all__ = [
    "ZOOKEEPER_SETTINGS", "SESSION_TIMEOUT_MS", "CONNECTION_TIMEOUT_MS", "ZOOKEEPER_START_TIMEOUT_S",
    "REPO_ROOT", "BROKER_START_TIMEOUT_S", "BROKER_STOP_TIMEOUT_S", "BROKER_SESSION_TIMEOUT_MS",
    "api_versions_answer", "metadata_controller", "wait_for_controller", "start_all",
    "BrokerProcess", "BrokerCluster", "ClusterFactory", "small_internal_topics",
]


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory) -> Iterator[ZooKeeperProcess]:
    """A running ZooKeeper; ``.connect_string`` is ``127.0.0.1:<port>`` (no chroot)."""
    root = tmp_path_factory.mktemp("zookeeper")
    process = ZooKeeperProcess(root / "data", reserve_free_port(), root / "log", settings=ZOOKEEPER_SETTINGS)
    process.start(timeout_s=ZOOKEEPER_START_TIMEOUT_S)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def zk_root(zookeeper) -> Iterator[KazooClient]:
    """A plain kazoo client on the real root, for checking what landed where."""
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=CONNECTION_TIMEOUT_MS / 1000)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def zk_chroot(zk_root) -> str:
    chroot = f"/pylog-test-{next(_chroot_numbers)}"
    zk_root.create(chroot)
    return chroot


@pytest.fixture
def zk_connect(zookeeper, zk_chroot) -> str:
    """Connect string with this test's private chroot."""
    return f"{zookeeper.connect_string}{zk_chroot}"


@pytest.fixture
def zk_client_factory(zk_connect) -> Iterator[Callable[[], KafkaZkClient]]:
    """Make more started clients (separate sessions) on this test's chroot; all closed after."""
    clients: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, SESSION_TIMEOUT_MS, CONNECTION_TIMEOUT_MS)
        client.start()
        clients.append(client)
        return client

    try:
        yield make
    finally:
        for client in clients:
            client.close()


@pytest.fixture
def zk_client(zk_client_factory) -> KafkaZkClient:
    """A started client whose persistent paths exist, as after a broker's start-up."""
    client = zk_client_factory()
    client.ensure_persistent_paths()
    return client


# -- pylog broker processes ----------------------------------------------------------------------
#
# ``broker_cluster(n=1, **overrides)`` starts n real broker processes (``python -m broker.server
# --config <file>``) on free loopback ports against the session's ZooKeeper, under a fresh chroot
# per cluster, and waits until each answers ApiVersions. Ports (and ZooKeeper's) come from
# ``reserve_free_port``: no other test's probe can take one before the broker binds it (a broker
# that lost its port to another broker would leave the test talking to that one). Overrides are broker properties; in
# keyword form underscores stand for dots (``auto_create_topics_enable="true"``), or pass
# ``overrides={"auto.create.topics.enable": "true"}``. Every process is killed at the end of the
# test (SIGKILL: see ``BrokerCluster.kill_all``). ``ClusterFactory`` is the same without pytest, for fixtures of a
# wider scope.

REPO_ROOT = Path(__file__).resolve().parents[2]
BROKER_START_TIMEOUT_S = 60.0
BROKER_STOP_TIMEOUT_S = 20.0
BROKER_SESSION_TIMEOUT_MS = 4000  # a killed broker's znodes vanish within this
_cluster_numbers = itertools.count()


def small_internal_topics(brokers: int) -> dict[str, str]:
    """Broker settings for a small test cluster's internal topics: ``__consumer_offsets`` and
    ``__transaction_state`` of 2 partitions at RF ``brokers`` (min ISR 1), groups formed without
    the initial 3 s delay. Fewer partitions load and elect faster at start-up; the secure, ACL and
    observability clusters all used this set, each spelling it out."""
    return {"offsets.topic.replication.factor": str(brokers), "offsets.topic.num.partitions": "2",
            "transaction.state.log.replication.factor": str(brokers), "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "2", "group.initial.rebalance.delay.ms": "0"}


def api_versions_answer(port: int, timeout_s: float = 1.0) -> bool:
    """True if a broker on ``port`` answers an ApiVersions v0 request."""
    request = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            header = _recv_exact(sock, 8)
            size, correlation_id = struct.unpack(">ii", header)
            return correlation_id == 1 and len(_recv_exact(sock, size - 4)) == size - 4
    except (OSError, ValueError):
        return False


def metadata_controller(port: int, timeout_s: float = 1.0) -> int:
    """The controller id a broker's Metadata (v1) names, -1 for none yet or no answer."""
    body = encode_request(3, 1, 1, "probe", {"topics": []})
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", _recv_exact(sock, 4))
            _, response = decode_response(3, 1, _recv_exact(sock, size))
            return response.controller_id
    except (OSError, ValueError):
        return -1


def wait_for_controller(brokers, timeout_s: float = BROKER_START_TIMEOUT_S) -> None:
    """Wait until every broker's Metadata names a controller. A broker answers ApiVersions some
    40-80 ms before it knows the controller (as Kafka's ZooKeeper-mode brokers do), and a
    confluent-kafka CreateTopics sent in that window waits for a controller and never asks again:
    the test's topic is never created (seen under load as a 30 s create_topics timeout)."""
    deadline = time.monotonic() + timeout_s
    for broker in brokers:
        while metadata_controller(broker.port) < 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"broker {broker.broker_id} named no controller within {timeout_s} s:\n"
                                   f"{broker.log_tail()}")
            time.sleep(0.05)


def start_all(brokers) -> None:
    """Start ``brokers`` side by side, then wait until each serves and names a controller. One at
    a time, a 3-broker cluster took 13 s to start at load 12 (each broker ~6 s from exec to
    serving, mostly imports and ZooKeeper registration, the next one started only then); side by
    side it is about one broker's time. If one fails, all are killed."""
    try:
        for broker in brokers:
            broker.spawn()
        for broker in brokers:
            broker.wait_serving()
        wait_for_controller(brokers)
    except BaseException:
        for broker in brokers:
            if broker.is_running():
                broker.popen.kill()
                broker.popen.wait(BROKER_STOP_TIMEOUT_S)
        raise


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("connection closed")
        data += chunk
    return data


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    config_path: Path
    log_path: Path
    data_dir: Path
    popen: subprocess.Popen | None = None
    starts: int = 0

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, timeout_s: float = BROKER_START_TIMEOUT_S) -> None:
        self.spawn()
        self.wait_serving(timeout_s)

    def spawn(self) -> None:
        """Start the process without waiting for it to serve (``wait_serving``): the brokers of
        a cluster start side by side (``start_all``)."""
        assert not self.is_running(), f"broker {self.broker_id} already runs"
        with open(self.log_path, "ab") as log_file:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "broker.server", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                cwd=REPO_ROOT, start_new_session=True,
            )
        self.starts += 1

    def wait_serving(self, timeout_s: float = BROKER_START_TIMEOUT_S) -> None:
        """Until the broker answers ApiVersions; stopped and an error if it exits or the time is up."""
        deadline = time.monotonic() + timeout_s
        while not api_versions_answer(self.port):
            if self.popen.poll() is not None:
                raise RuntimeError(f"broker {self.broker_id} exited with {self.popen.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"broker {self.broker_id} did not answer within {timeout_s} s:\n{self.log_tail()}")
            time.sleep(0.05)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig``; for SIGKILL/SIGTERM also wait for the process to exit."""
        assert self.popen is not None
        self.popen.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.popen.wait(BROKER_STOP_TIMEOUT_S)

    def stop(self, timeout_s: float = BROKER_STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; the exit status (None if not started)."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout_s)
        return self.popen.returncode

    def restart(self, sig: int = signal.SIGTERM) -> None:
        """Stop (SIGTERM: clean; SIGKILL: a crash) and start again with the same config."""
        if sig == signal.SIGTERM:
            self.stop()
        else:
            self.kill(sig)
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


@dataclass
class BrokerCluster:
    zk_connect: str
    brokers: list[BrokerProcess] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def chroot(self) -> str:
        """The cluster's ZooKeeper chroot, ``/pylog-cluster-<pid>-<n>``."""
        return "/" + self.zk_connect.split("/", 1)[1]

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()

    def kill_all(self) -> None:
        """SIGKILL every broker at once, then wait for each: a test's end, where nothing checks
        how the brokers go. A SIGTERM stop of a multi-broker cluster is a controlled shutdown per
        broker, each retrying to move its leaders to brokers that are stopping too: 15-33 s per
        3-broker cluster's teardown (test_transactions, load 8-11), the tier's largest idle time.
        A test about a clean stop calls ``stop`` (or ``BrokerProcess.stop``) itself."""
        for broker in self.brokers:
            if broker.is_running():
                broker.popen.kill()
        for broker in self.brokers:
            if broker.popen is not None:
                broker.popen.wait(BROKER_STOP_TIMEOUT_S)


class ClusterFactory:
    def __init__(self, zookeeper_connect: str, root: Path) -> None:
        self._zookeeper_connect = zookeeper_connect
        self._root = root
        self.clusters: list[BrokerCluster] = []

    def make(self, n: int = 1, overrides: dict[str, str] | None = None, **kw: str) -> BrokerCluster:
        number = next(_cluster_numbers)
        cluster = BrokerCluster(f"{self._zookeeper_connect}/pylog-cluster-{os.getpid()}-{number}")
        self.clusters.append(cluster)
        settings = {**{k.replace("_", "."): str(v) for k, v in kw.items()}, **(overrides or {})}
        for broker_id in range(1, n + 1):
            directory = self._root / f"cluster-{number}" / f"broker-{broker_id}"
            directory.mkdir(parents=True)
            port = reserve_free_port()
            props = {
                "broker.id": str(broker_id),
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": str(directory / "data"),
                "zookeeper.connect": cluster.zk_connect,
                "zookeeper.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
                **settings,
            }
            config_path = directory / "server.properties"
            config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            cluster.brokers.append(BrokerProcess(broker_id, port, config_path, directory / "broker.log",
                                                 directory / "data"))
        start_all(cluster.brokers)
        return cluster

    def close(self) -> None:
        """Kill every cluster's brokers (``BrokerCluster.kill_all``: a test's teardown checks nothing)."""
        for cluster in self.clusters:
            cluster.kill_all()


@pytest.fixture
def broker_cluster(zookeeper, tmp_path) -> Iterator[Callable[..., BrokerCluster]]:
    """Factory: ``broker_cluster(n=1, **overrides) -> BrokerCluster`` (see above)."""
    factory = ClusterFactory(zookeeper.connect_string, tmp_path)
    try:
        yield factory.make
    finally:
        factory.close()
