"""The leader's timestamp rule for CreateTime records (Kafka's ``LogValidator.validateTimestamp``,
KIP-937): a record may be at most ``message.timestamp.before.max.ms`` older and at most
``message.timestamp.after.max.ms`` newer than the leader's clock. Records without a timestamp
(-1) and LogAppendTime topics (the leader stamps its own time) are not checked.

The batch header bounds the newest record (``maxTimestamp``), so the default settings (no lower
bound) decide from the header alone; records are decoded only to name the ones out of range, or
when a lower bound is set.
"""

from __future__ import annotations

from broker.log import LogConfig
from broker.log.config import INT64_MAX
from broker.records import BatchHeader, BatchLimits, decode_batch
from broker.replica.producer_state import Rejected
from broker.wire import ErrorCode

__all__ = ["check_timestamps"]

_NO_TIMESTAMP = -1


def check_timestamps(records: memoryview, header: BatchHeader, config: LogConfig, now_ms: int,
                     limits: BatchLimits) -> Rejected | None:
    """None if every record of the (one, already validated) batch is in range; else
    INVALID_TIMESTAMP with a KIP-467 record error per record out of range, as Kafka answers."""
    if config.log_append_time:
        return None
    low = now_ms - config.message_timestamp_before_max_ms
    high = now_ms + config.message_timestamp_after_max_ms
    if header.max_timestamp <= high and config.message_timestamp_before_max_ms == INT64_MAX:
        return None
    errors = tuple(
        (index, f"Timestamp {record.timestamp} of message with offset {record.offset} is out of "
                f"range. The timestamp should be within [{low}, {high}]")
        for index, record in enumerate(decode_batch(records, 0, limits, check_crc=False).records)
        if record.timestamp != _NO_TIMESTAMP and not low <= record.timestamp <= high
    )
    if not errors:
        return None
    return Rejected(ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
                    0, errors)
