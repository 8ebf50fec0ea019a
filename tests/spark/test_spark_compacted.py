"""Reading a compacted topic with ``format("pylog")``: the broker's cleaner removed older values
of each key, so the partition's offsets have gaps from the log start on. Offsets at or above the
log start offset that hold no record are not data loss (Spark's Kafka source skips them the same
way: KafkaDataConsumer jumps over an invisible offset when it is not below the earliest offset),
so with failOnDataLoss=true a batch read and an AvailableNow stream return exactly the surviving
records, whatever the split: ranges that fall wholly inside a gap give no rows and no error.
"""

from __future__ import annotations

import os
import time

import pytest

from broker.client import AdminClient, Consumer, Producer

from spark_helpers import unique, wait_until

pytestmark = pytest.mark.integration

TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "3600000"}
KEYS = 30
SENDS = 2000


@pytest.fixture(scope="module")
def cleaner_cluster(cluster_factory):
    return cluster_factory.make(1, overrides={"log.cleaner.backoff.ms": "100"})


def read_records(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    tp = (topic, 0)
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out, deadline = [], time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read stopped at {consumer.position(tp)} of {end}"
            out.extend((r.offset, r.key, r.value) for r in consumer.poll(timeout_ms=300, max_records=5000))
    return out


@pytest.fixture(scope="module")
def compacted(cleaner_cluster):
    """A compacted topic whose cleaned part holds one record per key (tombstones included),
    then two roll records; returns (topic, the surviving records, latest offset)."""
    bootstrap = cleaner_cluster.bootstrap
    topic = unique("compacted")
    with AdminClient(bootstrap) as admin:
        admin.create_topics(topic, partitions=1, replication_factor=1, config=TOPIC_CONFIG)
    with Producer(bootstrap, linger_ms=5, batch_bytes_max=2000) as producer:  # batches fit a segment
        for n in range(SENDS):
            value = None if n % 17 == 16 else b"v%d" % n
            producer.send(topic, value, key=b"k%d" % (n % KEYS), partition=0)
        producer.flush()
        # 3000 incompressible bytes each: the segment before each rolls, so all of the above
        # is inactive and cleanable
        for _ in range(2):
            producer.send(topic, os.urandom(3000), key=b"roll", partition=0)
            producer.flush()

    def cleaned():
        records = read_records(bootstrap, topic)
        keys = [key for offset, key, _ in records if offset < SENDS]
        return records if len(keys) == len(set(keys)) == KEYS else None

    records = wait_until(cleaned, 60, what="the cleaner to compact the topic")
    assert records[0][0] > 0 and len(records) < SENDS // 10  # gaps from the log start on
    return topic, records, SENDS + 2


def rows(df) -> list[tuple[int, bytes, bytes | None]]:
    return sorted((r.offset, bytes(r.key), None if r.value is None else bytes(r.value))
                  for r in df.select("offset", "key", "value").collect())


@pytest.mark.parametrize("options", [{}, {"minPartitions": "8"}], ids=["one-range", "8-ranges"])
def test_batch_read_of_a_compacted_topic_returns_the_survivors(spark, cleaner_cluster, compacted, options):
    topic, survivors, latest = compacted
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", cleaner_cluster.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest")
          .option("failOnDataLoss", "true").options(**options).load())
    assert rows(df) == survivors
    if options:  # most of the 8 ranges lie inside gaps: no rows, no data-loss error
        assert df.rdd.getNumPartitions() == 8


def test_stream_of_a_compacted_topic_returns_the_survivors(spark, cleaner_cluster, compacted, tmp_path):
    topic, survivors, latest = compacted
    seen, batches = [], []

    def collect(batch, batch_id) -> None:
        got = rows(batch)
        batches.append(len(got))
        seen.extend(got)

    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", cleaner_cluster.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").option("failOnDataLoss", "true")
          .option("maxOffsetsPerTrigger", str(latest // 4)).load())
    query = (df.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted(seen) == survivors
    assert len(batches) >= 4  # maxOffsetsPerTrigger counts offsets, gaps included
