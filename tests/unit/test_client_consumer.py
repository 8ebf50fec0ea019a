"""Consumer against the in-memory cluster: positions, resets, leader moves, read_committed."""

from __future__ import annotations

import time

import pytest

from broker.client.consumer import Consumer
from broker.client.errors import KafkaError
from broker.client.producer import Producer
from fake_kafka import Fault
from broker.records import Record
from broker.wire import ApiKey, ErrorCode

from client_helpers import FAST, append_batch, consumer, end_txn, in_memory_cluster


@pytest.fixture
def kafka():
    with in_memory_cluster(partitions=2, fetch_wait_cap_ms=50) as cluster:
        yield cluster


def put(kafka, partition: int, *vals: bytes, pid: int = -1, txn: bool = False, topic: str = "t") -> int:
    records = [Record(i, 1000 + i, None, v) for i, v in enumerate(vals)]
    return append_batch(kafka, partition, records, pid=pid, txn=txn, topic=topic)


def drain(c: Consumer, want: int, timeout_s: float = 3.0) -> list:
    out, deadline = [], time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        out.extend(c.poll(timeout_ms=100))
    return out


def test_poll_returns_every_partition_in_order_and_moves_positions(kafka):
    put(kafka, 0, b"a", b"b", b"c")
    put(kafka, 1, b"x")
    put(kafka, 0, b"d")
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0), ("t", 1)])
        records = drain(c, 5)
        assert [r.value for r in records if r.partition == 0] == [b"a", b"b", b"c", b"d"]
        assert [(r.offset, r.value) for r in records if r.partition == 1] == [(0, b"x")]
        assert c.position(("t", 0)) == 4 and c.position(("t", 1)) == 1
        assert c.highwater(("t", 0)) == 4
        assert c.poll(timeout_ms=50) == []


def test_max_records_is_respected_and_the_rest_stays_buffered(kafka):
    put(kafka, 0, *[b"%d" % i for i in range(10)])
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        first = c.poll(timeout_ms=1000, max_records=3)
        assert [r.offset for r in first] == [0, 1, 2]
        assert c.position(("t", 0)) == 3
        second = c.poll(timeout_ms=1000, max_records=100)
        assert [r.offset for r in second] == list(range(3, 10))
    fetches = [r for _, r in kafka.brokers[0].requests_for(ApiKey.FETCH)]
    offsets = [r.topics[0].partitions[0].fetch_offset for r in fetches]
    # The rest came from the buffer; later fetches only prefetch what follows offset 9.
    assert offsets[0] == 0 and all(o == 10 for o in offsets[1:])


def test_latest_is_the_default_start(kafka):
    put(kafka, 0, b"old")
    with consumer(kafka) as c:
        c.assign([("t", 0)])
        assert c.position(("t", 0)) == 1
        put(kafka, 0, b"new")
        assert [r.value for r in drain(c, 1)] == [b"new"]


def test_seek_and_seek_to_beginning_and_end(kafka):
    put(kafka, 0, b"a", b"b", b"c", b"d")
    with consumer(kafka) as c:
        c.assign([("t", 0)])
        c.seek(("t", 0), 2)
        assert [r.value for r in drain(c, 2)] == [b"c", b"d"]
        c.seek_to_beginning()
        assert c.position(("t", 0)) == 0
        first = c.poll(timeout_ms=1000, max_records=1)
        c.seek_to_end([("t", 0)])  # drops what was buffered
        assert c.position(("t", 0)) == 4 and first[0].value == b"a"
        assert c.poll(timeout_ms=50) == []
        with pytest.raises(ValueError):
            c.seek(("t", 1), 0)  # not assigned


def test_out_of_range_resets_to_earliest(kafka):
    put(kafka, 0, b"a", b"b")
    put(kafka, 0, b"c", b"d")
    kafka.delete_records("t", 0, 2)  # log start moves to 2
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        c.seek(("t", 0), 0)
        assert [(r.offset, r.value) for r in drain(c, 2)] == [(2, b"c"), (3, b"d")]


def test_out_of_range_with_latest_policy_jumps_to_the_end(kafka):
    put(kafka, 0, b"a")
    with consumer(kafka, auto_offset_reset="latest") as c:
        c.assign([("t", 0)])
        c.seek(("t", 0), 50)
        assert c.poll(timeout_ms=200) == []
        assert c.position(("t", 0)) == 1


def test_out_of_range_with_policy_none_raises(kafka):
    put(kafka, 0, b"a")
    with consumer(kafka, auto_offset_reset="none") as c:
        c.assign([("t", 0)])
        with pytest.raises(KafkaError) as info:
            c.position(("t", 0))  # no position and no policy
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        c.seek(("t", 0), 7)
        with pytest.raises(KafkaError) as info:
            c.poll(timeout_ms=500)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE and "t-0" in str(info.value)


def test_not_leader_refreshes_metadata_and_continues(kafka):
    put(kafka, 0, b"a")
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        assert [r.value for r in drain(c, 1)] == [b"a"]
        kafka.set_leader("t", 0, 1)
        put(kafka, 0, b"b")
        assert [r.value for r in drain(c, 1)] == [b"b"]
    assert kafka.brokers[1].requests_for(ApiKey.FETCH)


def test_transient_partition_errors_are_retried(kafka):
    put(kafka, 0, b"a")
    kafka.inject(Fault(ApiKey.FETCH, code=ErrorCode.LEADER_NOT_AVAILABLE, times=2))
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        assert [r.value for r in drain(c, 1)] == [b"a"]


def test_other_partition_errors_raise(kafka):
    kafka.inject(Fault(ApiKey.FETCH, code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        with pytest.raises(KafkaError) as info:
            c.poll(timeout_ms=500)
        assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_read_committed_skips_aborted_transactions_and_stops_at_the_lso(kafka):
    put(kafka, 0, b"a1", pid=7, txn=True)
    put(kafka, 0, b"c1", pid=8, txn=True)
    end_txn(kafka, 0, 7, commit=False)
    end_txn(kafka, 0, 8, commit=True)
    put(kafka, 0, b"plain")
    put(kafka, 0, b"a2", pid=7, txn=True)
    end_txn(kafka, 0, 7, commit=False)
    put(kafka, 0, b"open", pid=8, txn=True)  # still open: the LSO stops here (offset 7)
    with consumer(kafka, isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        assert [r.value for r in drain(c, 2)] == [b"c1", b"plain"]
        assert c.poll(timeout_ms=100) == []
        assert c.position(("t", 0)) == 7  # past the aborted batch and its marker
        assert c.last_stable_offset(("t", 0)) == 7 and c.highwater(("t", 0)) == 8
        assert c.end_offsets([("t", 0)]) == {("t", 0): 7}
        end_txn(kafka, 0, 8, commit=True)
        assert [r.value for r in drain(c, 1)] == [b"open"]
        assert c.poll(timeout_ms=50) == [] and c.position(("t", 0)) == 9
    (header, request), *_ = kafka.brokers[0].requests_for(ApiKey.FETCH)
    assert request.isolation_level == 1 and header.api_version == 12


def test_read_uncommitted_sees_aborted_and_open_transactions(kafka):
    put(kafka, 0, b"a1", pid=7, txn=True)
    end_txn(kafka, 0, 7, commit=False)
    put(kafka, 0, b"open", pid=8, txn=True)
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0)])
        assert [r.value for r in drain(c, 2)] == [b"a1", b"open"]


def test_small_partition_fetch_limit_still_delivers_everything(kafka):
    for i in range(20):
        put(kafka, 0, b"v%02d" % i + b"x" * 50)
    with consumer(kafka, auto_offset_reset="earliest", max_partition_fetch_bytes=300) as c:
        c.assign([("t", 0)])
        records = drain(c, 20)
    assert [r.offset for r in records] == list(range(20))
    assert len(kafka.brokers[0].requests_for(ApiKey.FETCH)) > 3  # it took several fetches


def test_fetch_request_fields(kafka):
    with consumer(kafka, fetch_max_wait_ms=30, fetch_min_bytes=5, fetch_max_bytes=9999,
                  max_partition_fetch_bytes=777) as c:
        c.assign([("t", 0)])
        c.poll(timeout_ms=10)
    (header, request), *_ = kafka.brokers[0].requests_for(ApiKey.FETCH)
    assert request.replica_id == -1 and request.isolation_level == 0
    assert request.min_bytes == 5 and request.max_bytes == 9999 and 0 <= request.max_wait_ms <= 30
    assert request.session_id == 0 and request.session_epoch == -1
    (partition,) = request.topics[0].partitions
    assert partition.partition_max_bytes == 777 and partition.fetch_offset == 0


def test_poll_waits_about_the_timeout_when_there_is_nothing(kafka):
    with consumer(kafka) as c:
        c.assign([("t", 0), ("t", 1)])
        started = time.monotonic()
        assert c.poll(timeout_ms=300) == []
        assert 0.25 <= time.monotonic() - started < 2.0


def test_assigning_an_unknown_partition_raises(kafka):
    with consumer(kafka) as c:
        with pytest.raises(KafkaError) as info:
            c.assign([("t", 5)])
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert c.partitions_for("t") == [0, 1]


def test_round_trip_with_our_producer(kafka):
    with Producer(kafka.bootstrap, config=FAST, compression="lz4") as p:
        for i in range(50):
            p.send("t", b"%d" % i, key=b"k%d" % (i % 3), headers={"i": b"%d" % i})
    with consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([("t", 0), ("t", 1)])
        records = drain(c, 50)
    assert sorted(int(r.value) for r in records) == list(range(50))
    assert all(r.headers == (("i", r.value),) for r in records)
    for key in (b"k0", b"k1", b"k2"):  # one key, one partition, in order
        same = [r for r in records if r.key == key]
        assert len({r.partition for r in same}) == 1
        assert [int(r.value) for r in same] == sorted(int(r.value) for r in same)
