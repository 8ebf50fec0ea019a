"""Kafka's ProduceRequest.validateRecords rules as ``produce_shape`` repeats them (the peer tier
compares the same inputs against Apache Kafka: tests/peer/test_peer_errors.py)."""

from __future__ import annotations

import pytest

from broker.records import Record, encode_batch
from broker.server.handlers.produce_shape import is_transactional, records_shape_error
from broker.wire import ErrorCode

BATCH = encode_batch([Record(0, 1_700_000_000_000, None, b"value")])


def with_magic(magic: int) -> bytes:
    damaged = bytearray(BATCH)
    damaged[16] = magic
    return bytes(damaged)


@pytest.mark.parametrize("records, error", [
    (BATCH, None),
    (BATCH + b"\x00" * 11, None),  # fewer trailing bytes than a batch header: not a batch
    (None, ErrorCode.INVALID_RECORD),
    (b"", ErrorCode.INVALID_RECORD),
    (BATCH[:11], ErrorCode.INVALID_RECORD),
    (BATCH[:16], ErrorCode.INVALID_RECORD),  # the magic byte is missing
    (BATCH[:-1], ErrorCode.INVALID_RECORD),  # shorter than its length says: no batch
    (BATCH + BATCH, ErrorCode.INVALID_RECORD),
    (with_magic(0), ErrorCode.INVALID_RECORD),
    (with_magic(1), ErrorCode.INVALID_RECORD),
    (with_magic(3), ErrorCode.CORRUPT_MESSAGE),
    (with_magic(0xFF), ErrorCode.CORRUPT_MESSAGE),  # -1 to Kafka's signed byte
    (BATCH[:8] + b"\x00\x00\x00\x0d" + BATCH[12:], ErrorCode.CORRUPT_MESSAGE),  # length 13 < 14
    (BATCH + with_magic(9), ErrorCode.CORRUPT_MESSAGE),  # the second batch's magic
])
def test_records_shape(records, error):
    found = records_shape_error(records)
    assert (found[0] if found else None) == error
    assert found is None or found[1]


TRANSACTIONAL = encode_batch([Record(0, 1_700_000_000_000, None, b"value")], producer_id=1,
                             producer_epoch=0, base_sequence=0, transactional=True)


@pytest.mark.parametrize("records, transactional", [
    (TRANSACTIONAL, True),
    (BATCH, False),
    (None, False),
    (TRANSACTIONAL[:-1], False),  # not a whole batch
    (TRANSACTIONAL[:16] + b"\x01" + TRANSACTIONAL[17:], False),  # magic 1 has no such attribute
])
def test_is_transactional(records, transactional):
    assert is_transactional(records) is transactional
