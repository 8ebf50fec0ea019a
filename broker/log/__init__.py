"""A partition's log on disk in Kafka's layout: segments, sparse indexes, recovery, retention.

Imports only the standard library, ``numpy`` (index checks) and ``broker.records``.
"""

from broker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from broker.log.config import LogConfig
from broker.log.errors import (
    CheckpointError,
    InvalidOffsetError,
    InvalidTopicError,
    KafkaStorageError,
    LogError,
    NonMonotonicAppendError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from broker.log.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendInfo,
    FetchData,
    Log,
    LogStatistics,
)
from broker.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    LogManager,
    ManagerStatistics,
    parse_log_dir_name,
    validate_topic,
    wall_clock_ms,
)
from broker.log.offset_index import OffsetIndex
from broker.log.segment import BatchInfo, LogSegment, SegmentSlice, segment_file_name
from broker.log.time_index import TimeIndex

__all__ = [
    "AppendInfo", "BatchInfo", "CLEAN_SHUTDOWN_FILE", "CheckpointError", "EARLIEST_TIMESTAMP",
    "FetchData", "InvalidOffsetError", "InvalidTopicError", "KafkaStorageError",
    "LATEST_TIMESTAMP", "LOG_START_OFFSET_CHECKPOINT", "Log", "LogConfig", "LogError",
    "LogManager", "LogSegment", "LogStatistics", "MAX_TIMESTAMP", "ManagerStatistics",
    "NonMonotonicAppendError", "OffsetIndex", "OffsetOutOfRangeError", "RECOVERY_POINT_CHECKPOINT",
    "RecordListTooLargeError", "SegmentSlice", "TimeIndex", "parse_log_dir_name",
    "read_checkpoint", "segment_file_name", "validate_topic", "wall_clock_ms", "write_checkpoint",
]
