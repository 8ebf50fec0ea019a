"""Batch and streaming writes through Spark against a real cluster, read back with the source."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from spark_helpers import create_topic, produce, source, unique

pytestmark = pytest.mark.integration

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
ROWS_SCHEMA = StructType([
    StructField("key", StringType()), StructField("value", BinaryType()),
    StructField("partition", IntegerType()), StructField("headers", HEADERS)])


def sink(df, bootstrap: str, **options):
    writer = df.write.format("pylog").mode("append").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def test_write_then_read_back_equal_dataframes(spark, cluster):
    topic = create_topic(cluster.bootstrap, unique("w"), partitions=3)
    rows = [(f"k{i}" if i % 5 else None, f"value {i}".encode(), i % 3,
             [("trace", str(i).encode()), ("n", None)] if i % 2 else []) for i in range(300)]
    df = spark.createDataFrame(rows, ROWS_SCHEMA)
    sink(df.coalesce(1), cluster.bootstrap, topic=topic)  # one task: rows keep their order per partition
    back = source(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    got = back.select(F.col("key").cast("string").alias("key"), "value", "partition", "headers")
    assert_df_equality(got, df, ignore_row_order=True)
    first = back.where("partition = 1").orderBy("offset").select(F.col("value").cast("string")).limit(3).collect()
    assert [r.value for r in first] == ["value 1", "value 4", "value 7"]


def test_topic_column_and_option_and_partitioner(spark, cluster):
    a = create_topic(cluster.bootstrap, unique("wa"), partitions=2)
    b = create_topic(cluster.bootstrap, unique("wb"), partitions=2)
    df = spark.createDataFrame([(a if i % 2 else b, f"k{i}", f"v{i}") for i in range(40)],
                               "topic string, key string, value string")
    sink(df, cluster.bootstrap)  # the topic column decides; no partition column: murmur2 of the key
    counts = {r.topic: r.c for r in source(spark, cluster.bootstrap, subscribe=f"{a},{b}")
              .groupBy("topic").agg(F.count("*").alias("c")).collect()}
    assert counts == {a: 20, b: 20}
    c = create_topic(cluster.bootstrap, unique("wc"))
    sink(df, cluster.bootstrap, topic=c)  # the option wins over the column
    assert source(spark, cluster.bootstrap, subscribe=c).count() == 40
    # A null partition leaves the choice to the partitioner; a given one is kept.
    mixed = spark.createDataFrame([("x", None), ("y", 1)], "value string, partition int")
    sink(mixed, cluster.bootstrap, topic=a)
    placed = {r.value: r.partition for r in source(spark, cluster.bootstrap, subscribe=a)
              .selectExpr("cast(value as string) value", "partition").where("value in ('x', 'y')").collect()}
    assert placed["y"] == 1 and placed["x"] in (0, 1)


@pytest.mark.parametrize("columns, options, mode, message", [
    ("key string", {"topic": "t"}, "append", "Required attribute 'value' not found"),
    ("value int", {"topic": "t"}, "append", "value attribute type must be a string or binary"),
    ("value string", {}, "append", "topic option required when no 'topic' attribute is present"),
    ("value string, partition string", {"topic": "t"}, "append", "partition attribute type must be an int"),
    ("value string", {"topic": "t"}, "overwrite", "Save mode 'overwrite' is not allowed for the pylog sink"),
    ("value string", {"topic": "t", "kafka.acks": "2"}, "append", "'kafka.acks' must be"),
])
def test_write_errors_name_the_problem(spark, cluster, columns, options, mode, message):
    df = spark.createDataFrame([], columns)
    writer = df.write.format("pylog").mode(mode).option("kafka.bootstrap.servers", cluster.bootstrap)
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(AnalysisException) as info:
        writer.save()
    assert message in str(info.value)


def test_error_if_exists_is_refused_by_spark_for_python_sources(spark, cluster):
    """Spark 4.3 lets Python data sources write only in Append/Overwrite (a JVM-side rule), so the
    default mode of df.write fails before pylog is asked; use mode("append")."""
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        df.write.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", "t").save()


def test_streaming_pylog_to_pylog(spark, cluster, tmp_path):
    src = create_topic(cluster.bootstrap, unique("in"), partitions=2)
    dst = create_topic(cluster.bootstrap, unique("out"), partitions=2)
    produce(cluster.bootstrap, src, 50, partitions=2, headers=True)
    query = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest").option("includeHeaders", "true")
             .option("maxOffsetsPerTrigger", "20").load()
             .selectExpr("key", "upper(cast(value as string)) as value", "partition", "headers")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", dst)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination()
    out = source(spark, cluster.bootstrap, subscribe=dst, includeHeaders="true")
    expected = (source(spark, cluster.bootstrap, subscribe=src, includeHeaders="true")
                .selectExpr("key", "cast(upper(cast(value as string)) as binary) as value", "partition", "headers"))
    assert_df_equality(out.select("key", "value", "partition", "headers"), expected, ignore_row_order=True)
