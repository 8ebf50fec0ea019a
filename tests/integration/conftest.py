"""Fixtures for integration tests: one real ZooKeeper server per test session.

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
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from broker.cluster.zk import KafkaZkClient
from broker.tools.zookeeper import DEFAULT_SETTINGS, ZooKeeperProcess, find_free_port

# tickTime 500 ms lets sessions be as short as 1 s (2 ticks), so tests about session expiry are
# quick; 6 s is Kafka 2.x's default zookeeper.session.timeout.ms before 2.5.
ZOOKEEPER_SETTINGS = {**DEFAULT_SETTINGS, "tickTime": "500"}
SESSION_TIMEOUT_MS = 6000
CONNECTION_TIMEOUT_MS = 5000
ZOOKEEPER_START_TIMEOUT_S = 60.0

_chroot_numbers = itertools.count()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory) -> Iterator[ZooKeeperProcess]:
    """A running ZooKeeper; ``.connect_string`` is ``127.0.0.1:<port>`` (no chroot)."""
    root = tmp_path_factory.mktemp("zookeeper")
    process = ZooKeeperProcess(root / "data", find_free_port(), root / "log", settings=ZOOKEEPER_SETTINGS)
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
