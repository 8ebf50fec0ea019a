"""The shape a Produce v3+ partition's records must have before anything else looks at them:
exactly one record batch, of magic 2 (Kafka ``ProduceRequest.validateRecords``). Pure.

Kafka checks this in ``KafkaApis`` right after the topic is known, walking the bytes with its
batch iterator, and answers a violation with the error alone (no log start offset, no record
errors). The iterator decides what counts as a batch, so its rules are repeated here:

- fewer than 12 bytes, fewer than the 17 up to the magic byte, or fewer than the batch length
  announces: *no batch*, INVALID_RECORD (87);
- a batch length under 14 or a magic byte outside 0-2: CORRUPT_MESSAGE (2);
- magic 0 or 1 (the old message formats): INVALID_RECORD;
- a second whole batch after the first: INVALID_RECORD. Fewer trailing bytes than a batch
  header are not a batch and are left to the record checks.

``is_transactional`` is Kafka's test for transactional records in a request, which without a
transactional id fails the whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53).
"""

from __future__ import annotations

import struct

from broker.records.header import LOG_OVERHEAD
from broker.wire import ErrorCode

__all__ = ["records_shape_error", "is_transactional"]

_MAGIC_OFFSET = 16
_HEADER_UP_TO_MAGIC = _MAGIC_OFFSET + 1
_LEGACY_RECORD_OVERHEAD = 14  # Kafka LegacyRecord.RECORD_OVERHEAD_V0: the smallest batch length
_MAGIC = 2
_ATTRIBUTES_LOW_BYTE = 22  # attributes are the int16 at 21
_TRANSACTIONAL = 0x10
_INT32 = struct.Struct(">i")


def records_shape_error(records) -> tuple[int, str] | None:
    """(error code, message) if ``records`` (bytes, memoryview or None) is not exactly one
    magic-2 batch by Kafka's iterator, else None."""
    records = memoryview(b"") if records is None else memoryview(records)
    first = _batch_at(records, 0)
    if isinstance(first, tuple):
        return first
    if first is None:
        return ErrorCode.INVALID_RECORD, "a produce request must carry one record batch per partition"
    if records[_MAGIC_OFFSET] != _MAGIC:
        return (ErrorCode.INVALID_RECORD,
                f"a produce request may only carry record batches of magic 2, not {records[_MAGIC_OFFSET]}")
    second = _batch_at(records, first)
    if isinstance(second, tuple):
        return second
    if second is not None:
        return ErrorCode.INVALID_RECORD, "a produce request must carry exactly one record batch per partition"
    return None


def is_transactional(records) -> bool:
    """Kafka's ``hasTransactionalRecords`` for one partition: its first whole batch is a magic-2
    batch with the transactional attribute (bit 4)."""
    if records is None:
        return False
    records = memoryview(records)
    first = _batch_at(records, 0)
    return (isinstance(first, int) and records[_MAGIC_OFFSET] == _MAGIC
            and bool(records[_ATTRIBUTES_LOW_BYTE] & _TRANSACTIONAL))


def _batch_at(records: memoryview, pos: int) -> int | tuple[int, str] | None:
    """The size of the batch at ``pos``, None if there is no whole batch, or the error."""
    remaining = len(records) - pos
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(records, pos + 8)
    if length < _LEGACY_RECORD_OVERHEAD:
        return ErrorCode.CORRUPT_MESSAGE, f"record batch length {length} is below the minimum"
    if remaining < _HEADER_UP_TO_MAGIC:
        return None
    magic = records[pos + _MAGIC_OFFSET]
    if magic > _MAGIC:  # a byte, so never negative here; Kafka reads it signed: > 127 is < 0
        return ErrorCode.CORRUPT_MESSAGE, f"invalid magic {magic}"
    size = length + LOG_OVERHEAD
    return size if remaining >= size else None
