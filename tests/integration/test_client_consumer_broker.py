"""Our consumer against a real broker: reads across segment boundaries, batches compressed by us
and by librdkafka (gzip, lz4), control batches (transaction markers) skipped with their offsets
consumed, the OFFSET_OUT_OF_RANGE policies, and poll timeouts.

Transaction markers cannot be produced: the broker answers Produce with transactional or control
batches with INVALID_TXN_STATE until it has a transaction coordinator. So the test writes them
the way the broker's own log would hold them: it stops the broker, appends transactional batches
and ABORT/COMMIT markers to the partition's log with ``broker.log.Log`` and starts the broker
again (which replays them into its producer state). The broker's Fetch does not yet answer the
aborted-transactions list (no transaction index), so read_committed *filtering* is tested
against ``InMemoryKafka`` in tests/unit/test_client_consumer*.py; here both isolation levels
must skip the markers.

One broker for the module (each test has its own topic; the marker test stops and starts it).
"""

from __future__ import annotations

import time

import confluent_kafka
import pyarrow as pa
import pytest

from broker.client import AdminClient, ClientConfig, Consumer, KafkaError, Producer
from broker.log import Log, LogConfig
from broker.records import ControlRecord, ControlType, Record, encode_batch, encode_control_batch
from broker.wire import ErrorCode
from integration_support import ClusterFactory, wait_for_controller

pytestmark = pytest.mark.integration

CONFIG = ClientConfig(request_timeout_ms=10_000, retry_backoff_ms=20)


@pytest.fixture(scope="module")
def one_broker(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("consumer"))
    try:
        cluster = factory.make(1)
        yield cluster
    finally:
        factory.close()


@pytest.fixture
def cluster(one_broker):
    """The module's broker, with a controller again if a test before restarted it."""
    wait_for_controller(one_broker.brokers)
    return one_broker


def read_arrow(bootstrap: str, topic: str, expected: int, **options) -> pa.Table:
    options.setdefault("auto_offset_reset", "earliest")
    batches, got = [], 0
    with Consumer(bootstrap, config=CONFIG, **options) as consumer:
        consumer.assign([(topic, p) for p in consumer.partitions_for(topic)])
        deadline = time.monotonic() + 30
        while got < expected and time.monotonic() < deadline:
            out = consumer.poll_arrow(timeout_ms=500)
            parts = out.to_batches() if isinstance(out, pa.Table) else [out]
            batches.extend(b for b in parts if b.num_rows)
            got += out.num_rows
        assert consumer.poll_arrow(timeout_ms=300).num_rows == 0  # nothing more than expected
    return pa.Table.from_batches(batches) if batches else pa.table({})


def read_records(bootstrap: str, topic: str, expected: int, **options) -> list:
    options.setdefault("auto_offset_reset", "earliest")
    out = []
    with Consumer(bootstrap, config=CONFIG, **options) as consumer:
        consumer.assign([(topic, p) for p in consumer.partitions_for(topic)])
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(consumer.poll(timeout_ms=500, max_records=1000))
    return out


def test_reads_across_segments_and_compressed_batches_from_us_and_librdkafka(cluster):
    with AdminClient(cluster.bootstrap, config=CONFIG) as admin:
        admin.create_topics("seg", partitions=1, replication_factor=1, config={"segment.bytes": "8192"})
    expected = []
    for codec in ("none", "gzip", "lz4"):
        with Producer(cluster.bootstrap, config=CONFIG, compression=codec, batch_bytes_max=1500) as p:
            for i in range(400):
                value = b"%s-%04d-" % (codec.encode(), i) + b"v" * (i % 50)
                p.send("seg", value, key=b"k%d" % i, partition=0)
                expected.append(value)
        table = pa.table({"value": [b"%s-arrow-%04d" % (codec.encode(), i) for i in range(300)]})
        with Producer(cluster.bootstrap, config=CONFIG, compression=codec, batch_bytes_max=2000) as p:
            p.send_arrow("seg", table, partition=0).get()
        expected.extend(table.column("value").to_pylist())
    for codec in ("gzip", "lz4"):  # batches compressed by an independent encoder
        rdk = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "compression.type": codec,
                                        "linger.ms": 5, "batch.size": 2000, "enable.idempotence": True})
        for i in range(300):
            value = b"rdk-%s-%04d" % (codec.encode(), i)
            rdk.produce("seg", value, partition=0)
            expected.append(value)
        assert rdk.flush(30) == 0
    segments = sorted((cluster.brokers[0].data_dir / "seg-0").glob("*.log"))
    assert len(segments) > 5  # the reads below cross many segment boundaries

    table = read_arrow(cluster.bootstrap, "seg", len(expected), max_partition_fetch_bytes=3000)
    assert table.column("value").to_pylist() == expected
    assert table.column("offset").to_pylist() == list(range(len(expected)))
    records = read_records(cluster.bootstrap, "seg", len(expected), max_partition_fetch_bytes=5000)
    assert [r.value for r in records] == expected


def test_control_batches_are_skipped_and_their_offsets_consumed(cluster):
    broker = cluster.brokers[0]
    with AdminClient(cluster.bootstrap, config=CONFIG) as admin:
        admin.create_topics("txn", partitions=1, replication_factor=1)
    with Producer(cluster.bootstrap, config=CONFIG) as p:
        p.send("txn", b"p0", partition=0)
        p.send("txn", b"p1", partition=0)
    broker.stop()

    def txn(values: list[bytes], sequence: int) -> bytes:
        return encode_batch([Record(i, 1000, None, v) for i, v in enumerate(values)], base_offset=0,
                            producer_id=777, producer_epoch=0, base_sequence=sequence, transactional=True)

    def marker(kind: int) -> bytes:
        return encode_control_batch(ControlRecord(kind, 0), offset=0, timestamp=1000,
                                    producer_id=777, producer_epoch=0)

    log = Log.open(broker.data_dir / "txn-0", LogConfig(), lambda: int(time.time() * 1000))
    for batch in (txn([b"a1", b"a2"], 0), marker(ControlType.ABORT), txn([b"c1"], 2),
                  marker(ControlType.COMMIT), encode_batch([Record(0, 1000, None, b"p2")], base_offset=0)):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 8
    log.close()
    broker.start()

    # markers at offsets 4 and 6 are not records; a read_uncommitted reader sees the aborted ones
    # (2-3), a read_committed one drops them (the Fetch answer lists producer 777's aborted txn)
    for isolation, offsets, values in (
            ("read_uncommitted", [0, 1, 2, 3, 5, 7], [b"p0", b"p1", b"a1", b"a2", b"c1", b"p2"]),
            ("read_committed", [0, 1, 5, 7], [b"p0", b"p1", b"c1", b"p2"])):
        table = read_arrow(cluster.bootstrap, "txn", len(offsets), isolation_level=isolation)
        assert table.column("offset").to_pylist() == offsets
        assert table.column("value").to_pylist() == values
        records = read_records(cluster.bootstrap, "txn", len(offsets), isolation_level=isolation)
        assert [r.offset for r in records] == offsets
    with Consumer(cluster.bootstrap, config=CONFIG, auto_offset_reset="earliest") as consumer:
        consumer.assign([("txn", 0)])
        consumer.seek(("txn", 0), 6)  # a position on the COMMIT marker
        table = consumer.poll_arrow(timeout_ms=3000)
        assert table.column("offset").to_pylist() == [7]
        assert consumer.position(("txn", 0)) == 8


def test_out_of_range_policies_and_poll_timeouts(cluster):
    with AdminClient(cluster.bootstrap, config=CONFIG) as admin:
        admin.create_topics("oor", partitions=1, replication_factor=1)
    with Producer(cluster.bootstrap, config=CONFIG) as p:
        for i in range(5):
            p.send("oor", b"%d" % i, partition=0)
    tp = ("oor", 0)
    with Consumer(cluster.bootstrap, config=CONFIG, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        assert consumer.poll_arrow(timeout_ms=3000).column("offset").to_pylist() == [0, 1, 2, 3, 4]
    with Consumer(cluster.bootstrap, config=CONFIG, auto_offset_reset="latest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        started = time.monotonic()
        assert consumer.poll_arrow(timeout_ms=500).num_rows == 0  # waited, nothing new
        assert 0.4 <= time.monotonic() - started < 5
        assert consumer.position(tp) == 5
    with Consumer(cluster.bootstrap, config=CONFIG, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        with pytest.raises(KafkaError) as info:
            consumer.poll_arrow(timeout_ms=3000)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
