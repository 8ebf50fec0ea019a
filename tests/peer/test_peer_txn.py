"""Transactions as clients see them, on Apache Kafka and on pylog: a transactional producer
(confluent-kafka, kafka-python) commits and aborts, read_committed and read_uncommitted consumers
read the partitions, and the broker's side is read on the raw wire: where the markers are (each
takes an offset), the last stable offset (Fetch's and ListOffsets' under read_committed) and
Fetch's aborted transactions.

Each scenario's expected outcome is stated once (what Apache Kafka 4.1 does, checked when this
tier was written) and asserted on each system (``txn_peer``; both at once, ``on_both_peers``), so
the two are compared through the same literal.
"""

from __future__ import annotations

import pytest
from group_clients import produce_spread, wait_for_coordinator
from group_wire import GroupWire
from peer_support import on_both_peers, unique_topic
from txn_clients import (
    Batch,
    PartitionReader,
    aborted_from,
    open_txn_producer,
    partition_state,
    read_at_once,
    read_partition,
    settled,
    unique_txn_id,
    wait_for_leaders,
    wait_until,
)

from broker.client.producer import Producer
from broker.wire import ApiKey, ErrorCode

CLIENTS = ("confluent", "kafka-python")


def data(first: int, last: int) -> Batch:
    return Batch(first, last, True, None)


def marker(offset: int, kind: str) -> Batch:
    return Batch(offset, offset, True, kind)


# Three transactions over two partitions: commit, abort (its records flushed to the log first, so
# they are there to be aborted), commit. Values say which transaction wrote them.
SCRIPT = [("commit", {0: [b"c1-0", b"c1-1", b"c1-2"], 1: [b"c1-3", b"c1-4"]}),
          ("abort", {0: [b"a2-0", b"a2-1"], 1: [b"a2-2"]}),
          ("commit", {0: [b"c3-0"], 1: [b"c3-1"]})]
EXPECTED_BATCHES = {
    0: [data(0, 2), marker(3, "COMMIT"), data(4, 5), marker(6, "ABORT"), data(7, 7), marker(8, "COMMIT")],
    1: [data(0, 1), marker(2, "COMMIT"), data(3, 3), marker(4, "ABORT"), data(5, 5), marker(6, "COMMIT")],
}
EXPECTED_END = {0: 9, 1: 7}
EXPECTED_COMMITTED = {0: [(0, b"c1-0"), (1, b"c1-1"), (2, b"c1-2"), (7, b"c3-0")],
                      1: [(0, b"c1-3"), (1, b"c1-4"), (5, b"c3-1")]}
EXPECTED_UNCOMMITTED = {0: [(0, b"c1-0"), (1, b"c1-1"), (2, b"c1-2"), (4, b"a2-0"), (5, b"a2-1"), (7, b"c3-0")],
                        1: [(0, b"c1-3"), (1, b"c1-4"), (3, b"a2-2"), (5, b"c3-1")]}
EXPECTED_ABORTED = {0: [4], 1: [3]}


def run_script(producer, topic: str) -> None:
    for decision, by_partition in SCRIPT:
        producer.begin()
        for partition, values in by_partition.items():
            for value in values:
                producer.send(topic, partition, value)
        producer.flush()  # each transaction's batch on the log before EndTxn, one batch per partition
        producer.commit() if decision == "commit" else producer.abort()


@pytest.mark.parametrize("client", CLIENTS)
@on_both_peers("txn_peer")
def test_commit_and_abort_markers_lso_and_visible_records(txn_peer, client):
    """Commit, abort, commit: every marker takes one offset after its transaction's records;
    once the last marker is written the LSO is the high watermark (Fetch's last_stable_offset and
    ListOffsets latest under read_committed alike); Fetch under read_committed names the aborted
    transaction by its first offset; read_committed consumers of both clients see the committed
    records only, read_uncommitted ones the aborted records too, at the same offsets."""
    topic = txn_peer.create_topic(unique_topic("txn-commit-abort"), partitions=2)
    producer = open_txn_producer(client, txn_peer)
    try:
        run_script(producer, topic)
    finally:
        producer.close()
    for partition in (0, 1):
        end = EXPECTED_END[partition]
        state = settled(txn_peer, topic, partition, end)
        assert state.batches == EXPECTED_BATCHES[partition]
        assert (state.last_stable_offset, state.latest_committed, state.latest_uncommitted) == (end, end, end)
        assert state.aborted_first_offsets == EXPECTED_ABORTED[partition]
        assert state.aborted_by_the_batches_producer
        # read_uncommitted: Fetch still tells the LSO; it names no aborted transaction (null)
        assert (state.uncommitted_fetch_lso, state.uncommitted_fetch_aborted) == (end, None)
    reads = [(reader, partition, isolation, EXPECTED_END[partition], 0) for partition in (0, 1)
             for reader in CLIENTS for isolation in ("read_committed", "read_uncommitted")]
    for (reader, partition, isolation, _, _), records in zip(reads, read_at_once(txn_peer, topic, reads)):
        expected = (EXPECTED_COMMITTED if isolation == "read_committed" else EXPECTED_UNCOMMITTED)[partition]
        assert records == expected, (reader, partition, isolation)


@on_both_peers("txn_peer")
def test_an_open_transaction_holds_the_lso_until_it_commits(txn_peer):
    """A committed transaction, then one left open with its records on the log: the LSO stops at
    the open transaction's first offset (Fetch's last_stable_offset and ListOffsets under
    read_committed), the high watermark does not; read_committed consumers read up to the LSO and
    stay there (two more polls), a read_uncommitted one reads the open records. After the commit
    the LSO is the high watermark and the same read_committed consumers go on with the records
    they waited for."""
    topic = txn_peer.create_topic(unique_topic("txn-open"), partitions=1)
    producer = open_txn_producer("confluent", txn_peer)
    readers = []
    try:
        producer.begin()
        for value in (b"c1-0", b"c1-1", b"c1-2"):
            producer.send(topic, 0, value)
        producer.commit()
        settled(txn_peer, topic, 0, 4)
        producer.begin()
        for value in (b"o2-0", b"o2-1"):
            producer.send(topic, 0, value)
        producer.flush()
        state = partition_state(txn_peer, topic)
        assert state.batches == [data(0, 2), marker(3, "COMMIT"), data(4, 5)]
        assert (state.high_watermark, state.last_stable_offset, state.latest_committed,
                state.latest_uncommitted, state.uncommitted_fetch_lso) == (6, 4, 4, 6, 4)
        assert state.aborted_first_offsets == []
        committed = [(0, b"c1-0"), (1, b"c1-1"), (2, b"c1-2")]
        readers = [PartitionReader(client, txn_peer, topic, 0, "read_committed") for client in CLIENTS]
        for reader in readers:
            assert reader.read_to(4) == committed
            assert reader.poll() + reader.poll() == [] and reader.position() == 4
        assert read_partition("confluent", txn_peer, topic, 0, "read_uncommitted", 6) == \
            [*committed, (4, b"o2-0"), (5, b"o2-1")]
        producer.commit()
        state = settled(txn_peer, topic, 0, 7)
        for reader in readers:
            assert reader.read_to(7) == [(4, b"o2-0"), (5, b"o2-1")]
    finally:
        for reader in readers:
            reader.close()
        producer.close()
    assert state.batches == [data(0, 2), marker(3, "COMMIT"), data(4, 5), marker(6, "COMMIT")]
    assert (state.latest_committed, state.latest_uncommitted) == (7, 7)


@on_both_peers("txn_peer")
def test_interleaved_producers_one_aborting_under_anothers_commit(txn_peer):
    """Two transactional producers on one partition, their batches interleaved: A's open
    transaction (first offset 0) holds the LSO at 0 although B committed after it (marker 3), so
    read_committed reads nothing; A aborts (marker 4, LSO 5) and read_committed gets B's record
    only, A's two records filtered by the aborted transaction Fetch names (first offset 0). Then A
    commits (5, marker 6) and B aborts (7, marker 8): a read_committed Fetch from 0 names both
    aborted transactions, one from 2 still names A's (it ends at 4), one from 5 only B's."""
    topic = wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-interleaved"), partitions=1), 1)
    first, second = (open_txn_producer("confluent", txn_peer) for _ in range(2))
    try:
        first.begin()
        second.begin()
        for producer, value in ((first, b"a1-0"), (second, b"b1-0"), (first, b"a1-1")):
            producer.send(topic, 0, value)
            producer.flush()  # one batch each, in this order
        second.commit()
        wait_until(lambda: partition_state(txn_peer, topic).high_watermark == 4, "B's COMMIT marker")
        state = partition_state(txn_peer, topic)
        assert state.batches == [data(0, 0), data(1, 1), data(2, 2), marker(3, "COMMIT")]
        assert (state.last_stable_offset, state.latest_committed) == (0, 0)
        assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 0) == []
        first.abort()
        settled(txn_peer, topic, 0, 5)
        assert aborted_from(txn_peer, topic, 0, 0) == [0]
        assert read_at_once(txn_peer, topic, [(client, 0, "read_committed", 5, 0) for client in CLIENTS]) == \
            [[(1, b"b1-0")]] * len(CLIENTS)
        first.begin()
        first.send(topic, 0, b"a2-0")
        first.commit()
        settled(txn_peer, topic, 0, 7)
        second.begin()
        second.send(topic, 0, b"b2-0")
        second.flush()
        second.abort()
    finally:
        first.close()
        second.close()
    state = settled(txn_peer, topic, 0, 9)
    assert state.batches == [data(0, 0), data(1, 1), data(2, 2), marker(3, "COMMIT"), marker(4, "ABORT"),
                             data(5, 5), marker(6, "COMMIT"), data(7, 7), marker(8, "ABORT")]
    assert (aborted_from(txn_peer, topic, 0, 0), aborted_from(txn_peer, topic, 0, 2),
            aborted_from(txn_peer, topic, 0, 5)) == ([0, 7], [0, 7], [7])
    reads = [(client, 0, isolation, 9, start) for client in CLIENTS
             for isolation, start in (("read_committed", 0), ("read_committed", 2), ("read_uncommitted", 0))]
    for client_reads in zip(*[iter(read_at_once(txn_peer, topic, reads))] * 3):  # 3 reads per client
        committed, committed_from_2, uncommitted = client_reads
        assert committed == [(1, b"b1-0"), (5, b"a2-0")]
        assert committed_from_2 == [(5, b"a2-0")]
        assert [offset for offset, _ in uncommitted] == [0, 1, 2, 5, 7]


def offset_fetch(peer, group: str, topic: str, require_stable: bool) -> tuple[int, str]:
    """OffsetFetch v8 of ``topic``-0 for ``group``: (offset, error)."""
    with GroupWire(peer) as wire:
        answer = wire.call(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]}], "require_stable": require_stable}, version=8)
    [partition] = answer.groups[0].topics[0].partitions
    return partition.committed_offset, ErrorCode(partition.error_code).name


def group_consumer(client: str, peer, group: str, topic: str):
    """A read_committed consumer of ``group`` assigned ``topic``-0 from its start (no group
    membership: send_offsets_to_transaction then carries generation -1, which a group without
    members accepts)."""
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": peer.bootstrap, "group.id": group,
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        return consumer
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=peer.bootstrap, group_id=group, isolation_level="read_committed",
                             enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), 0)
    return consumer


def consume(client: str, consumer, count: int) -> list[bytes]:
    values: list[bytes] = []

    def poll() -> bool:
        if client == "confluent":
            values.extend(m.value() for m in consumer.consume(num_messages=100, timeout=0.2) if m.error() is None)
        else:
            values.extend(r.value for records in consumer.poll(timeout_ms=200).values() for r in records)
        return len(values) >= count

    wait_until(poll, f"{count} input records")
    return values


@pytest.mark.parametrize("client", CLIENTS)
@on_both_peers("txn_peer")
def test_consume_transform_produce_offsets_commit_with_the_output(txn_peer, client):
    """The exactly-once loop: read the input (read_committed), write the transformed records and
    the input offsets (send_offsets_to_transaction) in one transaction. While it is open the
    group's offset is pending: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT and
    offset -1 (also when an offset was committed before), without it the last committed offset.
    Committed: offset 6 and the output visible. A second round aborted: the group stays at 6 and
    read_committed sees no record of it."""
    source = txn_peer.create_topic(unique_topic("txn-in"), partitions=1)
    sink = txn_peer.create_topic(unique_topic("txn-out"), partitions=1)
    group = unique_txn_id("ctp")
    produce_spread(txn_peer, source, 1, 6)  # p0-0 .. p0-5
    wait_for_coordinator(txn_peer, group)
    producer = open_txn_producer(client, txn_peer)
    consumer = group_consumer(client, txn_peer, group, source)
    try:
        for round_, decision in enumerate(("commit", "abort")):
            values = consume(client, consumer, 6 if round_ == 0 else 3)
            producer.begin()
            for value in values:
                producer.send(sink, 0, value.upper())
            producer.send_offsets({(source, 0): 6 + 3 * round_}, consumer)
            producer.flush()
            assert offset_fetch(txn_peer, group, source, True) == (-1, "UNSTABLE_OFFSET_COMMIT")
            assert offset_fetch(txn_peer, group, source, False) == (-1 if round_ == 0 else 6, "NONE")
            producer.commit() if decision == "commit" else producer.abort()
            expected = 6
            wait_until(lambda: offset_fetch(txn_peer, group, source, True) == (expected, "NONE"),
                       f"{group} stable at {expected}")
            if round_ == 0:
                produce_spread_more(txn_peer, source)
    finally:
        consumer.close()
        producer.close()
    state = settled(txn_peer, sink, 0, 11)
    assert state.batches == [data(0, 5), marker(6, "COMMIT"), data(7, 9), marker(10, "ABORT")]
    assert read_partition("confluent", txn_peer, sink, 0, "read_committed", 11) == \
        [(i, b"P0-%d" % i) for i in range(6)]


def produce_spread_more(peer, topic: str) -> None:
    """Three more input records (non-transactional, after the first six): p0-6 .. p0-8."""
    with Producer(peer.bootstrap, linger_ms=5) as producer:
        for i in range(6, 9):
            producer.send(topic, b"p0-%d" % i, key=b"k%d" % i, partition=0)
        producer.flush()
