"""pylog's Arrow producer against Apache Kafka and pylog: a table that encodes to many batches per
partition is accepted whole by both (each batch starts at baseOffset 0, as Kafka's leader
requires of a client), and reads back with the same offsets on both."""

from __future__ import annotations

import time

import pyarrow as pa
from peer_support import unique_topic

from broker.client import Consumer, Producer


def read_back(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes, bytes]]:
    tps = [(topic, p) for p in range(partitions)]
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        out, deadline = [], time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "read back stalled"
            out += [(r.partition, r.offset, r.key, r.value) for r in consumer.poll(timeout_ms=300, max_records=5000)]
    return sorted(out)


def test_send_arrow_with_many_batches_per_partition_lands_alike(peers):
    rows = 3000
    table = pa.table({"key": [b"k%d" % (i % 7) for i in range(rows)],
                      "value": [b"value-%06d" % i for i in range(rows)]})
    seen = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("arrow"), partitions=2)
        with Producer(peer.bootstrap, acks="all", batch_bytes_max=2048) as producer:
            producer.send_arrow(topic, table)
            producer.flush()
        seen[peer.name] = read_back(peer.bootstrap, topic, 2)
    assert len(seen["pylog"]) == rows
    assert seen["kafka"] == seen["pylog"]  # same partitions (murmur2 of the key) and offsets
