"""Internal topics against real ZooKeeper and pylog broker processes: the first FindCoordinator
creates ``__consumer_offsets`` / ``__transaction_state`` through the controller path (znodes in
Kafka 2.x's layout, then leaders elected), only when enough brokers are live for the configured
replication factor; ``pylog topics list`` shows them unless ``--exclude-internal``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from broker.cluster.errors import ClusterError
from broker.cluster.zk import KafkaZkClient
from broker.wire import ApiKey, ErrorCode, FindCoordinatorRequest, MetadataRequest

_RAW_SOCKET = Path(__file__).resolve().parent / "raw_socket.py"
if "pylog_raw_socket" in sys.modules:
    raw_socket = sys.modules["pylog_raw_socket"]
else:
    _spec = importlib.util.spec_from_file_location("pylog_raw_socket", _RAW_SOCKET)
    raw_socket = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = raw_socket
    _spec.loader.exec_module(raw_socket)

OFFSETS, TXN = "__consumer_offsets", "__transaction_state"
ELECTION_TIMEOUT_S = 20.0


def find_coordinator(port: int, key_type: int, version: int = 4) -> int:
    request = FindCoordinatorRequest(key="group-1", key_type=key_type, coordinator_keys=["group-1"])
    with raw_socket.Raw(port, client_id="internal-topics") as raw:
        response = raw.call(ApiKey.FIND_COORDINATOR, version, request)
    return response.coordinators[0].error_code if version >= 4 else response.error_code


def metadata(port: int) -> dict:
    with raw_socket.Raw(port, client_id="internal-topics") as raw:
        response = raw.call(ApiKey.METADATA, 9, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return {t.name: t for t in response.topics}


def metadata_with(port: int, names: set[str]) -> dict:
    """Metadata once this broker knows a leader for every partition of ``names``."""
    deadline = time.monotonic() + ELECTION_TIMEOUT_S
    while True:
        topics = metadata(port)
        if all(n in topics and all(p.error_code == ErrorCode.NONE for p in topics[n].partitions)
               for n in names):
            return topics
        assert time.monotonic() < deadline, f"broker on port {port} did not learn the leaders of {names}"
        time.sleep(0.1)


def zk_client(cluster) -> KafkaZkClient:
    """Started by ``with``, on the cluster's chroot."""
    return KafkaZkClient(cluster.zk_connect, 6000, 5000)


def wait_for_leaders(zk: KafkaZkClient, topic: str, partitions: int) -> dict[int, object]:
    """Every partition's state znode, once the controller has written them all."""
    deadline = time.monotonic() + ELECTION_TIMEOUT_S
    while True:
        try:
            return {p: zk.get_partition_state(topic, p)[0] for p in range(partitions)}
        except ClusterError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def check_created(zk: KafkaZkClient, topic: str, partitions: int, factor: int, live: set[int]) -> None:
    assignment = zk.get_topic_assignment(topic)
    replicas = {p: tuple(r) for p, r in assignment.partitions.items()}
    assert sorted(replicas) == list(range(partitions))
    assert all(len(r) == factor and set(r) <= live for r in replicas.values())
    for p, state in wait_for_leaders(zk, topic, partitions).items():
        assert state.leader == replicas[p][0] and set(state.isr) == set(replicas[p])


def test_one_broker_creates_nothing_while_the_replication_factor_is_3_then_creates_with_1(broker_cluster):
    """Kafka's default offsets.topic.replication.factor (3) cannot be met by one broker: the
    coordinator stays unavailable and nothing is written. With 1 (a single-broker cluster's
    setting), the topics are created with Kafka's configs and their leaders elected."""
    strict = broker_cluster(1)
    port = strict.brokers[0].port
    assert find_coordinator(port, 0) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert find_coordinator(port, 1, version=2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    with zk_client(strict) as zk:
        assert zk.get_topics() == []

    cluster = broker_cluster(1, offsets_topic_replication_factor="1", offsets_topic_num_partitions="10",
                             transaction_state_log_replication_factor="1",
                             transaction_state_log_min_isr="1", transaction_state_log_num_partitions="5")
    port = cluster.brokers[0].port
    assert find_coordinator(port, 0) == ErrorCode.COORDINATOR_NOT_AVAILABLE  # the call that creates it
    assert find_coordinator(port, 1, version=3) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    with zk_client(cluster) as zk:
        check_created(zk, OFFSETS, 10, 1, {1})
        check_created(zk, TXN, 5, 1, {1})
        assert zk.get_topic_config(OFFSETS) == {"cleanup.policy": "compact", "compression.type": "producer",
                                                "segment.bytes": "104857600"}
        assert zk.get_topic_config(TXN)["min.insync.replicas"] == "1"
    topics = metadata_with(port, {OFFSETS, TXN})
    assert topics[OFFSETS].is_internal and topics[TXN].is_internal
    listed = _pylog("topics", "list", "--bootstrap-server", cluster.bootstrap)
    assert listed.split() == [OFFSETS, TXN]
    assert _pylog("topics", "list", "--bootstrap-server", cluster.bootstrap, "--exclude-internal") == ""


def test_three_brokers_create_the_offsets_topic_with_replication_factor_3(broker_cluster):
    cluster = broker_cluster(3, controlled_shutdown_enable="false")  # a quick teardown
    port = cluster.brokers[1].port  # any broker, not necessarily the controller
    with zk_client(cluster) as zk:
        deadline = time.monotonic() + ELECTION_TIMEOUT_S
        while len(zk.get_broker_ids()) < 3 or OFFSETS not in zk.get_topics():
            assert time.monotonic() < deadline, "the offsets topic was not created"
            assert find_coordinator(port, 0) == ErrorCode.COORDINATOR_NOT_AVAILABLE
            time.sleep(0.2)
        check_created(zk, OFFSETS, 50, 3, {1, 2, 3})
        assert zk.get_topic_config(OFFSETS)["cleanup.policy"] == "compact"
    topic = metadata_with(cluster.brokers[2].port, {OFFSETS})[OFFSETS]  # every broker learns the leaders
    assert topic.is_internal and len(topic.partitions) == 50
    assert {p.leader_id for p in topic.partitions} == {1, 2, 3}


def _pylog(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout
