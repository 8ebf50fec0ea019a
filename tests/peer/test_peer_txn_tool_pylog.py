"""``pylog transactions`` (issue 15, item 5) next to Kafka's ``kafka-transactions``, on Apache
Kafka and on pylog: on one open transaction (two partitions) both tools print the same rows for
``list``, ``describe`` and ``describe-producers`` (times left out), find nothing hanging, and
pylog's ``abort --start-offset`` closes the transaction on one partition as Kafka's does (an
ABORT marker written by the leader: no current transaction there, coordinator epoch 0). Also the
tool's refusals (Kafka's messages, exit 1).
"""

from __future__ import annotations

import io
from argparse import Namespace

from peer_support import on_both_peers, unique_topic
from test_peer_txn_client import DEADLINE_MS, read_all, txn_producer

from broker.cli import _build_parser
from broker.tools.kafka_peer import run_kafka_tool
from broker.tools.transactions import run_transactions

TOOL_TIMEOUT_S = 90.0
TIME_COLUMNS = ("CurrentTransactionStartTimeMs", "TransactionDurationMs", "LastTimestamp")


def parse(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [c.strip() for c in lines[0].split("\t") if c.strip()]
    return [dict(zip(header, (v.strip() for v in line.split("\t")))) for line in lines[1:]]


def pylog_tool(peer, *args: str, status: int = 0) -> tuple[str, str]:
    parsed: Namespace = _build_parser().parse_args(["transactions", "--bootstrap-server", peer.bootstrap, *args])
    out, err = io.StringIO(), io.StringIO()
    assert run_transactions(parsed, out, err) == status, err.getvalue()
    return out.getvalue(), err.getvalue()


def kafka_tool(peer, *args: str) -> str:
    result = run_kafka_tool("kafka-transactions", ["--bootstrap-server", peer.bootstrap, *args],
                            timeout_s=TOOL_TIMEOUT_S)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return result.stdout.decode()


def without_times(rows):
    """Rows without the time columns; TopicPartitions as a sorted list (Kafka's Admin keeps them
    in a hash set, so its order is not the broker's)."""
    out = []
    for row in rows:
        row = {k: v for k, v in row.items() if k not in TIME_COLUMNS}
        if "TopicPartitions" in row:
            row["TopicPartitions"] = ",".join(sorted(row["TopicPartitions"].split(",")))
        out.append(row)
    return out


@on_both_peers("txn_peer")
def test_pylog_transactions_tool_matches_kafka_transactions(txn_peer):
    topic = txn_peer.create_topic(unique_topic("txn-pylog-tool"), partitions=2)
    producer = txn_producer(txn_peer)
    tid = producer._txn.transactional_id
    try:
        producer.begin_transaction()
        producer.send(topic, b"a", partition=0)
        producer.send(topic, b"b", partition=1)
        producer.flush()

        ours = [r for r in parse(pylog_tool(txn_peer, "list")[0]) if r["TransactionalId"] == tid]
        theirs = [r for r in parse(kafka_tool(txn_peer, "list")) if r["TransactionalId"] == tid]
        assert ours == theirs == [{"TransactionalId": tid, "Coordinator": "1",
                                   "ProducerId": str(producer.producer_id), "TransactionState": "Ongoing"}]

        ours = parse(pylog_tool(txn_peer, "describe", "--transactional-id", tid)[0])
        theirs = parse(kafka_tool(txn_peer, "describe", "--transactional-id", tid))
        assert without_times(ours) == without_times(theirs)
        assert ours[0]["TransactionState"] == "Ongoing" and int(ours[0]["TransactionDurationMs"]) >= 0
        assert sorted(ours[0]["TopicPartitions"].split(",")) == [f"{topic}-0", f"{topic}-1"]

        for partition in ("0", "1"):
            ours = parse(pylog_tool(txn_peer, "describe-producers", "--topic", topic, "--partition", partition)[0])
            theirs = parse(kafka_tool(txn_peer, "describe-producers", "--topic", topic, "--partition", partition))
            assert without_times(ours) == without_times(theirs) == [{
                "ProducerId": str(producer.producer_id), "ProducerEpoch": str(producer.producer_epoch),
                "LatestCoordinatorEpoch": "-1", "LastSequence": "0", "CurrentTransactionStartOffset": "0"}]

        for args in (["--topic", topic, "--max-transaction-timeout", "0"], ["--broker-id", "1"]):
            assert parse(pylog_tool(txn_peer, "find-hanging", *args)[0]) == []  # its coordinator knows it
            assert parse(kafka_tool(txn_peer, "find-hanging", *args)) == []

        pylog_tool(txn_peer, "abort", "--topic", topic, "--partition", "1", "--start-offset", "0")
        after = parse(kafka_tool(txn_peer, "describe-producers", "--topic", topic, "--partition", "1"))
        assert after[0]["CurrentTransactionStartOffset"] == "None" and after[0]["LatestCoordinatorEpoch"] == "0"
        producer.commit_transaction(DEADLINE_MS)  # partition 0 commits; 1 was aborted by the tool
    finally:
        producer.close()
    assert read_all(txn_peer, topic, 2, "read_committed", 1) == [b"a"]


@on_both_peers("txn_peer")
def test_pylog_transactions_tool_refusals(txn_peer):
    topic = txn_peer.create_topic(unique_topic("txn-pylog-tool-errors"), partitions=1)
    _, err = pylog_tool(txn_peer, "find-hanging", status=1)
    assert err.strip() == ("The `find-hanging` command requires either --topic or --broker-id to limit "
                           "the scope of the search")
    _, err = pylog_tool(txn_peer, "find-hanging", "--partition", "0", "--broker-id", "1", status=1)
    assert err.strip() == "The --partition argument requires --topic to be provided"
    _, err = pylog_tool(txn_peer, "abort", "--topic", topic, "--partition", "0", "--start-offset", "5", status=1)
    assert err.strip() == f"Could not find any open transactions starting at offset 5 on partition {topic}-0"
    _, err = pylog_tool(txn_peer, "abort", "--topic", topic, "--partition", "0", "--producer-id", "1", status=1)
    assert err.strip() == "Missing required argument --producer-epoch"
    _, err = pylog_tool(txn_peer, "describe", "--transactional-id", "no-such-transactional-id", status=1)
    assert err.startswith("Failed to describe transaction state of transactional-id `no-such-transactional-id`")


def test_list_with_a_transactional_id_pattern(kafka_peer):
    """``--transactional-id-pattern`` (ListTransactions v2; Kafka only: pylog's broker lists
    without a pattern filter) keeps only the ids the broker's regular expression matches."""
    topic = kafka_peer.create_topic(unique_topic("txn-pylog-pattern"), partitions=1)
    with txn_producer(kafka_peer) as producer:
        tid = producer._txn.transactional_id
        producer.begin_transaction()
        producer.send(topic, b"x", partition=0)
        producer.commit_transaction(DEADLINE_MS)
    rows = parse(pylog_tool(kafka_peer, "list", "--transactional-id-pattern", f"{tid}|no-such-id")[0])
    assert [r["TransactionalId"] for r in rows] == [tid]
    assert parse(pylog_tool(kafka_peer, "list", "--transactional-id-pattern", "no-such-.*")[0]) == []
