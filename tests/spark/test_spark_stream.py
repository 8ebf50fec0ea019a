"""Streaming reads through Spark against a real cluster: read limits, Trigger.AvailableNow and
Trigger.Once, replay from the checkpoint, canonical offsets, reported latest offsets, and new
topics picked up from their earliest offset."""

from __future__ import annotations

import json
import time

import pytest

from spark_helpers import create_topic, produce, unique, wait_until

pytestmark = pytest.mark.integration


def stream(spark, bootstrap: str, **options):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def collect_batches(df, checkpoint: str, trigger: dict, seen: dict) -> None:
    """Run ``df`` to the end with ``trigger``, recording each batch's (partition, offset) pairs."""
    def record(batch, batch_id):
        seen.setdefault(batch_id, []).append(sorted((r.partition, r.offset) for r in
                                                    batch.select("partition", "offset").collect()))

    query = df.writeStream.foreachBatch(record).option("checkpointLocation", checkpoint).trigger(**trigger).start()
    query.awaitTermination()
    assert query.exception() is None


def test_available_now_respects_max_offsets_per_trigger(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("an"), partitions=2)
    produce(cluster.bootstrap, topic, 100, partitions=2)
    df = stream(spark, cluster.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    seen: dict = {}
    collect_batches(df, str(tmp_path / "ck"), {"availableNow": True}, seen)
    sizes = [len(seen[b][0]) for b in sorted(seen)]
    assert sizes == [30, 30, 30, 10]  # 15 per partition per trigger, in proportion to the backlog
    every = [o for b in sorted(seen) for o in seen[b][0]]
    assert sorted(every) == sorted((p, o) for p in range(2) for o in range(50))


def test_trigger_once_reads_everything_despite_the_limit(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("once"), partitions=1)
    produce(cluster.bootstrap, topic, 25)
    df = stream(spark, cluster.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    seen: dict = {}
    collect_batches(df, str(tmp_path / "ck"), {"once": True}, seen)
    assert [len(seen[b][0]) for b in sorted(seen)] == [25]  # ReadAllAvailable wins


def test_restart_and_replay_from_checkpoint_lose_and_duplicate_nothing(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("ck"), partitions=2)
    produce(cluster.bootstrap, topic, 60, partitions=2)
    checkpoint = str(tmp_path / "ck")
    df = stream(spark, cluster.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="25")
    first: dict = {}
    collect_batches(df, checkpoint, {"availableNow": True}, first)
    last = max(first)
    # Crash between the sink and the commit log: Spark replays the last batch with the same offsets.
    (tmp_path / "ck" / "commits" / str(last)).unlink()
    (tmp_path / "ck" / "commits" / f".{last}.crc").unlink(missing_ok=True)
    produce(cluster.bootstrap, topic, 40, partitions=2, start=60)
    second: dict = {}
    collect_batches(df, checkpoint, {"availableNow": True}, second)
    assert second[last] == first[last], "a replayed batch must read exactly the same records"
    batches = {**first, **{b: rows for b, rows in second.items() if b != last}}
    every = [o for b in sorted(batches) for o in batches[b][0]]
    assert len(every) == len(set(every)) == 100
    assert sorted(every) == sorted((p, o) for p in range(2) for o in range(50))


def test_idle_stream_makes_no_batches_and_reports_latest_offset(spark, cluster, tmp_path):
    """Offsets are canonical JSON: an unchanged source must not look new on every trigger."""
    old = create_topic(cluster.bootstrap, unique("idle"), partitions=2)
    produce(cluster.bootstrap, old, 4, partitions=2)
    prefix = old.rsplit("-", 1)[0]
    df = stream(spark, cluster.bootstrap, subscribePattern=f"{prefix}.*")
    query = (df.writeStream.format("memory").queryName(f"q{unique('q').replace('-', '_')}")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: query.lastProgress and query.lastProgress["sources"][0].get("latestOffset"), 60,
                   what="a progress report with the latest offset")
        time.sleep(1.5)  # several more idle triggers
        assert [p for p in query.recentProgress if p["numInputRows"] > 0] == []
        # Spark runs one (empty) first batch to record where the query starts; none after it.
        planned = sorted(f.name for f in (tmp_path / "ck" / "offsets").iterdir() if f.name.isdigit())
        assert planned == ["0"]
        latest = query.lastProgress["sources"][0]["latestOffset"]
        assert json.loads(latest) == {old: {"0": 2, "1": 2}} and latest == json.dumps({old: {"0": 2, "1": 2}})
        # A topic created later that matches the pattern is read from its earliest offset.
        new = create_topic(cluster.bootstrap, f"{prefix}-z", partitions=1)
        produce(cluster.bootstrap, new, 5, prefix="n")
        query.processAllAvailable()
        rows = spark.sql(f"select topic, offset from {query.name}").collect()
        assert sorted((r.topic, r.offset) for r in rows) == [(new, i) for i in range(5)]
    finally:
        query.stop()


def test_min_offsets_per_trigger_waits_for_enough_records(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("min"), partitions=1)
    produce(cluster.bootstrap, topic, 10)
    df = stream(spark, cluster.bootstrap, subscribe=topic, startingOffsets="earliest",
                minOffsetsPerTrigger="30", maxTriggerDelay="1h")
    query = (df.writeStream.format("memory").queryName(f"q{unique('m').replace('-', '_')}")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="100 milliseconds").start())
    try:
        query.processAllAvailable()  # the first trigger never waits (Spark's lastTriggerMillis starts at 0)
        produce(cluster.bootstrap, topic, 10, start=10)
        time.sleep(1.0)
        assert spark.sql(f"select count(*) c from {query.name}").first().c == 10
        produce(cluster.bootstrap, topic, 25, start=20)
        wait_until(lambda: spark.sql(f"select count(*) c from {query.name}").first().c == 45, 20,
                   what="the batch once 35 >= 30 records wait")
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert sizes == [10, 35]
    finally:
        query.stop()


def test_streaming_rejects_ending_offsets(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("end"))
    df = stream(spark, cluster.bootstrap, subscribe=topic, endingOffsets="latest")
    with pytest.raises(Exception, match="'endingOffsets' is not valid in streaming queries"):
        query = df.writeStream.format("memory").queryName("never").option(
            "checkpointLocation", str(tmp_path / "ck")).start()
        query.awaitTermination(60)
