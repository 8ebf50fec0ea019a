"""The ``pylog`` Python DataSource: batch and streaming reads and writes of a Kafka-protocol
cluster, with the options, schema and offset semantics of Spark's Kafka connector.

When Spark calls what (PySpark 4.3): ``schema()`` when a read is defined (``load()``), so the
options common to batch and streaming are checked there; ``reader()``/``streamReader()`` when the
query is planned (batch/stream-only rules checked there); ``writer()``/``streamWriter()`` when a
write is planned. All of these run on the driver side, before any task starts.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSource, DataSourceReader

from spark_log import driver
from spark_log.options import BATCH, STREAM, OptionError, parse_sink_options, parse_source_options
from spark_log.partitions import RangePartition, read_partition, read_settings
from spark_log.schema import check_sink_schema, source_schema
from spark_log.sink import PylogStreamWriter, PylogWriter
from spark_log.stream import PylogStreamReader

__all__ = ["PylogDataSource", "PylogBatchReader"]

log = logging.getLogger(__name__)


def _check_schema(schema, include_headers: bool) -> None:
    expected = source_schema(include_headers)
    if schema is not None and schema != expected:
        raise OptionError(f"The pylog source has a fixed schema and cannot be given another one "
                          f"(expected {expected.simpleString()}, got {schema.simpleString()})")


class PylogBatchReader(DataSourceReader):
    def __init__(self, options) -> None:
        self._options = options
        self._settings = read_settings(options)
        for warning in options.warnings:
            log.warning("%s", warning)

    def partitions(self):
        plan = driver.plan_batch_read(self._options)
        return [RangePartition(r) for r in plan.ranges]

    def read(self, partition):
        return read_partition(self._settings, partition)


class PylogDataSource(DataSource):
    """``spark.read.format("pylog")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self):
        options = parse_source_options(self.options)
        return source_schema(options.include_headers)

    def reader(self, schema) -> PylogBatchReader:
        options = parse_source_options(self.options, BATCH)
        _check_schema(schema, options.include_headers)
        return PylogBatchReader(options)

    def streamReader(self, schema) -> PylogStreamReader:
        options = parse_source_options(self.options, STREAM)
        _check_schema(schema, options.include_headers)
        return PylogStreamReader(options)

    def writer(self, schema, overwrite: bool) -> PylogWriter:
        if overwrite:
            raise OptionError("Save mode 'overwrite' is not allowed for the pylog sink: a log can only "
                              "be appended to. Use mode 'append' (or Spark's default, which pylog takes as append)")
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options.topic)
        return PylogWriter(options)

    def streamWriter(self, schema, overwrite: bool) -> PylogStreamWriter:
        options = parse_sink_options(self.options)
        check_sink_schema(schema, options.topic)
        return PylogStreamWriter(options)
