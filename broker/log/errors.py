"""Typed errors of the log layer.

Each error carries the Kafka error code the broker answers with, like ``broker.records.errors``.
Bad batches themselves raise the ``RecordsError`` subclasses of ``broker.records`` (CORRUPT_MESSAGE,
MESSAGE_TOO_LARGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE); the errors here are about where a
batch may go in a log. ``-1`` is UNKNOWN_SERVER_ERROR: the condition has no wire code in Kafka
either (``UnexpectedAppendOffsetException``, ``OffsetsOutOfOrderException`` stay inside the broker).
"""

from __future__ import annotations

__all__ = [
    "LogError",
    "OffsetOutOfRangeError",
    "RecordListTooLargeError",
    "InvalidOffsetError",
    "NonMonotonicAppendError",
    "KafkaStorageError",
    "InvalidTopicError",
    "CheckpointError",
]


class LogError(Exception):
    """Base class of every error raised by ``broker.log`` (records errors excepted)."""

    kafka_error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(LogError):
    """A read or a log-start move outside [log_start_offset, log_end_offset]."""

    kafka_error_code = 1  # OFFSET_OUT_OF_RANGE


class RecordListTooLargeError(LogError):
    """The records of one append do not fit in a segment (``RecordBatchTooLargeException``)."""

    kafka_error_code = 18  # RECORD_LIST_TOO_LARGE


class InvalidOffsetError(LogError):
    """A follower append starting below the log end (``UnexpectedAppendOffsetException``)."""

    kafka_error_code = -1


class NonMonotonicAppendError(InvalidOffsetError):
    """Batches of a follower append whose offsets go backwards (``OffsetsOutOfOrderException``)."""


class KafkaStorageError(LogError):
    """An I/O error on the log's files; the log is offline until the broker reopens it."""

    kafka_error_code = 56  # KAFKA_STORAGE_ERROR


class InvalidTopicError(LogError):
    """A topic name Kafka's ``Topic.validate`` would refuse, or a bad partition number."""

    kafka_error_code = 17  # INVALID_TOPIC_EXCEPTION


class CheckpointError(LogError):
    """An offset checkpoint file that does not parse."""
