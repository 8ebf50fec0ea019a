"""The checks a leader applies to a client's records before appending them (Kafka's
``LogValidator`` order): the batch structure through the header view, then every record (CRC,
decoding, keys for compacted topics), answered with the error codes and messages Kafka gives.
Pure functions over the request's bytes; ``Partition.append_as_leader`` calls them.
"""

from __future__ import annotations

from broker.records import (
    BatchHeader,
    BatchLimits,
    KeylessRecordError,
    RecordsError,
    batch_size_at,
    validate_batch,
)
from broker.records.arrow import check_batches
from broker.records.header import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, compute_crc
from broker.replica.producer_state import Rejected
from broker.wire import ErrorCode

__all__ = ["BadBatch", "batch_headers", "check_records", "as_kafka_answers", "first_corrupt_batch"]


class BadBatch(Exception):
    def __init__(self, error: Rejected, index: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.index = index


def batch_headers(records: memoryview, limits: BatchLimits) -> list[BatchHeader]:
    """The header of every batch, with every structural check but the CRC (the log's append
    checks that): lengths, the size limit, magic, codec, counts. Raises ``BadBatch``."""
    headers: list[BatchHeader] = []
    position = index = 0
    while position < len(records):
        try:
            header = validate_batch(records, position, limits, check_crc=False)
        except RecordsError as exc:
            raise BadBatch(Rejected(exc.kafka_error_code, str(exc), index), index) from None
        headers.append(header)
        position += header.size
        index += 1
    return headers


def check_records(records: memoryview, limits: BatchLimits,
                   compacted: tuple[str, int] | None = None) -> Rejected | None:
    """Kafka's ``LogValidator`` step: the CRC, then every record of the batch must decode
    (compressed sections decompress within ``decompressed_bytes_max``, no record overruns its
    batch, no control batch from a client). The CRC only proves the bytes are the producer's;
    without this a batch of garbage with a valid CRC would be stored and fail every consumer.
    ``compacted`` (the topic-partition of a compacted log): every record needs a key."""
    try:
        check_batches(records, limits=limits, check_crc=True, keys_required=compacted is not None)
    except KeylessRecordError as exc:
        return _keyless_rejected(exc, *compacted)
    except RecordsError as exc:
        return as_kafka_answers(Rejected(exc.kafka_error_code, str(exc), -1), records)
    return None


def as_kafka_answers(rejected: Rejected, records: memoryview) -> Rejected:
    """Kafka checks a batch's size and CRC first (CORRUPT_MESSAGE); an uncompressed batch that
    passes both but whose counts or records do not parse fails its ``LogValidator`` with
    INVALID_RECORD, and neither carries record errors. A compressed one keeps CORRUPT_MESSAGE: the
    usual cause is a section that does not decompress, where Kafka answers UNKNOWN_SERVER_ERROR
    (named in tests/peer/test_peer_errors.py)."""
    rejected = rejected._replace(batch_index=-1)
    if rejected.error_code != ErrorCode.CORRUPT_MESSAGE or not _crc_holds(records):
        return rejected
    return rejected._replace(error_code=ErrorCode.INVALID_RECORD)


def _crc_holds(records: memoryview) -> bool:
    """The first batch is uncompressed and its stored CRC matches the bytes its length covers."""
    size = batch_size_at(records, 0)
    if not HEADER_SIZE <= size <= len(records) or records[ATTRIBUTES_OFFSET + 1] & 0x07:
        return False
    return compute_crc(records, 0, size) == int.from_bytes(records[CRC_OFFSET:CRC_OFFSET + 4], "big")


def _keyless_rejected(exc: KeylessRecordError, topic: str, partition: int) -> Rejected:
    """INVALID_RECORD with one KIP-467 record error per keyless record (its index in the batch)
    and the messages Kafka gives (``LogValidator``, ``RecordValidationException``)."""
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    errors = tuple((index, message) for _, index in exc.records)
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in errors[:3])
    summary = (f"One or more records have been rejected due to {len(errors)} record errors in total, "
               f"and only showing the first three errors at most: [{shown}]")
    return Rejected(ErrorCode.INVALID_RECORD, summary, errors[0][0], errors)


def first_corrupt_batch(records: memoryview, limits: BatchLimits) -> BadBatch | None:
    """The first batch failing the full check (CRC included), or None: the slow path, taken
    only when something is already wrong, to report the most basic error first."""
    position = index = 0
    while position < len(records):
        try:
            header = validate_batch(records, position, limits, check_crc=True)
        except RecordsError as exc:
            return BadBatch(Rejected(exc.kafka_error_code, str(exc), index), index)
        position += header.size
        index += 1
    return None
