"""Bootstrap parsing, the pure metadata snapshot, and the Cluster cache's refresh rules."""

from __future__ import annotations

import socket
import threading

import pytest

from broker.client.config import ClientConfig
from broker.client.errors import KafkaConnectionError, KafkaError
from broker.client.metadata import Cluster, ClusterSnapshot, parse_bootstrap_servers
from fake_kafka import InMemoryKafka
from broker.wire import ApiKey, ErrorCode, MetadataResponse, decode_response, encode_response

FAST = ClientConfig(request_timeout_ms=2000, connect_timeout_ms=1000, retry_backoff_ms=10)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic_ms(self) -> float:
        return self.now

    def time_ms(self) -> int:
        return 1_700_000_000_000 + int(self.now)

    def sleep_ms(self, ms: float) -> None:
        self.now += ms


@pytest.fixture
def kafka():
    with InMemoryKafka(brokers=2) as k:
        k.create_topic("orders", 3)
        yield k
        assert k.handler_errors == []


def metadata_requests(kafka: InMemoryKafka) -> int:
    return sum(len(b.requests_for(ApiKey.METADATA)) for b in kafka.brokers)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ bootstrap


@pytest.mark.parametrize("text, expected", [
    ("localhost:9092", [("localhost", 9092)]),
    (" a:1 , b:2,", [("a", 1), ("b", 2)]),
    ("[::1]:9093", [("::1", 9093)]),
    ("10.0.0.1:65535", [("10.0.0.1", 65535)]),
])
def test_parse_bootstrap_servers(text, expected):
    assert parse_bootstrap_servers(text) == expected


@pytest.mark.parametrize("text", ["", " , ", "localhost", "host:", ":9092", "h:port", "h:0", "h:70000", "[::1]"])
def test_parse_bootstrap_servers_refuses_bad_entries(text):
    with pytest.raises(ValueError):
        parse_bootstrap_servers(text)


# ------------------------------------------------------------------ snapshot (pure)


def test_snapshot_from_a_decoded_metadata_response():
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="a", port=9092, rack="r1"),
                 MetadataResponse.MetadataResponseBroker(node_id=2, host="b", port=9093)],
        cluster_id="cid", controller_id=2,
        topics=[
            MetadataResponse.MetadataResponseTopic(error_code=0, name="t", is_internal=False, partitions=[
                MetadataResponse.MetadataResponsePartition(error_code=0, partition_index=1, leader_id=2,
                                                           leader_epoch=4, replica_nodes=[2, 1], isr_nodes=[2]),
                MetadataResponse.MetadataResponsePartition(error_code=5, partition_index=0, leader_id=-1,
                                                           replica_nodes=[1], isr_nodes=[]),
            ]),
            MetadataResponse.MetadataResponseTopic(error_code=3, name="gone", partitions=[]),
        ],
    )
    # Through the codec, as the connection would see it.
    _, decoded = decode_response(ApiKey.METADATA, 12, encode_response(ApiKey.METADATA, 12, 7, response))
    snap = ClusterSnapshot.from_response(decoded, now_ms=5.0)
    assert snap.cluster_id == "cid" and snap.controller_id == 2
    assert snap.brokers[1].rack == "r1" and snap.brokers[2].port == 9093
    topic = snap.topics["t"]
    assert topic.partition_ids() == [0, 1] and not topic.has_all_leaders
    assert topic.partitions[1].replicas == (2, 1) and topic.partitions[1].isr == (2,)
    assert topic.partitions[1].leader_epoch == 4 and topic.partitions[0].leader == -1
    assert topic.topic_id is None  # the all-zero uuid means "no id"
    assert snap.topics["gone"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# ------------------------------------------------------------------ cache


def test_topic_metadata_is_cached_until_an_error_says_it_is_stale(kafka):
    cluster = Cluster(kafka.brokers[0].address, FAST)
    try:
        assert cluster.partitions_for("orders") == [0, 1, 2]
        asked = metadata_requests(kafka)
        cluster.leader_for("orders", 1)
        cluster.partitions_for("orders")
        assert metadata_requests(kafka) == asked  # served from the cache
        assert not cluster.on_partition_error("orders", ErrorCode.MESSAGE_TOO_LARGE)
        cluster.partitions_for("orders")
        assert metadata_requests(kafka) == asked
        kafka.set_leader("orders", 1, 0)
        assert cluster.on_partition_error("orders", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        assert cluster.leader_for("orders", 1) == 0
        assert metadata_requests(kafka) == asked + 1
    finally:
        cluster.close()


@pytest.mark.parametrize("code", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH])
def test_refresh_codes(kafka, code):
    cluster = Cluster(kafka.bootstrap, FAST)
    try:
        cluster.topic("orders")
        before = metadata_requests(kafka)
        assert cluster.on_partition_error("orders", code)
        cluster.topic("orders")
        assert metadata_requests(kafka) == before + 1
    finally:
        cluster.close()


def test_metadata_older_than_max_age_is_refreshed(kafka):
    clock = FakeClock()
    cluster = Cluster(kafka.bootstrap, FAST.with_(metadata_max_age_ms=60_000), clock)
    try:
        cluster.topic("orders")
        before = metadata_requests(kafka)
        clock.now += 59_000
        cluster.topic("orders")
        assert metadata_requests(kafka) == before
        clock.now += 2_000
        cluster.topic("orders")
        assert metadata_requests(kafka) == before + 1
    finally:
        cluster.close()


def test_unknown_topic_is_a_typed_error(kafka):
    cluster = Cluster(kafka.bootstrap, FAST)
    try:
        with pytest.raises(KafkaError) as info:
            cluster.topic("nope")
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert "'nope'" in str(info.value) and "does not exist" in str(info.value)
        with pytest.raises(KafkaError):
            cluster.leader_for("orders", 9)
    finally:
        cluster.close()


def test_waits_for_a_leader_up_to_wait_ms(kafka):
    kafka.set_leader("orders", 2, -1)
    cluster = Cluster(kafka.bootstrap, FAST)
    try:
        assert cluster.topic("orders", wait_ms=0).partitions[2].leader == -1  # no wait: as is
        timer = threading.Timer(0.2, kafka.set_leader, ("orders", 2, 1))
        timer.start()
        assert cluster.topic("orders", wait_ms=5_000).partitions[2].leader == 1
        timer.join()
    finally:
        cluster.close()


def test_bootstrap_skips_unreachable_servers(kafka):
    cluster = Cluster(f"127.0.0.1:{free_port()},{kafka.brokers[1].address}", FAST)
    try:
        assert cluster.partitions_for("orders") == [0, 1, 2]
    finally:
        cluster.close()


def test_no_reachable_bootstrap_server_names_what_was_tried():
    port = free_port()
    cluster = Cluster(f"127.0.0.1:{port}", FAST.with_(request_timeout_ms=100))
    with pytest.raises(KafkaConnectionError) as info:
        cluster.topic("orders")
    assert f"127.0.0.1:{port}" in str(info.value)


def test_metadata_survives_the_bootstrap_broker_going_away(kafka):
    cluster = Cluster(kafka.brokers[0].address, FAST)
    try:
        cluster.topic("orders")
        kafka.brokers[0].close()
        cluster.invalidate()
        assert cluster.partitions_for("orders") == [0, 1, 2]  # asked broker 1, known from metadata
        assert kafka.brokers[1].requests_for(ApiKey.METADATA)
    finally:
        cluster.close()


def test_controller_connection_waits_while_there_is_no_controller(kafka):
    kafka.controller_id = -1
    cluster = Cluster(kafka.bootstrap, FAST)
    try:
        timer = threading.Timer(0.2, setattr, (kafka, "controller_id", 1))
        timer.start()
        conn = cluster.controller_connection()
        timer.join()
        assert conn.port == kafka.brokers[1].port and cluster.controller_id == 1
    finally:
        cluster.close()
