"""failOnDataLoss against a real cluster: retention deleted records a query still had to read
(the executor-side check against the log start offset), and a topic deleted under a running
stream (the driver-side "partitions are gone" check), and DeleteRecords past a stream's checkpoint."""

from __future__ import annotations

import time

import pytest
from pyspark.errors import PySparkException

from broker.client import AdminClient
from broker.client.partition_admin import delete_records

from spark_helpers import create_topic, log_bounds, produce, source, unique, wait_until

pytestmark = pytest.mark.integration

# Records are stamped in 2023, so with retention.ms of an hour every closed segment is past
# retention at the broker's next check (the module cluster checks every 500 ms).
RETENTION = {"retention.ms": "3600000", "segment.bytes": "600"}


@pytest.fixture(scope="module")
def aged_out(cluster):
    """A topic whose first records retention deleted: offsets [0, earliest) are gone."""
    topic = create_topic(cluster.bootstrap, unique("ret"), config=RETENTION)
    produce(cluster.bootstrap, topic, 80, flush_every=8)
    previous = None

    def settled():
        """The bounds once retention (a pass every 500 ms) has deleted every closed segment."""
        nonlocal previous
        time.sleep(1.2)
        now = log_bounds(cluster.bootstrap, topic)
        stable, previous = now == previous and now[0] > 0, now
        return now if stable else None

    earliest, latest = wait_until(settled, 60, interval_s=0, what="retention to delete the closed segments")
    assert 0 < earliest < latest == 80
    return topic, earliest, latest


def test_batch_read_fails_on_lost_records(spark, cluster, aged_out):
    topic, earliest, _ = aged_out
    df = source(spark, cluster.bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":0}}}}')
    with pytest.raises(PySparkException) as info:
        df.collect()
    assert f"Cannot fetch offsets 0 to {earliest - 1} of {topic}-0" in str(info.value)
    assert "failOnDataLoss" in str(info.value)


def test_batch_read_skips_lost_records_when_allowed(spark, cluster, aged_out):
    topic, earliest, latest = aged_out
    df = source(spark, cluster.bootstrap, subscribe=topic, failOnDataLoss="false",
                startingOffsets=f'{{"{topic}":{{"0":0}}}}')
    offsets = sorted(r.offset for r in df.select("offset").collect())
    assert offsets == list(range(earliest, latest))


def run_stream(spark, cluster, topic, checkpoint, fail_on_data_loss: str, starting: str):
    seen = []
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap)
          .option("subscribe", topic).option("startingOffsets", starting)
          .option("failOnDataLoss", fail_on_data_loss).load())
    query = (df.writeStream.foreachBatch(lambda b, _: seen.extend(r.offset for r in b.select("offset").collect()))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except Exception:  # the caller checks query.exception()
        pass
    return query, seen


def test_stream_fails_or_skips_after_retention(spark, cluster, aged_out, tmp_path):
    topic, earliest, latest = aged_out
    start = f'{{"{topic}":{{"0":0}}}}'
    failed, _ = run_stream(spark, cluster, topic, str(tmp_path / "a"), "true", start)
    assert failed.exception() is not None
    assert f"Cannot fetch offsets 0 to {earliest - 1}" in str(failed.exception())
    done, seen = run_stream(spark, cluster, topic, str(tmp_path / "b"), "false", start)
    assert done.exception() is None
    assert sorted(seen) == list(range(earliest, latest))


def test_stream_notices_a_deleted_topic(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("del"))
    produce(cluster.bootstrap, topic, 5)
    for flag in ("true", "false"):
        _, seen = run_stream(spark, cluster, topic, str(tmp_path / flag), flag, "earliest")
        assert sorted(seen) == list(range(5))
    with AdminClient(cluster.bootstrap) as admin:
        admin.delete_topics(topic)
        wait_until(lambda: topic not in admin.list_topics(), 30, what="topic deletion")
    failed, _ = run_stream(spark, cluster, topic, str(tmp_path / "true"), "true", "earliest")
    assert failed.exception() is not None and f"{topic}-0 are gone" in str(failed.exception())
    done, seen = run_stream(spark, cluster, topic, str(tmp_path / "false"), "false", "earliest")
    assert done.exception() is None and seen == []


def test_stream_and_batch_after_delete_records(spark, cluster, tmp_path):
    """DeleteRecords (kafka-delete-records, issue 18) moves the log start past where a stream's
    checkpoint stands: restarted with failOnDataLoss=true, the stream fails naming the offsets
    gone; a batch read from there with false skips to the new log start and reads the rest."""
    topic = create_topic(cluster.bootstrap, unique("delrec"))
    produce(cluster.bootstrap, topic, 20)
    checkpoint = str(tmp_path / "checkpoint")
    done, seen = run_stream(spark, cluster, topic, checkpoint, "true", "earliest")
    assert done.exception() is None and sorted(seen) == list(range(20))
    produce(cluster.bootstrap, topic, 30, start=20)
    with AdminClient(cluster.bootstrap) as admin:
        assert delete_records(admin, {(topic, 0): 35}) == {(topic, 0): (35, 0)}
    failed, _ = run_stream(spark, cluster, topic, checkpoint, "true", "earliest")
    assert failed.exception() is not None
    assert f"Cannot fetch offsets 20 to 34 of {topic}-0" in str(failed.exception())
    assert "failOnDataLoss" in str(failed.exception())
    df = source(spark, cluster.bootstrap, subscribe=topic, failOnDataLoss="false",
                startingOffsets=f'{{"{topic}":{{"0":20}}}}')
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(35, 50))
