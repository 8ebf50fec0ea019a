"""Kafka RecordBatch v2: header view, full codec, compression, control batches. Pure: no I/O."""

from broker.records.batch import (
    ControlRecord,
    ControlType,
    Record,
    RecordBatch,
    decode_batch,
    decode_control_record,
    encode_batch,
    encode_control_batch,
    encode_retained_batch,
)
from broker.records.compression import Compression
from broker.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KeylessRecordError,
    RecordBatchTooLargeError,
    RecordsError,
    UnsupportedCompressionError,
)
from broker.records.header import (
    DEFAULT_LIMITS,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    BatchLimits,
    batch_size_at,
    iter_batches,
    log_append_time_header,
    read_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)

__all__ = [
    "BatchHeader", "BatchLimits", "Compression", "ControlRecord", "ControlType",
    "CorruptRecordError", "DEFAULT_LIMITS", "HEADER_SIZE", "InvalidRecordError", "KeylessRecordError",
    "LOG_OVERHEAD",
    "Record", "RecordBatch", "RecordBatchTooLargeError", "RecordsError",
    "UnsupportedCompressionError", "batch_size_at", "decode_batch", "decode_control_record",
    "encode_batch", "encode_control_batch", "encode_retained_batch", "iter_batches",
    "log_append_time_header", "read_header",
    "set_base_offset", "set_partition_leader_epoch", "validate_batch",
]
