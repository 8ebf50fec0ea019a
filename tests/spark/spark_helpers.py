"""Helpers shared by the Spark tests: names, waiting, producing known records, reading back."""

from __future__ import annotations

import itertools
import time
import uuid
from datetime import datetime, timezone

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from broker.client import AdminClient, Producer

# Spark's Kafka source schema, written out from KafkaRecordToRowConverter (kafkaSchema and
# headersType), independently of spark_log.schema.
KAFKA_SOURCE_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
])
KAFKA_HEADERS_TYPE = ArrayType(StructType([
    StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True)
KAFKA_SOURCE_SCHEMA_WITH_HEADERS = StructType(
    KAFKA_SOURCE_SCHEMA.fields + [StructField("headers", KAFKA_HEADERS_TYPE, True)])

BASE_TS_MS = 1_700_000_000_000
_names = itertools.count()


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"


def wait_until(predicate, timeout_s: float = 30.0, interval_s: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> str:
    with AdminClient(bootstrap) as admin:
        admin.create_topics(topic, partitions=partitions, replication_factor=1, config=config)
    return topic


def produce(bootstrap: str, topic: str, count: int, *, partitions: int = 1, start: int = 0,
            ts_ms: int | None = BASE_TS_MS, headers: bool = False, prefix: str = "v",
            flush_every: int | None = None) -> list[tuple]:
    """``count`` records spread round-robin over ``partitions``: key ``k<i>``, value
    ``<prefix><i>``, timestamp ``ts_ms + i`` (broker time when None), header ``h=<i>`` on odd i.
    Returns ``(key, value, partition, timestamp_ms, headers)`` per record, in send order."""
    sent = []
    with Producer(bootstrap) as producer:
        for i in range(start, start + count):
            hdrs = [("h", str(i).encode())] if headers and i % 2 else []
            ts = None if ts_ms is None else ts_ms + i
            producer.send(topic, f"{prefix}{i}".encode(), key=f"k{i}".encode(), partition=i % partitions,
                          headers=hdrs or None, timestamp_ms=ts)
            sent.append((f"k{i}".encode(), f"{prefix}{i}".encode(), i % partitions, ts, hdrs))
            if flush_every and (i - start + 1) % flush_every == 0:
                producer.flush()  # one batch per flush: small segments roll between them
        producer.flush()
    return sent


def expected_rows(topic: str, sent: list[tuple], headers: bool = False) -> list[tuple]:
    """Source rows for records produced by ``produce`` (offsets per partition in send order)."""
    next_offset: dict[int, int] = {}
    rows = []
    for key, value, partition, ts, hdrs in sent:
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        stamp = datetime.fromtimestamp(ts / 1000, tz=timezone.utc).replace(tzinfo=None)
        row = (bytearray(key), bytearray(value), topic, partition, offset, stamp, 0)
        if headers:
            row += ([(k, bytearray(v)) for k, v in hdrs] or None,)  # no headers: null, as in Spark
        rows.append(row)
    return rows


def source(spark, bootstrap: str, **options):
    reader = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def log_bounds(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(earliest, latest) offset of one partition."""
    with AdminClient(bootstrap) as admin:
        earliest = admin.list_offsets(topic, [partition], "earliest")[partition]
        latest = admin.list_offsets(topic, [partition], "latest")[partition]
    return earliest, latest
