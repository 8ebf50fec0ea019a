"""Spark schemas: the source's (Spark's Kafka source, ``KafkaRecordToRowConverter``) and the
checks on what a DataFrame must look like to be written (``KafkaWriter.validateQuery``)."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_log.options import OptionError

__all__ = ["HEADERS_TYPE", "source_schema", "check_sink_schema"]

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

_BASE_FIELDS = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
)


def source_schema(include_headers: bool = False) -> StructType:
    """Every field nullable, as in Spark; ``headers`` only with ``includeHeaders``."""
    fields = list(_BASE_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def _is_string_or_binary(t: DataType) -> bool:
    return isinstance(t, (StringType, BinaryType))


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """The columns the sink reads: ``value`` (required, string or binary), ``key`` (string or
    binary), ``topic`` (string; required unless the ``topic`` option is set, which wins),
    ``partition`` (int), ``headers`` (array<struct<key string, value binary>>). Other columns
    are ignored."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found: the DataFrame to write needs a "
                          "'value' column (string or binary)")
    if not _is_string_or_binary(fields["value"]):
        raise OptionError(f"value attribute type must be a string or binary, got {fields['value'].simpleString()}")
    if "key" in fields and not _is_string_or_binary(fields["key"]):
        raise OptionError(f"key attribute type must be a string or binary, got {fields['key'].simpleString()}")
    if topic_option is None and "topic" not in fields:
        raise OptionError("topic option required when no 'topic' attribute is present: set the "
                          "'topic' option or add a 'topic' column")
    if "topic" in fields and topic_option is None and not isinstance(fields["topic"], StringType):
        raise OptionError(f"topic attribute type must be a string, got {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(f"partition attribute type must be an int, got {fields['partition'].simpleString()}")
    if "headers" in fields:
        headers = fields["headers"]
        ok = (isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
              and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
              == [("key", StringType), ("value", BinaryType)])
        if not ok:
            raise OptionError(f"headers attribute type must be array<struct<key:string,value:binary>>, "
                              f"got {headers.simpleString()}")
