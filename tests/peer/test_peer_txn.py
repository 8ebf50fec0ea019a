"""Transactions as clients see them, on Apache Kafka and on pylog: a transactional producer
(confluent-kafka, kafka-python) commits and aborts, read_committed and read_uncommitted consumers
read the partitions, and the broker's side is read on the raw wire: where the markers are (each
takes an offset), the last stable offset (Fetch's and ListOffsets' under read_committed) and
Fetch's aborted transactions.

Each scenario's expected outcome is stated once (what Apache Kafka 4.1 does, checked when this
tier was written) and asserted on each system (``txn_peer``), so the two are compared through
the same literal.
"""

from __future__ import annotations

import pytest
from peer_support import unique_topic
from txn_clients import (
    Batch,
    open_txn_producer,
    partition_state,
    pylog_pending,
    read_partition,
    settled,
    txn_peer,  # noqa: F401  (fixture)
)

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
@pylog_pending()
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
        for reader in CLIENTS:
            assert read_partition(reader, txn_peer, topic, partition, "read_committed", end) == \
                EXPECTED_COMMITTED[partition]
            assert read_partition(reader, txn_peer, topic, partition, "read_uncommitted", end) == \
                EXPECTED_UNCOMMITTED[partition]


@pylog_pending()
def test_an_open_transaction_holds_the_lso_until_it_commits(txn_peer):
    """A committed transaction, then one left open with its records on the log: the LSO stops at
    the open transaction's first offset (Fetch's last_stable_offset and ListOffsets under
    read_committed), the high watermark does not; a read_committed consumer reads up to the LSO
    and no further, a read_uncommitted one reads the open records. After the commit the LSO is
    the high watermark and read_committed continues with the records it waited for."""
    topic = txn_peer.create_topic(unique_topic("txn-open"), partitions=1)
    producer = open_txn_producer("confluent", txn_peer)
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
                state.latest_uncommitted) == (6, 4, 4, 6)
        assert state.aborted_first_offsets == []
        committed = [(0, b"c1-0"), (1, b"c1-1"), (2, b"c1-2")]
        assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 4) == committed
        assert read_partition("kafka-python", txn_peer, topic, 0, "read_committed", 4) == committed
        assert read_partition("confluent", txn_peer, topic, 0, "read_uncommitted", 6) == \
            [*committed, (4, b"o2-0"), (5, b"o2-1")]
        producer.commit()
    finally:
        producer.close()
    state = settled(txn_peer, topic, 0, 7)
    assert state.batches == [data(0, 2), marker(3, "COMMIT"), data(4, 5), marker(6, "COMMIT")]
    assert (state.latest_committed, state.latest_uncommitted) == (7, 7)
    assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 7) == \
        [(0, b"c1-0"), (1, b"c1-1"), (2, b"c1-2"), (4, b"o2-0"), (5, b"o2-1")]
