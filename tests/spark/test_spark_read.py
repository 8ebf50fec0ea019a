"""Batch reads through Spark against a real cluster: schema parity with Spark's Kafka source,
rows, offsets and timestamps options, splitting, and option errors at planning time."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.errors import AnalysisException

from spark_helpers import (
    BASE_TS_MS,
    KAFKA_SOURCE_SCHEMA,
    KAFKA_SOURCE_SCHEMA_WITH_HEADERS,
    create_topic,
    expected_rows,
    produce,
    source,
    unique,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def topic(cluster):
    """3 partitions, 60 records (20 each), odd records with a header."""
    name = create_topic(cluster.bootstrap, unique("read"), partitions=3)
    sent = produce(cluster.bootstrap, name, 60, partitions=3, headers=True)
    return name, sent


def ordered(df):
    return df.orderBy("topic", "partition", "offset")


def test_schema_equals_spark_kafka_source(spark, cluster, topic):
    assert source(spark, cluster.bootstrap, subscribe=topic[0]).schema == KAFKA_SOURCE_SCHEMA
    with_headers = source(spark, cluster.bootstrap, subscribe=topic[0], includeHeaders="true")
    assert with_headers.schema == KAFKA_SOURCE_SCHEMA_WITH_HEADERS


def test_batch_read_returns_every_record(spark, cluster, topic):
    name, sent = topic
    df = source(spark, cluster.bootstrap, subscribe=name, includeHeaders="true")
    expected = spark.createDataFrame(expected_rows(name, sent, headers=True), KAFKA_SOURCE_SCHEMA_WITH_HEADERS)
    assert_df_equality(ordered(df), ordered(expected))


def test_offsets_and_timestamps_bound_the_read(spark, cluster, topic):
    name, _ = topic
    # partition p holds records i = p, p+3, ...; record i has timestamp BASE + i, offset i // 3
    cases = {
        "json offsets": dict(startingOffsets=f'{{"{name}":{{"0":5,"1":-2,"2":18}}}}',
                             endingOffsets=f'{{"{name}":{{"0":7,"1":2,"2":-1}}}}'),
        "timestamps": dict(startingTimestamp=str(BASE_TS_MS + 30), endingTimestamp=str(BASE_TS_MS + 36)),
        "per-partition timestamps": dict(
            startingOffsetsByTimestamp=f'{{"{name}":{{"0":{BASE_TS_MS + 30},"1":{BASE_TS_MS},"2":{BASE_TS_MS + 59}}}}}',
            endingOffsetsByTimestamp=f'{{"{name}":{{"0":{BASE_TS_MS + 36},"1":{BASE_TS_MS + 7},"2":{BASE_TS_MS + 999}}}}}'),
    }
    got = {case: sorted((r.partition, r.offset) for r in
                        source(spark, cluster.bootstrap, subscribe=name, **opts).select("partition", "offset").collect())
           for case, opts in cases.items()}
    assert got["json offsets"] == [(0, 5), (0, 6), (1, 0), (1, 1), (2, 18), (2, 19)]
    assert got["timestamps"] == [(0, 10), (0, 11), (1, 10), (1, 11), (2, 10), (2, 11)]
    assert got["per-partition timestamps"] == [(0, 10), (0, 11), (1, 0), (1, 1), (2, 19)]


def test_assign_and_pattern(spark, cluster, topic):
    name, _ = topic
    assigned = source(spark, cluster.bootstrap, assign=f'{{"{name}":[2]}}')
    assert sorted({r.partition for r in assigned.select("partition").collect()}) == [2]
    assert assigned.count() == 20
    pattern = source(spark, cluster.bootstrap, subscribePattern=name.replace("-", "."))
    assert pattern.count() == 60


@pytest.mark.parametrize("options, tasks", [
    ({}, 3),
    ({"minPartitions": "6"}, 6),
    ({"maxRecordsPerPartition": "7"}, 9),
    ({"maxRecordsPerPartition": "10", "minPartitions": "12"}, 12),
])
def test_split_into_tasks(spark, cluster, topic, options, tasks):
    df = source(spark, cluster.bootstrap, subscribe=topic[0], **options)
    assert df.rdd.getNumPartitions() == tasks
    offsets = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert offsets == sorted((p, o) for p in range(3) for o in range(20))  # each record exactly once


@pytest.mark.parametrize("options, message", [
    ({"startingOffsets": "latest"}, "'startingOffsets' can't be 'latest' for batch queries"),
    ({"endingOffsets": "earliest"}, "'endingOffsets' can't be 'earliest' for batch queries"),
    ({"minPartitions": "0"}, "'minPartitions' must be a positive integer"),
    ({"subscribePattern": ".*"}, "Only one of the options 'assign', 'subscribe' or 'subscribePattern'"),
    ({"kafka.auto.offset.reset": "earliest"}, "'kafka.auto.offset.reset' is not supported"),
    ({"startingOffsets": '{"nope":{"0":1}}'}, "'startingOffsets' must give every assigned topic-partition"),
])
def test_invalid_options_fail_before_reading(spark, cluster, topic, options, message):
    with pytest.raises(AnalysisException) as info:
        source(spark, cluster.bootstrap, subscribe=topic[0], **options).collect()
    assert message in str(info.value)


def test_missing_subscription_fails_at_load(spark, cluster):
    with pytest.raises(AnalysisException, match="One of the options 'assign', 'subscribe' or 'subscribePattern'"):
        spark.read.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap).load()


def test_user_schema_is_refused(spark, cluster, topic):
    reader = (spark.read.format("pylog").schema("value binary").option("kafka.bootstrap.servers", cluster.bootstrap)
              .option("subscribe", topic[0]))
    with pytest.raises(AnalysisException, match="fixed schema"):
        reader.load().collect()
