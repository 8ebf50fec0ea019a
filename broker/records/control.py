"""Transaction markers in a log: which marker a control batch holds. Pure.

A control batch (attributes transactional|control) holds exactly one record whose key is
(version int16 0, type int16: 0 ABORT, 1 COMMIT) and whose value is (version int16 0,
coordinator epoch int32) (Kafka ``EndTransactionMarker``, ``ControlRecordType``). The encoder is
``broker.records.batch.encode_control_batch``; this module reads one back from a buffer of
batches (a follower's fetch, a log replayed on recovery) by its position.
"""

from __future__ import annotations

from broker.records.batch import ControlRecord, decode_batch, decode_control_record
from broker.records.errors import InvalidRecordError
from broker.records.header import DEFAULT_LIMITS, BatchHeader

__all__ = ["read_marker"]


def read_marker(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> ControlRecord:
    """The marker of the control batch at ``pos`` (its ``header`` already read). Raises
    ``InvalidRecordError`` when the batch holds no record or its key is not a marker's."""
    assert header.is_control, "only control batches hold markers"
    batch = decode_batch(buf, pos, DEFAULT_LIMITS, check_crc=False)
    if not batch.records:
        raise InvalidRecordError(f"control batch at offset {header.base_offset} holds no record")
    return decode_control_record(batch.records[0])
