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
    # Written without headers ([]), read back as null headers, as from Spark's Kafka source.
    expected = spark.createDataFrame([(k, v, p, h or None) for k, v, p, h in rows], ROWS_SCHEMA)
    assert_df_equality(got, expected, ignore_row_order=True)
    first = back.where("partition = 1").orderBy("offset").select(F.col("value").cast("string")).limit(3).collect()
    assert [r.value for r in first] == ["value 1", "value 4", "value 7"]


def test_many_small_arrow_batches_per_task_keep_rows_and_order(spark, cluster):
    """Spark hands a task many Arrow batches (here 7 rows each); the sink joins them into send
    runs (``_io._runs``). Every row arrives once, with its key, partition and headers, in the
    task's order per partition, also when the partition column is null in some rows."""
    topic = create_topic(cluster.bootstrap, unique("wruns"), partitions=3)
    rows = [(f"k{i}", f"value {i}".encode(), None if i % 4 == 0 else i % 3,
             [("i", str(i).encode())] if i % 2 else []) for i in range(500)]
    df = spark.createDataFrame(rows, ROWS_SCHEMA).coalesce(1)
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        sink(df, cluster.bootstrap, topic=topic)
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    back = source(spark, cluster.bootstrap, subscribe=topic, includeHeaders="true")
    got = back.select(F.col("key").cast("string").alias("key"), "value", "partition", "headers")
    given = [r for r in rows if r[2] is not None]
    assert back.count() == len(rows)
    assert_df_equality(got.where(F.col("value").isin([r[1] for r in given])),
                       spark.createDataFrame([(k, v, p, h or None) for k, v, p, h in given], ROWS_SCHEMA),
                       ignore_row_order=True)
    # Order per partition is the task's, across rows that name their partition and rows left to
    # the partitioner alike (as Spark's Kafka sink keeps it): both kinds are resolved together.
    for p in range(3):
        values = [r.value for r in back.where(f"partition = {p}").orderBy("offset").select("value").collect()]
        assert len(values) > 1
        assert values == [v for v in (r[1] for r in rows) if v in set(values)], f"partition {p} out of task order"


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


def test_default_and_error_if_exists_modes_append_as_with_the_kafka_format(spark, cluster, tmp_path):
    """``df.write.format("kafka").save()`` appends (Spark's Kafka sink takes ErrorIfExists as
    append). Spark refuses that mode for Python data sources before pylog is asked, so
    ``spark_log.register`` maps it to Append for ``pylog`` writers only; Ignore stays refused
    (as the Kafka sink refuses it), other formats are untouched."""
    topic = create_topic(cluster.bootstrap, unique("wmode"))
    df = spark.createDataFrame([("a",), ("b",)], "value string")
    df.write.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", topic).save()
    (df.write.format("pylog").mode("errorifexists").option("kafka.bootstrap.servers", cluster.bootstrap)
     .option("topic", topic).save())
    df.write.save(format="pylog", mode="error", **{"kafka.bootstrap.servers": cluster.bootstrap, "topic": topic})
    assert source(spark, cluster.bootstrap, subscribe=topic).count() == 6
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        (df.write.format("pylog").mode("ignore").option("kafka.bootstrap.servers", cluster.bootstrap)
         .option("topic", topic).save())
    assert source(spark, cluster.bootstrap, subscribe=topic).count() == 6
    path = str(tmp_path / "parquet")  # another format keeps Spark's own ErrorIfExists meaning
    df.write.format("parquet").save(path)
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS"):
        df.write.format("parquet").save(path)


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
