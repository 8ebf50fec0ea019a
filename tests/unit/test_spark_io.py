"""The pure pieces of the connector's I/O adapter and schemas: Arrow schemas Spark accepts,
range trimming, and how sink rows are grouped by topic and partition choice. No JVM."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from spark_log import _io
from spark_log.options import OptionError
from spark_log.schema import HEADERS_TYPE, check_sink_schema, source_schema


@pytest.mark.parametrize("headers", [False, True])
def test_arrow_batches_match_what_spark_expects(headers):
    """Spark checks ``to_arrow_schema(schema, timezone="UTC").equals(batch.schema)``."""
    expected = to_arrow_schema(source_schema(headers), timezone="UTC")
    assert expected.equals(_io.ARROW_SCHEMA_WITH_HEADERS if headers else _io.ARROW_SCHEMA)


def batch_with_offsets(offsets):
    n = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.nulls(n, pa.binary()), pa.array([b"v"] * n), pa.array(["t"] * n), pa.array([0] * n, pa.int32()),
        pa.array(offsets, pa.int64()), pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32()),
    ], schema=_io.ARROW_SCHEMA)


@pytest.mark.parametrize("offsets, until, kept", [
    ([5, 6, 7], 10, [5, 6, 7]),
    ([5, 6, 7], 7, [5, 6]),
    ([5, 7, 9], 8, [5, 7]),  # gaps (compaction, markers)
    ([5, 6], 5, []),
    ([], 3, []),
])
def test_below_trims_to_the_range(offsets, until, kept):
    assert _io._below(batch_with_offsets(offsets), until).column("offset").to_pylist() == kept


def test_rows_grouped_by_topic_column_or_option():
    batch = pa.RecordBatch.from_pydict({"topic": ["a", "b", "a"], "value": ["1", "2", "3"]})
    by_column = {t: rows.column("value").to_pylist() for t, rows in _io._by_topic(batch, None)}
    assert by_column == {"a": ["1", "3"], "b": ["2"]}
    by_option = {t: rows.num_rows for t, rows in _io._by_topic(batch, "c")}
    assert by_option == {"c": 3}
    with pytest.raises(ValueError, match="null 'topic'"):
        list(_io._by_topic(pa.RecordBatch.from_pydict({"topic": ["a", None], "value": ["1", "2"]}), None))


@pytest.mark.parametrize("fields, topic, message", [
    ([("key", StringType())], "t", "Required attribute 'value' not found"),
    ([("value", IntegerType())], "t", "value attribute type must be a string or binary"),
    ([("value", StringType()), ("key", IntegerType())], "t", "key attribute type must be a string or binary"),
    ([("value", StringType())], None, "topic option required"),
    ([("value", StringType()), ("topic", IntegerType())], None, "topic attribute type must be a string"),
    ([("value", StringType()), ("partition", StringType())], "t", "partition attribute type must be an int"),
    ([("value", StringType()), ("headers", StringType())], "t", "headers attribute type must be"),
])
def test_sink_schema_errors(fields, topic, message):
    schema = StructType([StructField(n, t) for n, t in fields])
    with pytest.raises(OptionError, match=message):
        check_sink_schema(schema, topic)


def test_sink_schema_accepts_the_kafka_columns():
    schema = StructType([StructField("topic", StringType()), StructField("key", StringType()),
                         StructField("value", StringType()), StructField("partition", IntegerType()),
                         StructField("headers", HEADERS_TYPE), StructField("extra", IntegerType())])
    check_sink_schema(schema, None)
    # With the topic option, a topic column of another type is ignored (the option wins).
    check_sink_schema(StructType([StructField("value", StringType()), StructField("topic", IntegerType())]), "t")


def batch_with_headers(headers):
    n = len(headers)
    return pa.RecordBatch.from_arrays([
        pa.nulls(n, pa.binary()), pa.array([b"v"] * n), pa.array(["t"] * n), pa.array([0] * n, pa.int32()),
        pa.array(range(n), pa.int64()), pa.array([0] * n, pa.timestamp("us", tz="UTC")), pa.array([0] * n, pa.int32()),
        pa.array(headers, _io.ARROW_SCHEMA_WITH_HEADERS.field("headers").type),
    ], schema=_io.ARROW_SCHEMA_WITH_HEADERS)


@pytest.mark.parametrize("headers, expected", [
    ([[], [("h", b"1")], []], [None, [("h", b"1")], None]),  # Spark's Kafka source: null, not []
    ([[("h", b"1")], [("a", None), ("b", b"")]], [[("h", b"1")], [("a", None), ("b", b"")]]),
    ([[]], [None]),
    ([], []),
])
def test_records_without_headers_read_as_null_headers(headers, expected):
    batch = _io._null_empty_headers(batch_with_headers(headers))
    assert batch.schema.equals(_io.ARROW_SCHEMA_WITH_HEADERS)
    got = batch.column("headers").to_pylist()
    assert [None if h is None else [(e["key"], e["value"]) for e in h] for h in got] == expected


def test_null_headers_keep_a_sliced_batch_s_rows():
    batch = batch_with_headers([[("x", b"0")], [], [("h", b"2")], []]).slice(1, 3)
    got = _io._null_empty_headers(batch).column("headers").to_pylist()
    assert [None if h is None else [(e["key"], e["value"]) for e in h] for h in got] == [None, [("h", b"2")], None]


def test_driver_side_modules_do_not_load_the_numba_kernels():
    """Spark starts a fresh Python process per streaming query (source runner) and per sink
    commit; they import the data source but never decode records, so the kernels (1-2 s of
    import) stay unloaded until a read or write needs them."""
    import subprocess
    import sys

    code = ("import sys, spark_log.source, spark_log.stream, spark_log.sink; "
            "print('broker.records._arrow_kernels' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "False"
