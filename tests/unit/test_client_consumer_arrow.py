"""Consumer to Arrow against the in-memory cluster: poll_arrow's schema and positions, the
bounded prefetch, read_committed through the vectorized decoder, mixing poll and poll_arrow."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from broker.client.consumer import Consumer
from broker.client.fetcher import next_fetch_offset
from broker.records import Record, encode_batch
from broker.records.arrow import SPARK_KAFKA_SCHEMA, SPARK_KAFKA_SCHEMA_WITH_HEADERS
from broker.wire import ApiKey

import client_helpers
from client_helpers import append_batch, end_txn, in_memory_cluster


@pytest.fixture
def kafka():
    with in_memory_cluster(partitions=2, fetch_wait_cap_ms=50) as cluster:
        yield cluster


def consumer(kafka, **options) -> Consumer:
    options.setdefault("auto_offset_reset", "earliest")
    return client_helpers.consumer(kafka, **options)


def put(kafka, partition: int, *vals: bytes, pid: int = -1, txn: bool = False, headers=()) -> int:
    records = [Record(i, 1000 + i, b"k" + v, v, headers) for i, v in enumerate(vals)]
    return append_batch(kafka, partition, records, pid=pid, txn=txn)


def drain_arrow(c: Consumer, want: int, timeout_s: float = 3.0, **kwargs) -> pa.Table:
    batches, got, deadline = [], 0, time.monotonic() + timeout_s
    while got < want and time.monotonic() < deadline:
        out = c.poll_arrow(timeout_ms=100, **kwargs)
        parts = out.to_batches() if isinstance(out, pa.Table) else [out]
        batches.extend(b for b in parts if b.num_rows)
        got += out.num_rows
    return pa.Table.from_batches(batches, schema=c._schema())


def test_poll_arrow_returns_spark_kafka_rows_in_offset_order(kafka):
    put(kafka, 0, b"a", b"b")
    put(kafka, 0, b"c")
    put(kafka, 1, b"x")
    with consumer(kafka) as c:
        c.assign([("t", 0), ("t", 1)])
        table = drain_arrow(c, 4)
        assert table.schema == SPARK_KAFKA_SCHEMA
        rows = table.to_pylist()
        p0 = [r for r in rows if r["partition"] == 0]
        assert [(r["offset"], r["value"], r["key"]) for r in p0] == [(0, b"a", b"ka"), (1, b"b", b"kb"),
                                                                       (2, b"c", b"kc")]
        assert {r["topic"] for r in rows} == {"t"} and all(r["timestampType"] == 0 for r in rows)
        assert p0[0]["timestamp"].timestamp() == 1.0  # 1000 ms, as microseconds in Arrow
        assert c.position(("t", 0)) == 3 and c.position(("t", 1)) == 1
        empty = c.poll_arrow(timeout_ms=50)
        assert empty.num_rows == 0 and empty.schema == SPARK_KAFKA_SCHEMA


def test_poll_arrow_max_records_keeps_the_rest_decoded(kafka):
    put(kafka, 0, *[b"%d" % i for i in range(10)])
    with consumer(kafka) as c:
        c.assign([("t", 0)])
        first = drain_arrow(c, 4, max_records=4)
        assert first.column("offset").to_pylist() == [0, 1, 2, 3]
        assert c.position(("t", 0)) == 4
        rest = drain_arrow(c, 6)
        assert rest.column("offset").to_pylist() == list(range(4, 10))


def test_headers_are_included_on_request(kafka):
    put(kafka, 0, b"a", headers=(("h", b"1"), ("n", None)))
    with consumer(kafka, include_headers=True) as c:
        c.assign([("t", 0)])
        table = drain_arrow(c, 1)
    assert table.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert table.column("headers").to_pylist() == [[{"key": "h", "value": b"1"}, {"key": "n", "value": None}]]


def test_read_committed_arrow_matches_the_record_path(kafka):
    put(kafka, 0, b"a1", pid=7, txn=True)
    put(kafka, 0, b"c1", pid=8, txn=True)
    end_txn(kafka, 0, 7, commit=False)
    end_txn(kafka, 0, 8, commit=True)
    put(kafka, 0, b"plain")
    put(kafka, 0, b"a2", pid=7, txn=True)
    end_txn(kafka, 0, 7, commit=False)
    put(kafka, 0, b"c2", pid=7, txn=True)
    end_txn(kafka, 0, 7, commit=True)
    put(kafka, 0, b"open", pid=8, txn=True)  # still open: the LSO stops before it
    with consumer(kafka, isolation_level="read_committed") as c:
        c.assign([("t", 0)])
        table = drain_arrow(c, 3)
        assert table.column("value").to_pylist() == [b"c1", b"plain", b"c2"]
        assert c.poll_arrow(timeout_ms=100).num_rows == 0
        assert c.position(("t", 0)) == 9  # past aborted batches and every marker
    with consumer(kafka, isolation_level="read_uncommitted") as c:
        c.assign([("t", 0)])
        table = drain_arrow(c, 6)
        assert table.column("value").to_pylist() == [b"a1", b"c1", b"plain", b"a2", b"c2", b"open"]


def test_prefetch_is_bounded_by_fetch_buffer_bytes_max(kafka):
    for i in range(60):
        put(kafka, 0, b"%02d" % i + b"x" * 300)  # ~400-byte batches
    with consumer(kafka, max_partition_fetch_bytes=1000, fetch_buffer_bytes_max=2500) as c:
        c.assign([("t", 0)])
        first = drain_arrow(c, 1, max_records=1)
        assert first.num_rows == 1
        time.sleep(0.3)  # time for answers to arrive; the consumer does not poll meanwhile
        for _ in range(5):
            c.poll_arrow(timeout_ms=20, max_records=1)
        stats = c.statistics()
        # never more than the bound plus one answer (each at most max_partition_fetch_bytes)
        assert 0 < stats["fetch_buffer_bytes_peak"] <= 2500 + 1000
        fetched_so_far = len(kafka.brokers[0].requests_for(ApiKey.FETCH))
        assert fetched_so_far < 20  # 60 batches were not all fetched ahead of the consumer
        rest = drain_arrow(c, 60 - 6, timeout_s=10)
    assert rest.column("offset").to_pylist() == list(range(6, 60))


def test_prefetch_overlaps_the_next_fetch_with_decoding(kafka):
    for i in range(10):
        put(kafka, 0, b"%d" % i)
    with consumer(kafka, max_partition_fetch_bytes=200) as c:
        c.assign([("t", 0)])
        drain_arrow(c, 1, max_records=1)

        def offsets():
            return [r.topics[0].partitions[0].fetch_offset for _, r in kafka.brokers[0].requests_for(ApiKey.FETCH)]

        # what follows the first chunk was requested before the consumer asked for it again
        deadline = time.monotonic() + 3
        while len(offsets()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert offsets()[0] == 0 and offsets()[1] > 0


def test_poll_and_poll_arrow_can_be_mixed(kafka):
    put(kafka, 0, *[b"%d" % i for i in range(6)])
    with consumer(kafka) as c:
        c.assign([("t", 0)])
        deadline = time.monotonic() + 3
        records = []
        while not records and time.monotonic() < deadline:
            records = c.poll(timeout_ms=100, max_records=2)
        assert [r.offset for r in records] == [0, 1]
        table = drain_arrow(c, 2, max_records=2)
        assert table.column("offset").to_pylist() == [2, 3]
        assert [r.value for r in c.poll(timeout_ms=100)] == [b"4", b"5"]


def test_seek_drops_prefetched_data(kafka):
    put(kafka, 0, *[b"%d" % i for i in range(5)])
    with consumer(kafka) as c:
        c.assign([("t", 0)])
        drain_arrow(c, 1, max_records=1)
        c.seek(("t", 0), 3)
        assert drain_arrow(c, 2).column("offset").to_pylist() == [3, 4]


def test_next_fetch_offset_reads_only_batch_headers():
    one = encode_batch([Record(5, 0, None, b"a"), Record(6, 0, None, b"b")], base_offset=5)
    two = encode_batch([Record(7, 0, None, b"c")], base_offset=7)
    assert next_fetch_offset(one + two, 5) == (8, len(one) + len(two))
    assert next_fetch_offset(one + two[:20], 5) == (7, len(one))  # a cut batch is fetched again
    assert next_fetch_offset(b"", 9) == (9, 0)
