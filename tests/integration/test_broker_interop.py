"""Unmodified Kafka clients against a real pylog broker process registered in a real ZooKeeper.

librdkafka (confluent-kafka) creates a topic with its AdminClient, produces 100,000 keyed records
with headers through an idempotent, lz4-compressing, acks=all producer, and reads them back with
assign() under its default read_committed isolation. kafka-python 3 does the same with its own
admin client, idempotent-by-default producer and consumer. kcat lists the cluster and consumes a
topic to its end. Then the broker restarts (cleanly, then after SIGKILL) under an open
kafka-python producer: everything written is still there, the producer keeps its producer id,
and its retried batches are not written twice.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from collections import Counter

import pytest
from integration_support import ClusterFactory, api_versions_answer

pytestmark = pytest.mark.integration

RECORDS = 100_000
BASE_TIMESTAMP_MS = 1_700_000_000_000
KCAT = "/usr/bin/kcat"


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("interop"))
    try:
        yield factory.make(1)
    finally:
        factory.close()


def expected(prefix: str, i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]], int]:
    """Record i: key, value, headers, timestamp (all distinct, so a duplicate shows)."""
    key = f"{prefix}-key-{i}".encode()
    return key, f"value-{i}-".encode() * 3, [("seq", str(i).encode()), ("src", prefix.encode())], BASE_TIMESTAMP_MS + i


# ----------------------------------------------------------------------------- librdkafka


def test_confluent_kafka_round_trip(cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic("rdk-events", num_partitions=6, replication_factor=1)])
    futures["rdk-events"].result(30)
    assert len(admin.list_topics("rdk-events", timeout=10).topics["rdk-events"].partitions) == 6

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "compression.type": "lz4",
                         "enable.idempotence": True, "linger.ms": 20})
    failures = []
    for i in range(RECORDS):
        key, value, headers, ts = expected("rdk", i)
        while True:
            try:
                producer.produce("rdk-events", value=value, key=key, headers=headers, timestamp=ts,
                                 on_delivery=lambda err, msg: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and failures == []

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})  # isolation.level defaults to read_committed
    consumer.assign([TopicPartition("rdk-events", p, 0) for p in range(6)])
    seen = {}
    offsets = {p: [] for p in range(6)}
    deadline = time.monotonic() + 60
    while len(seen) < RECORDS and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            assert message.error() is None, message.error()
            _, ts = message.timestamp()
            seen[message.key()] = (message.value(), message.headers(), ts)
            offsets[message.partition()].append(message.offset())
    consumer.close()
    assert len(seen) == RECORDS
    for i in range(RECORDS):
        key, value, headers, ts = expected("rdk", i)
        assert seen[key] == (value, headers, ts), i
    assert sum(map(len, offsets.values())) == RECORDS  # no record twice
    assert all(o == list(range(len(o))) for o in offsets.values())  # dense offsets from 0


# --------------------------------------------------------------------------- kafka-python


def kp_produce(producer, topic: str, prefix: str, start: int, count: int) -> None:
    futures = []
    for i in range(start, start + count):
        key, value, headers, ts = expected(prefix, i)
        futures.append(producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts))
    producer.flush(60)
    failed = [f.exception for f in futures if not f.succeeded()]
    assert failed == []


def kp_consume(bootstrap: str, topic: str, partitions: int, want: int, isolation: str = "read_uncommitted"):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level=isolation, group_id=None)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    records = []
    deadline = time.monotonic() + 60
    while len(records) < want and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=1000, max_records=50_000).values():
            records.extend(batch)
    # one more short poll: anything beyond ``want`` is a duplicate
    for batch in consumer.poll(timeout_ms=300).values():
        records.extend(batch)
    consumer.close()
    return records


def check_kp_records(records, prefix: str, count: int) -> None:
    keys = Counter(r.key for r in records)
    assert len(records) == count and len(keys) == count, "missing or duplicate records"
    for r in records:
        i = int(r.key.decode().rsplit("-", 1)[1])
        key, value, headers, ts = expected(prefix, i)
        assert (r.value, list(r.headers), r.timestamp) == (value, headers, ts)


def test_kafka_python_round_trip(cluster):
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    result = admin.create_topics([NewTopic("kp-events", num_partitions=3, replication_factor=-1)])
    assert all(t["error_code"] == 0 for t in result["topics"]), result
    admin.close()

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=20)
    assert producer.config["enable_idempotence"]
    kp_produce(producer, "kp-events", "kp", 0, RECORDS)
    producer.close()

    check_kp_records(kp_consume(cluster.bootstrap, "kp-events", 3, RECORDS), "kp", RECORDS)


# ---------------------------------------------------------------------------------- kcat


def test_kcat_lists_and_consumes(cluster):
    listing = subprocess.run([KCAT, "-b", cluster.bootstrap, "-L"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    port = cluster.brokers[0].port
    assert re.search(rf"broker 1 at 127\.0\.0\.1:{port} \(controller\)", listing), listing
    assert 'topic "rdk-events" with 6 partitions' in listing
    assert 'topic "kp-events" with 3 partitions' in listing
    consumed = subprocess.run([KCAT, "-b", cluster.bootstrap, "-C", "-t", "rdk-events", "-e", "-q",
                               "-f", "%k\n"], capture_output=True, timeout=120, check=True).stdout
    keys = consumed.split(b"\n")[:-1]
    assert len(keys) == RECORDS and len(set(keys)) == RECORDS


# ------------------------------------------------------------------------------- restarts


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "crash"])
def test_restart_keeps_data_and_the_producer_id(cluster, how):
    """The producer keeps sending while the broker restarts: batches in flight at the stop are
    retried against the restarted broker, whose producer state (snapshot after a clean stop,
    snapshot + replayed batch headers after a crash) recognises those it had already written."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = f"restart-{how.name.lower()}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5,
                             retries=1_000, retry_backoff_ms=100, request_timeout_ms=10_000,
                             reconnect_backoff_max_ms=500, delivery_timeout_ms=120_000)
    kp_produce(producer, topic, topic, 0, 2_000)
    before = producer._transaction_manager.producer_id_and_epoch
    ends_before = watermarks(cluster.bootstrap)

    futures = []
    feeder = threading.Thread(target=_send_slowly, args=(producer, topic, 2_000, 8_000, futures))
    feeder.start()
    time.sleep(0.3)
    broker = cluster.brokers[0]
    log_before = broker.log_path.read_text()
    broker.restart(how)
    reopened = broker.log_path.read_text()[len(log_before):]
    feeder.join(60)
    producer.flush(60)
    after = producer._transaction_manager.producer_id_and_epoch
    producer.close()
    assert [f.exception for f in futures if not f.succeeded()] == []
    assert after.producer_id == before.producer_id
    # the restarted broker knew the producer (from its snapshot, or by replaying the log)
    loaded = re.findall(rf"{topic}-\d: opened at offsets \[0, \d+\), (\d+) producers", reopened)
    assert loaded == ["1", "1"], reopened
    check_kp_records(kp_consume(cluster.bootstrap, topic, 2, 10_000, "read_committed"), topic, 10_000)
    ends_after = watermarks(cluster.bootstrap)
    assert {tp: ends_after[tp] for tp in ends_before if tp[0] != topic} == \
        {tp: end for tp, end in ends_before.items() if tp[0] != topic}  # other topics intact


def watermarks(bootstrap: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) watermark of every partition, through librdkafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        topics = consumer.list_topics(timeout=10).topics
        return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                for t, meta in topics.items() for p in meta.partitions}
    finally:
        consumer.close()


def _send_slowly(producer, topic: str, start: int, count: int, futures: list) -> None:
    """About 1.5 s of sends, so some are in flight whenever the broker goes down."""
    for i in range(start, start + count):
        key, value, headers, ts = expected(topic, i)
        futures.append(producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts))
        if i % 50 == 0:
            time.sleep(0.01)


# ------------------------------------------------------------------ admin and the controller


def test_delete_topic_removes_its_logs(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("doomed", num_partitions=2, replication_factor=1)])["doomed"].result(30)
    data_dir = cluster.brokers[0].data_dir
    assert (data_dir / "doomed-0").is_dir()
    admin.delete_topics(["doomed"])["doomed"].result(30)
    assert "doomed" not in admin.list_topics(timeout=10).topics
    left = [p.name for p in data_dir.iterdir() if p.name.startswith("doomed-")]
    # renamed at once to <name>.<id>-delete; the files go file.delete.delay.ms later
    assert all(name.endswith("-delete") for name in left), left


def test_controller_moves_when_it_stops(broker_cluster):
    """Two brokers: the second becomes controller within moments of the first stopping cleanly
    (its ZooKeeper session, and so ``/controller``, ends with the process)."""
    from confluent_kafka.admin import AdminClient

    cluster = broker_cluster(2)

    def controller_seen_by(broker) -> tuple[int, set[int]]:
        metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
        return metadata.controller_id, set(metadata.brokers)

    first_controller, brokers = controller_seen_by(cluster.brokers[1])
    assert first_controller in (1, 2) and brokers == {1, 2}
    cluster.broker(first_controller).stop()
    survivor = cluster.broker(3 - first_controller)
    deadline = time.monotonic() + 15
    while controller_seen_by(survivor) != (survivor.broker_id, {survivor.broker_id}):
        assert time.monotonic() < deadline, survivor.log_tail()
        time.sleep(0.2)


def test_broker_registers_again_when_its_znode_vanishes(cluster, zk_root):
    """As after a ZooKeeper session expiry: the broker notices through its /brokers/ids watch."""
    path = f"{cluster.chroot}/brokers/ids/1"
    zk_root.delete(path)
    deadline = time.monotonic() + 10
    while zk_root.exists(path) is None:
        assert time.monotonic() < deadline, cluster.brokers[0].log_tail()
        time.sleep(0.1)
    assert api_versions_answer(cluster.brokers[0].port)
