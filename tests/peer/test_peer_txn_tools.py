"""Apache Kafka's ``kafka-transactions`` tool against Apache Kafka and against pylog (issue 15):
``list``, ``describe --transactional-id``, ``describe-producers``, ``find-hanging`` and
``abort`` (the operator's way out of a transaction that holds the LSO), all on one open
transaction; and ``kafka-dump-log`` reading each system's aborted-transaction index
(``.txnindex``).

The outcome is stated once (what the tool prints against Apache Kafka 4.1) and checked on each
system, both at once (``on_both_peers``); columns that must differ (times, durations) are left
out where parsed, producer ids are compared with the one the same system gave.
"""

from __future__ import annotations

from peer_support import on_both_peers, unique_topic
from txn_clients import (
    Batch,
    open_txn_producer,
    partition_state,
    read_partition,
    settled,
    unique_txn_id,
    wait_for_leaders,
    wait_until,
)
from txn_wire import TxnWire

from broker.tools.kafka_peer import run_kafka_tool

TOOL_TIMEOUT_S = 90.0
BROKER_ID = 1  # the one broker of each peer
TRANSACTION_TIMEOUT_MS = 60_000  # longer than the scenario: only the tool ends the transaction


def transactions_tool(peer, *args: str, status: int = 0) -> tuple[list[dict[str, str]], str]:
    """kafka-transactions: (rows as {column: value}, stderr). The tool prints a header and rows,
    tab-separated, values padded with spaces."""
    result = run_kafka_tool("kafka-transactions", ["--bootstrap-server", peer.bootstrap, *args],
                            timeout_s=TOOL_TIMEOUT_S)
    err = result.stderr.decode(errors="replace")
    assert result.returncode == status, err[-3000:]
    lines = [line for line in result.stdout.decode(errors="replace").splitlines() if line.strip()]
    if not lines:
        return [], err
    header = [column.strip() for column in lines[0].split("\t") if column.strip()]
    rows = [dict(zip(header, (value.strip() for value in line.split("\t")))) for line in lines[1:]]
    return rows, err


def without(row: dict[str, str], *columns: str) -> dict[str, str]:
    return {k: v for k, v in row.items() if k not in columns}


@on_both_peers("txn_peer")
def test_kafka_transactions_lists_describes_and_aborts_an_open_transaction(txn_peer):
    """A committed transaction (offsets 0-2, marker 3), then one left open (4-5, LSO 4). The tool
    lists it Ongoing, describes it (its partition, its timeout), shows its producer on the
    partition with CurrentTransactionStartOffset 4, finds nothing hanging (its coordinator knows
    it), and ``abort --start-offset 4`` writes an ABORT marker at 6 straight to the partition
    (WriteTxnMarkers): the LSO moves to 7 and read_committed skips 4-5. The coordinator still
    thinks it open; the producer's own abort then writes a second ABORT marker (7)."""
    topic = txn_peer.create_topic(unique_topic("txn-tools"), partitions=1)
    transactional_id = unique_txn_id("tools")
    producer = open_txn_producer("confluent", txn_peer, transactional_id,
                                 transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
    try:
        producer.begin()
        for value in (b"c-0", b"c-1", b"c-2"):
            producer.send(topic, 0, value)
        producer.commit()
        settled(txn_peer, topic, 0, 4)
        producer.begin()
        for value in (b"o-0", b"o-1"):
            producer.send(topic, 0, value)
        producer.flush()
        assert partition_state(txn_peer, topic).last_stable_offset == 4

        listed = [row for row in transactions_tool(txn_peer, "list")[0] if row["TransactionalId"] == transactional_id]
        assert [without(row, "ProducerId") for row in listed] == [
            {"TransactionalId": transactional_id, "Coordinator": str(BROKER_ID), "TransactionState": "Ongoing"}]
        producer_id = listed[0]["ProducerId"]

        [described], _ = transactions_tool(txn_peer, "describe", "--transactional-id", transactional_id)
        assert without(described, "CurrentTransactionStartTimeMs", "TransactionDurationMs") == {
            "CoordinatorId": str(BROKER_ID), "TransactionalId": transactional_id, "ProducerId": producer_id,
            "ProducerEpoch": "0", "TransactionState": "Ongoing",
            "TransactionTimeoutMs": str(TRANSACTION_TIMEOUT_MS), "TopicPartitions": f"{topic}-0"}
        assert int(described["TransactionDurationMs"]) >= 0

        rows, err = transactions_tool(txn_peer, "describe", "--transactional-id", "no-such-transactional-id",
                                      status=1)
        assert rows == [] and "could not be found" in err

        [producer_row], _ = transactions_tool(txn_peer, "describe-producers", "--topic", topic, "--partition", "0")
        assert without(producer_row, "LastTimestamp") == {
            "ProducerId": producer_id, "ProducerEpoch": "0", "LatestCoordinatorEpoch": "0", "LastSequence": "4",
            "CurrentTransactionStartOffset": "4"}

        for args in (("--broker-id", str(BROKER_ID)), ("--topic", topic, "--max-transaction-timeout", "0")):
            assert transactions_tool(txn_peer, "find-hanging", *args)[0] == []

        transactions_tool(txn_peer, "abort", "--topic", topic, "--partition", "0", "--start-offset", "4")
        state = settled(txn_peer, topic, 0, 7)
        assert state.batches == [Batch(0, 2, True, None), Batch(3, 3, True, "COMMIT"), Batch(4, 5, True, None),
                                 Batch(6, 6, True, "ABORT")]
        assert state.aborted_first_offsets == [4]
        assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 7) == [
            (0, b"c-0"), (1, b"c-1"), (2, b"c-2")]
        [producer_row], _ = transactions_tool(txn_peer, "describe-producers", "--topic", topic, "--partition", "0")
        assert producer_row["CurrentTransactionStartOffset"] == "None"
        producer.abort()
    finally:
        producer.close()
    state = settled(txn_peer, topic, 0, 8)
    assert state.batches[-1] == Batch(7, 7, True, "ABORT")
    wait_until(lambda: transactions_tool(txn_peer, "describe", "--transactional-id", transactional_id)[0][0][
        "TransactionState"] == "CompleteAbort", f"{transactional_id} CompleteAbort")


def dump_txn_index(peer, topic: str) -> list[dict[str, str]]:
    """kafka-dump-log of ``topic``-0's first .txnindex: each entry as {field: value}."""
    path = peer.data_dirs[0] / f"{topic}-0" / "00000000000000000000.txnindex"
    assert path.is_file(), f"{peer}: no {path.name} in {path.parent}"
    result = run_kafka_tool("kafka-dump-log", ["--files", str(path)], timeout_s=TOOL_TIMEOUT_S)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    entries = []
    for line in result.stdout.decode(errors="replace").splitlines():
        if line.startswith("version:"):
            words = line.split()
            entries.append(dict(zip((w.rstrip(":") for w in words[::2]), words[1::2])))
    return entries


@on_both_peers("txn_peer")
def test_kafka_dump_log_reads_the_aborted_transaction_index(txn_peer):
    """Kafka's DumpLogSegments reads each system's ``.txnindex`` (Kafka's layout: 34-byte
    entries, version 0): one entry per aborted transaction, written when its ABORT marker is
    appended, with its first offset, the marker's offset and the LSO after it; none for the
    committed one between them."""
    topic = wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-index"), partitions=1), 1)
    with TxnWire(txn_peer, "index") as wire:
        assert wire.init() == "NONE"
        for values, committed in (([b"a-0", b"a-1"], False), ([b"c-0"], True), ([b"b-0", b"b-1", b"b-2"], False)):
            assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
            assert wire.produce(topic, 0, values)[0] == "NONE"
            assert wire.end(committed) == "NONE"
            wire.wait_for_state("CompleteCommit" if committed else "CompleteAbort")
        producer_id = str(wire.producer_id)
    settled(txn_peer, topic, 0, 9)
    assert dump_txn_index(txn_peer, topic) == [
        {"version": "0", "producerId": producer_id, "firstOffset": "0", "lastOffset": "2", "lastStableOffset": "3"},
        {"version": "0", "producerId": producer_id, "firstOffset": "5", "lastOffset": "8", "lastStableOffset": "9"}]
