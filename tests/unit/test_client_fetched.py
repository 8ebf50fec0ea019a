"""Decoding fetched partition data: positions inside batches, control batches, cut tails, and the
read_committed filter of aborted transactions (reference section 3, pitfall 9)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.errors import KafkaError
from broker.client.fetched import AbortedTransactionFilter, decode_fetched
from broker.records import Compression, ControlRecord, ControlType, Record, encode_batch, encode_control_batch
from broker.records.header import read_header
from broker.wire import ErrorCode

TS = 1_700_000_000_000


def data(offset: int, *values: bytes, pid: int = -1, txn: bool = False, compression=Compression.NONE,
         headers=(), timestamp_type: int = 0) -> bytes:
    records = [Record(offset + i, TS + i, b"k", v, headers) for i, v in enumerate(values)]
    return encode_batch(records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        base_sequence=0 if pid >= 0 else -1, transactional=txn,
                        compression=compression, timestamp_type=timestamp_type)


def marker(offset: int, pid: int, kind: int) -> bytes:
    return encode_control_batch(ControlRecord(kind, 3), offset=offset, timestamp=TS,
                                producer_id=pid, producer_epoch=0)


def values(fetched) -> list[bytes]:
    return [r.value for r in fetched.records]


P1, P2 = 101, 202
# One fetch holding several transactions of one producer (pitfall 9), interleaved with another
# producer's, a non-transactional batch, and COMMIT markers that must change nothing.
LOG = b"".join([
    data(0, b"p1-a1", b"p1-a2", pid=P1, txn=True),  # P1 txn 1: aborted
    data(2, b"p2-c1", pid=P2, txn=True),  # P2 txn 1: committed
    marker(3, P1, ControlType.ABORT),
    data(4, b"plain", pid=-1),
    data(5, b"p1-c1", b"p1-c2", pid=P1, txn=True),  # P1 txn 2: committed
    marker(7, P2, ControlType.COMMIT),
    marker(8, P1, ControlType.COMMIT),
    data(9, b"p1-b1", pid=P1, txn=True),  # P1 txn 3: aborted
    data(10, b"p2-a1", pid=P2, txn=True, compression=Compression.GZIP),  # P2 txn 2: aborted
    data(11, b"p1-b2", pid=P1, txn=True, compression=Compression.LZ4),
    marker(12, P1, ControlType.ABORT),
    marker(13, P2, ControlType.ABORT),
    data(14, b"p1-d1", pid=P1, txn=True),  # P1 txn 4: committed
    marker(15, P1, ControlType.COMMIT),
])
# What the broker sends: (producer id, first offset) of each aborted txn, any order.
ABORTED = [(P2, 10), (P1, 9), (P1, 0)]
ALL_DATA = [b"p1-a1", b"p1-a2", b"p2-c1", b"plain", b"p1-c1", b"p1-c2", b"p1-b1", b"p2-a1", b"p1-b2", b"p1-d1"]


def test_read_committed_drops_exactly_the_aborted_transactions():
    fetched = decode_fetched("t", 0, LOG, 0, aborted_transactions=ABORTED, read_committed=True)
    assert values(fetched) == [b"p2-c1", b"plain", b"p1-c1", b"p1-c2", b"p1-d1"]
    assert [r.offset for r in fetched.records] == [2, 4, 5, 6, 14]
    assert fetched.next_offset == 16


def test_read_committed_from_the_middle_uses_only_the_overlapping_aborted_entries():
    # The broker lists aborted txns whose ABORT marker is at or after the fetch offset.
    fetched = decode_fetched("t", 0, LOG, 5, aborted_transactions=[(P1, 9), (P2, 10)], read_committed=True)
    assert values(fetched) == [b"p1-c1", b"p1-c2", b"p1-d1"]


def test_read_uncommitted_returns_aborted_records_too():
    # Reference pitfall 8: read_uncommitted must still see aborted transactional data.
    fetched = decode_fetched("t", 0, LOG, 0, aborted_transactions=ABORTED, read_committed=False)
    assert values(fetched) == ALL_DATA
    assert fetched.next_offset == 16


def test_a_filter_that_never_closes_a_transaction_would_drop_committed_data():
    """Guard: the ABORT marker must close P1's first aborted txn, else p1-c1/p1-c2 vanish."""
    f = AbortedTransactionFilter([(P1, 0)])
    first = read_header(data(0, b"x", pid=P1, txn=True))
    later = read_header(data(5, b"y", pid=P1, txn=True))
    assert f.is_aborted(first)
    f.on_control(read_header(marker(3, P1, ControlType.ABORT)), ControlType.ABORT)
    assert not f.is_aborted(later)


def test_commit_marker_does_not_close_an_aborted_transaction():
    f = AbortedTransactionFilter([(P1, 0)])
    assert f.is_aborted(read_header(data(0, b"x", pid=P1, txn=True)))
    f.on_control(read_header(marker(1, P1, ControlType.COMMIT)), ControlType.COMMIT)
    assert f.is_aborted(read_header(data(2, b"x", pid=P1, txn=True)))


def test_non_transactional_batches_of_an_aborting_producer_are_kept():
    f = AbortedTransactionFilter([(P1, 0)])
    assert not f.is_aborted(read_header(data(0, b"x", pid=P1, txn=False)))
    assert not f.is_aborted(read_header(data(1, b"x", pid=-1)))


def test_records_before_the_fetch_offset_inside_the_first_batch_are_skipped():
    log = data(10, b"a", b"b", b"c", b"d", compression=Compression.LZ4) + data(14, b"e")
    fetched = decode_fetched("t", 3, log, 12)
    assert [(r.offset, r.value) for r in fetched.records] == [(12, b"c"), (13, b"d"), (14, b"e")]
    assert {(r.topic, r.partition) for r in fetched.records} == {("t", 3)}
    assert fetched.next_offset == 15


def test_batches_wholly_before_the_fetch_offset_are_skipped():
    log = data(0, b"a", b"b") + data(2, b"c")
    fetched = decode_fetched("t", 0, log, 2)
    assert values(fetched) == [b"c"] and fetched.next_offset == 3


def test_a_cut_tail_is_left_for_the_next_fetch():
    first, second = data(0, b"a"), data(1, b"b" * 100)
    log = first + second[: len(second) - 7]
    fetched = decode_fetched("t", 0, log, 0)
    assert values(fetched) == [b"a"]
    assert fetched.next_offset == 1
    assert fetched.truncated_bytes == len(second) - 7


def test_only_control_batches_still_move_the_position():
    log = marker(5, P1, ControlType.COMMIT) + marker(6, P2, ControlType.ABORT)
    for committed in (False, True):
        fetched = decode_fetched("t", 0, log, 5, aborted_transactions=[], read_committed=committed)
        assert fetched.records == [] and fetched.next_offset == 7


@pytest.mark.parametrize("records", [None, b""])
def test_nothing_fetched_keeps_the_position(records):
    fetched = decode_fetched("t", 0, records, 42)
    assert fetched.records == [] and fetched.next_offset == 42 and fetched.truncated_bytes == 0


def test_headers_and_timestamp_type_come_through():
    log = data(0, b"v", headers=(("trace", b"1"), ("none", None)), timestamp_type=1)
    record = decode_fetched("t", 0, log, 0).records[0]
    assert record.headers == (("trace", b"1"), ("none", None))
    assert record.timestamp == TS and record.timestamp_type == 1 and record.key == b"k"


def test_old_message_format_is_refused_with_a_typed_error():
    batch = bytearray(data(0, b"v"))
    batch[16] = 1  # magic: outside the CRC's range, so only the magic check can catch it
    with pytest.raises(KafkaError) as info:
        decode_fetched("t", 0, bytes(batch), 0)
    assert info.value.code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    short = bytearray(b"\x00" * 8 + b"\x00\x00\x00\x0e" + b"\x00" * 4 + b"\x01" + b"\x00" * 9)
    with pytest.raises(KafkaError):
        decode_fetched("t", 0, bytes(short), 0)  # a v0 message shorter than a v2 header


def test_corrupt_batch_raises_corrupt_message_unless_crc_checks_are_off():
    batch = bytearray(data(0, b"value"))
    assert batch[-2:] == b"e\x00"  # last value byte, then the header count
    batch[-2] = ord("E")
    with pytest.raises(KafkaError) as info:
        decode_fetched("t", 0, bytes(batch), 0)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE
    assert "t-0" in str(info.value)
    assert values(decode_fetched("t", 0, bytes(batch), 0, check_crcs=False)) == [b"valuE"]


# ------------------------------------------------------------------ property: against a model

operations = st.lists(
    st.tuples(
        st.sampled_from(["data", "data", "data", "end"]),
        st.sampled_from([-1, 1, 2, 3]),  # -1: a non-idempotent producer
        st.integers(min_value=1, max_value=3),
        st.booleans(),  # data: transactional?  end: commit?
        st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]),
    ),
    max_size=40,
)


def build_log(ops, final_commit: bool):
    """Lay out a partition like a broker would; return (bytes, aborted (pid, first, last),
    [(offset, value, visible_when_committed)])."""
    chunks, aborted, expected = [], [], []
    open_txn: dict[int, tuple[int, list[int]]] = {}  # pid -> (first offset, indexes into expected)
    offset = 0

    def end(pid: int, commit: bool) -> None:
        nonlocal offset
        first, members = open_txn.pop(pid)
        chunks.append(marker(offset, pid, ControlType.COMMIT if commit else ControlType.ABORT))
        if not commit:
            aborted.append((pid, first, offset))
            for i in members:
                expected[i] = (expected[i][0], expected[i][1], False)
        offset += 1

    for kind, pid, count, flag, codec in ops:
        if kind == "end":
            if pid in open_txn:
                end(pid, flag)
            continue
        txn = flag and pid >= 0 or pid in open_txn  # an open txn makes every batch of pid transactional
        vals = [f"{offset + i}".encode() for i in range(count)]
        chunks.append(data(offset, *vals, pid=pid, txn=txn, compression=codec))
        if txn:
            first, members = open_txn.setdefault(pid, (offset, []))
            members.extend(range(len(expected), len(expected) + count))
        expected.extend((offset + i, v, True) for i, v in enumerate(vals))
        offset += count
    for pid in list(open_txn):
        end(pid, final_commit)
    return b"".join(chunks), aborted, expected, offset


@given(operations, st.booleans(), st.data())
@settings(max_examples=200, deadline=None)
def test_read_committed_matches_a_model_of_transactions(ops, final_commit, draw):
    log, aborted, expected, end_offset = build_log(ops, final_commit)
    fetch_offset = draw.draw(st.integers(min_value=0, max_value=end_offset))
    # TransactionIndex.collectAbortedTxns: lastOffset >= fetchOffset (upper bound = end here)
    listed = [(pid, first) for pid, first, last in aborted if last >= fetch_offset]
    random.Random(len(listed)).shuffle(listed)
    committed = decode_fetched("t", 0, log, fetch_offset, aborted_transactions=listed, read_committed=True)
    assert [(r.offset, r.value) for r in committed.records] == [
        (o, v) for o, v, visible in expected if visible and o >= fetch_offset
    ]
    uncommitted = decode_fetched("t", 0, log, fetch_offset)
    assert [(r.offset, r.value) for r in uncommitted.records] == [
        (o, v) for o, v, _ in expected if o >= fetch_offset
    ]
    assert committed.next_offset == uncommitted.next_offset == max(end_offset, fetch_offset)


def test_log_append_time_batches_give_every_record_the_batch_stamp():
    """Kafka's clients read a LogAppendTime batch's max timestamp as every record's time."""
    stamped = encode_batch([Record(5, 1_000, None, b"a"), Record(6, 1_007, None, b"b")], timestamp_type=1)
    created = encode_batch([Record(7, 2_000, None, b"c")])
    fetched = decode_fetched("t", 0, stamped + created, 5)
    assert [(r.timestamp, r.timestamp_type) for r in fetched.records] == [(1_007, 1), (1_007, 1), (2_000, 0)]
