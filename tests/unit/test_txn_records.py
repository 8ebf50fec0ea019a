"""``__transaction_state`` records: Kafka's bytes by hand, and round trips of every version."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from broker.coordinator.txn import records
from broker.coordinator.txn.records import (RecordFormatError, TransactionLogValue, UnknownKey,
                                            decode_key, decode_value, encode_key, encode_value)


def _kafka_v0_bytes(pid, epoch, timeout, status, partitions, last_update, start):
    """TransactionLogValue v0 built field by field from Kafka's JSON schema."""
    out = struct.pack(">hqhib", 0, pid, epoch, timeout, status)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ids))
            out += b"".join(struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", last_update, start)


def test_key_is_version_0_and_the_id():
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"
    assert decode_key(b"\x00\x05\x00\x02tx") == UnknownKey(5)


def test_value_v0_matches_kafkas_layout():
    value = TransactionLogValue(producer_id=7, producer_epoch=3, transaction_timeout_ms=60_000,
                                transaction_status=1,
                                transaction_partitions=records.partitions_schema({("b", 2), ("a", 1), ("a", 0)}),
                                transaction_last_update_timestamp_ms=11, transaction_start_timestamp_ms=10)
    expected = _kafka_v0_bytes(7, 3, 60_000, 1, [("a", [0, 1]), ("b", [2])], 11, 10)
    assert encode_value(value, version=0) == expected
    back = decode_value(expected)
    assert back.producer_id == 7 and back.transaction_status == 1
    assert [(p.topic, p.partition_ids) for p in back.transaction_partitions] == [("a", [0, 1]), ("b", [2])]


def test_empty_value_has_null_partitions_and_tombstone_is_none():
    raw = _kafka_v0_bytes(7, 0, 1000, 0, None, 5, -1)
    assert decode_value(raw).transaction_partitions is None
    assert decode_value(None) is None


def test_value_v1_is_flexible_with_tagged_ids():
    """v1: compact strings/arrays, tags 0/1/2 written only when not default."""
    value = TransactionLogValue(producer_id=7, producer_epoch=3, transaction_timeout_ms=60_000,
                                transaction_status=4, transaction_partitions=[],
                                transaction_last_update_timestamp_ms=11, transaction_start_timestamp_ms=10,
                                previous_producer_id=6, client_transaction_version=2)
    raw = encode_value(value, version=1)
    head = struct.pack(">hqhib", 1, 7, 3, 60_000, 4) + b"\x01" + struct.pack(">qq", 11, 10)
    tags = b"\x02" + b"\x00\x08" + struct.pack(">q", 6) + b"\x02\x02" + struct.pack(">h", 2)
    assert raw == head + tags
    back = decode_value(raw)
    assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (6, -1, 2)


# One transaction of librdkafka against Kafka 4.1.1 (KRaft, formatted at 4.1): the key and the
# four values of __transaction_state, as read back from the topic.
KAFKA_411_KEY = bytes.fromhex("0000000870726f62652d7478")
KAFKA_411_VALUES = [
    "000100000000000000000000000075300000000001a213db81c8ffffffffffffffff00",
    "0001000000000000000000000000753001020c70726f62652d746f706963020000000000000001a213db81ec000001a213db81ec00",
    "0001000000000000000000000000753002020c70726f62652d746f706963020000000000000001a213db8217000001a213db81ec00",
    "000100000000000000000000000075300401000001a213db821c000001a213db81ec00",
]


@pytest.mark.parametrize("raw_hex", KAFKA_411_VALUES)
def test_kafka_411_records_decode_and_pylog_writes_the_same_bytes(raw_hex):
    from broker.coordinator.txn.shard import transit_value
    from broker.coordinator.txn.state import Transit, TxnState

    raw = bytes.fromhex(raw_hex)
    assert decode_key(KAFKA_411_KEY) == "probe-tx" and encode_key("probe-tx") == KAFKA_411_KEY
    v = decode_value(raw)
    partitions = frozenset((p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids)
    transit = Transit(producer_id=v.producer_id, previous_producer_id=-1, producer_epoch=v.producer_epoch,
                      last_producer_epoch=-1, timeout_ms=v.transaction_timeout_ms,
                      state=TxnState(v.transaction_status), partitions=partitions,
                      start_ms=v.transaction_start_timestamp_ms, last_update_ms=v.transaction_last_update_timestamp_ms)
    assert transit_value(transit) == raw


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x09" + b"\x00" * 40,
                                 _kafka_v0_bytes(1, 0, 1, 0, None, 0, 0) + b"\x00"])
def test_bad_values_are_refused(raw):
    with pytest.raises(RecordFormatError):
        decode_value(raw)


_names = st.text(min_size=0, max_size=20)
_i64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(tid=_names, pid=_i64, epoch=st.integers(-1, 32767), timeout=st.integers(0, 2**31 - 1),
       status=st.integers(0, 7), parts=st.none() | st.sets(st.tuples(_names, st.integers(0, 2**31 - 1)), max_size=8),
       last=_i64, start=_i64, prev=_i64, nxt=_i64, tv=st.integers(0, 2), version=st.sampled_from([0, 1]))
def test_round_trip(tid, pid, epoch, timeout, status, parts, last, start, prev, nxt, tv, version):
    assert decode_key(encode_key(tid)) == tid
    value = TransactionLogValue(
        producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=timeout, transaction_status=status,
        transaction_partitions=None if parts is None else records.partitions_schema(parts),
        transaction_last_update_timestamp_ms=last, transaction_start_timestamp_ms=start,
        previous_producer_id=prev, next_producer_id=nxt, client_transaction_version=tv)
    back = decode_value(encode_value(value, version))
    assert (back.producer_id, back.producer_epoch, back.transaction_timeout_ms, back.transaction_status,
            back.transaction_last_update_timestamp_ms, back.transaction_start_timestamp_ms) == \
        (pid, epoch, timeout, status, last, start)
    got = None if back.transaction_partitions is None else {
        (p.topic, i) for p in back.transaction_partitions for i in p.partition_ids}
    assert got == parts
    if version == 1:
        assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (prev, nxt, tv)
    else:  # v0 has no tagged fields: defaults
        assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (-1, -1, 0)
