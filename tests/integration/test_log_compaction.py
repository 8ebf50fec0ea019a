"""Compaction in a real broker: a compacted topic written by librdkafka is cleaned down to the last
value of each key at its original offset, readers see the gaps, and the result survives a crash
(kill -9) and restart; the cleaner's checkpoint file is written in Kafka's format. One broker for
the module (the tests have their own topics; the crash test starts it again)."""

from __future__ import annotations

import os
import signal
import time

import confluent_kafka
import pytest

from broker.client import AdminClient, ClientConfig, Consumer
from broker.log.checkpoint import read_checkpoint
from integration_support import ClusterFactory, wait_for_controller

pytestmark = pytest.mark.integration

CONFIG = ClientConfig(request_timeout_ms=10_000, retry_backoff_ms=20)
CLEANER = {"log.cleaner.backoff.ms": "100"}
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "600000"}
KEYS = 40
# Two records that do not compress and do not fit one segment with anything else: the segment
# before them rolls, so all earlier data is inactive and cleanable.
ROLL = [(b"roll", os.urandom(3000)), (b"roll", os.urandom(3000))]


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 2000,
                                         "enable.idempotence": True, "compression.type": "lz4"})
    for key, value in records:
        producer.produce(topic, value, key, partition=0)
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 up to its end offset as it is now."""
    tp = (topic, 0)
    with Consumer(bootstrap, config=CONFIG, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out, deadline = [], time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read stopped at {consumer.position(tp)} of {end}"
            out.extend((r.offset, r.key, r.value) for r in consumer.poll(timeout_ms=300, max_records=5000))
    return out


def latest_per_key(records) -> dict[bytes, tuple[int, bytes | None]]:
    last = {}
    for offset, key, value in records:
        last[key] = (offset, value)
    return last


def wait_until_compacted(bootstrap: str, topic: str, expected: dict, timeout_s: float = 60):
    """Until every key appears once below the active segment's records (reads are compared
    whole: what the cleaner keeps is the last value of each key, at its offset)."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_all(bootstrap, topic)
        keys = [key for _, key, _ in records]
        if len(keys) - len(set(keys)) <= 2:  # what may still sit in the active segment
            return records
        assert time.monotonic() < deadline, f"not compacted in {timeout_s} s: {len(records)} records"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("compaction"))
    try:
        yield factory.make(1, overrides=CLEANER)
    finally:
        factory.close()


def test_a_compacted_topic_keeps_the_last_value_of_each_key(cluster):
    with AdminClient(cluster.bootstrap, config=CONFIG) as admin:
        admin.create_topics("table", 1, 1, TOPIC_CONFIG)
    writes = [(b"key-%d" % (i % KEYS), b"value-%d" % i) for i in range(3000)]
    writes += [(b"key-%d" % k, None) for k in range(0, KEYS, 10)]  # tombstones for 4 keys
    produce(cluster.bootstrap, "table", writes)
    produce(cluster.bootstrap, "table", ROLL)  # the earlier data becomes inactive
    expected = latest_per_key([(i, k, v) for i, (k, v) in enumerate(writes)])

    records = wait_until_compacted(cluster.bootstrap, "table", expected)
    got = latest_per_key(records)
    for key, (offset, value) in expected.items():
        assert got[key] == (offset, value), key  # tombstones are kept until delete.retention.ms
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(records) < 100  # gaps where records were removed

    broker = cluster.brokers[0]
    checkpoint = read_checkpoint(broker.data_dir / "cleaner-offset-checkpoint")
    assert checkpoint[("table", 0)] > 0

    broker.kill(signal.SIGKILL)  # a crash after cleaning: recovery keeps the cleaned log
    broker.start()
    assert read_all(cluster.bootstrap, "table") == records


def test_a_delete_topic_is_not_compacted(cluster):
    wait_for_controller(cluster.brokers)  # the broker may have just restarted (the crash test)
    with AdminClient(cluster.bootstrap, config=CONFIG) as admin:
        admin.create_topics("plain", 1, 1, {"segment.bytes": "4096"})
        admin.create_topics("table-2", 1, 1, TOPIC_CONFIG)
    writes = [(b"key-%d" % (i % 5), b"value-%d" % i) for i in range(600)]
    for topic in ("plain", "table-2"):
        produce(cluster.bootstrap, topic, writes)
        produce(cluster.bootstrap, topic, ROLL)
    wait_until_compacted(cluster.bootstrap, "table-2", {})  # the cleaner has run meanwhile
    assert len(read_all(cluster.bootstrap, "plain")) == 602
