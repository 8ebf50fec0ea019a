"""The ``__transaction_state`` record layout: Kafka's key and value, byte for byte.

Format (Kafka's ``transaction-coordinator/src/main/resources/common/message/TransactionLog*.json``):

* The **key** is an int16 key version (0, the only one) and ``TransactionLogKey`` v0: the
  ``transactional_id`` string. Another key version is reported as ``UnknownKey`` (Kafka's
  ``readTxnRecordKey`` does the same) so a loader can skip it.
* The **value** is an int16 value version and ``TransactionLogValue`` at that version, or None: a
  tombstone (the transactional id expired). v0: ``producer_id`` int64, ``producer_epoch`` int16,
  ``transaction_timeout_ms`` int32, ``transaction_status`` int8 (the state's id, see ``state``),
  ``transaction_partitions`` nullable [``topic`` string, ``partition_ids`` [int32]] (null when
  Empty), ``transaction_last_update_timestamp_ms`` int64, ``transaction_start_timestamp_ms``
  int64. v1 is flexible (compact strings, tagged fields) and adds the tagged
  ``previous_producer_id`` (tag 0), ``next_producer_id`` (tag 1), both -1 when absent, and
  ``client_transaction_version`` int16 (tag 2, 0 when absent).

Which version to write: Kafka's ``TransactionLog.valueToBytes`` writes
``TransactionVersion.transactionLogValueVersion()``: v0 at ``transaction.version`` 0, v1 from
level 1. A Kafka 4.x cluster formatted at 4.0+ finalizes level 2, so Kafka 4.1 writes **v1** —
seen on Kafka 4.1.1: a librdkafka transaction's Empty, Ongoing, PrepareCommit and CompleteCommit
records are all v1 with every tagged field at its default (client transaction version 0), Empty
with null partitions, Complete* with an empty array (``tests/unit/test_txn_records.py`` holds
those bytes). pylog writes v1 the same way, so the two logs are byte for byte alike; it reads v0
too (Kafka 3.x logs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from broker.wire.errors import MalformedMessage
from broker.wire.codec import struct_decoder, struct_encoder
from broker.wire.message import make_message_classes
from broker.wire.primitives import INT16 as _VERSION
from broker.wire.schema import INT8, INT16, INT32, INT64, STRING, array, field, struct

__all__ = ["TransactionLogValue", "UnknownKey", "RecordFormatError", "VALUE_VERSION",
           "encode_key", "decode_key", "encode_value", "decode_value"]

KEY_VERSION = 0
VALUE_VERSION = 1            # what we write (see the module docstring)
_VALUE_VERSIONS = (0, 1)     # what we read
_FLEXIBLE_FROM = 1


class RecordFormatError(ValueError):
    """Bytes in ``__transaction_state`` that are not a record of Kafka's layout."""


@dataclass(frozen=True)
class UnknownKey:
    """A key version this coordinator does not know (skipped by the loader)."""

    version: int


_KEY = struct("TransactionLogKey", field("transactional_id", STRING, "0"))
_VALUE = struct(
    "TransactionLogValue",
    field("producer_id", INT64, "0+"),
    field("previous_producer_id", INT64, "1+", default=-1, tag=0),
    field("next_producer_id", INT64, "1+", default=-1, tag=1),
    field("producer_epoch", INT16, "0+"),
    field("transaction_timeout_ms", INT32, "0+"),
    field("transaction_status", INT8, "0+"),
    field("transaction_partitions", array(struct(
        "PartitionsSchema",
        field("topic", STRING, "0+"),
        field("partition_ids", array(INT32), "0+"),
    )), "0+", nullable="0+", default=None),
    field("transaction_last_update_timestamp_ms", INT64, "0+"),
    field("transaction_start_timestamp_ms", INT64, "0+"),
    field("client_transaction_version", INT16, "1+", default=0, tag=2),
)

_TransactionLogKey = make_message_classes(_KEY)
TransactionLogValue = make_message_classes(_VALUE)
PartitionsSchema = TransactionLogValue.PartitionsSchema


@functools.cache
def _encoder(stype, version: int):
    return struct_encoder(stype, version, stype is _VALUE and version >= _FLEXIBLE_FROM)


@functools.cache
def _decoder(stype, version: int):
    return struct_decoder(stype, version, stype is _VALUE and version >= _FLEXIBLE_FROM)


def encode_key(transactional_id: str) -> bytes:
    out = [_VERSION.pack(KEY_VERSION)]
    _encoder(_KEY, KEY_VERSION)(_TransactionLogKey(transactional_id=transactional_id), out)
    return b"".join(out)


def _read(stype, data: bytes, version: int, what: str):
    try:
        message, pos = _decoder(stype, version)(memoryview(data), 2)
    except MalformedMessage as e:
        raise RecordFormatError(f"{what} v{version}: {e}") from None
    if pos != len(data):
        raise RecordFormatError(f"{what} v{version}: {len(data) - pos} bytes after the struct")
    return message


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise RecordFormatError(f"{what}: {len(data)} bytes, no version")
    return _VERSION.unpack_from(memoryview(data), 0)[0]


def decode_key(data: bytes) -> str | UnknownKey:
    """The transactional id of a key, or ``UnknownKey`` for another key version."""
    version = _version(data, "TransactionLogKey")
    if version != KEY_VERSION:
        return UnknownKey(version)
    return _read(_KEY, data, version, "TransactionLogKey").transactional_id


def encode_value(value, version: int = VALUE_VERSION) -> bytes:
    out = [_VERSION.pack(version)]
    _encoder(_VALUE, version)(value, out)
    return b"".join(out)


def decode_value(data: bytes | None):
    """A ``TransactionLogValue`` (None for a tombstone). An unknown version is an error, as in
    Kafka's ``readTxnRecordValue`` (the whole load fails rather than guess)."""
    if data is None:
        return None
    version = _version(data, "TransactionLogValue")
    if version not in _VALUE_VERSIONS:
        raise RecordFormatError(f"TransactionLogValue: unknown version {version}")
    return _read(_VALUE, data, version, "TransactionLogValue")


def partitions_schema(partitions) -> list | None:
    """``transaction_partitions`` of a set of (topic, partition): grouped by topic, sorted."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return [PartitionsSchema(topic=t, partition_ids=ids) for t, ids in by_topic.items()]
