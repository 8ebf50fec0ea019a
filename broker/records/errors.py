"""Typed errors for bad record batches.

Every error carries the Kafka error code the broker answers with, so the server maps an exception
to a response without a lookup table of its own. These are *operating* errors (bad input from a
peer or a damaged file): the caller turns them into values. Broken internal invariants are plain
``assert`` statements instead and are never caught.
"""

from __future__ import annotations

__all__ = [
    "RecordsError",
    "CorruptRecordError",
    "InvalidRecordError",
    "KeylessRecordError",
    "RecordBatchTooLargeError",
    "UnsupportedCompressionError",
]


class RecordsError(ValueError):
    """Base class: the bytes are not an acceptable record batch."""

    kafka_error_code: int = 2  # CORRUPT_MESSAGE


class CorruptRecordError(RecordsError):
    """Bad CRC, impossible length, wrong magic, or a record that overruns its batch."""

    kafka_error_code = 2  # CORRUPT_MESSAGE


class InvalidRecordError(RecordsError):
    """Well-formed bytes that break a rule (too many records or headers, bad control record)."""

    kafka_error_code = 87  # INVALID_RECORD


class KeylessRecordError(InvalidRecordError):
    """Records without a key sent to a compacted topic. ``records`` holds (batch number, record
    index in its batch) of each: Kafka answers one KIP-467 record error per record."""

    def __init__(self, records: tuple[tuple[int, int], ...]) -> None:
        batch, index = records[0]
        super().__init__(f"{len(records)} record(s) without a key, which a compacted topic "
                         f"refuses (the first: record {index} of batch {batch})")
        self.records = records


class RecordBatchTooLargeError(RecordsError):
    """A batch, or its decompressed records, is over the configured limit."""

    kafka_error_code = 10  # MESSAGE_TOO_LARGE


class UnsupportedCompressionError(RecordsError):
    """snappy and zstd are valid Kafka codecs that pylog does not implement (KIP-110 for zstd)."""

    kafka_error_code = 76  # UNSUPPORTED_COMPRESSION_TYPE
