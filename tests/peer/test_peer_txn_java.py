"""Kafka's own Java clients in a consume-transform-produce loop on Apache Kafka and on pylog
(issue 15): what only pylog's client covered before, TxnOffsetCommit v5 (transaction version 2:
the Java producer's ``sendOffsetsToTransaction`` sends no AddOffsetsToTxn, the TxnOffsetCommit
adds the group's partition) under a read_committed Java consumer that rewinds to its committed
offset after an abort.

The loop is Kafka's ``TransactionalMessageCopier`` (kafka-tools, the tool Kafka's own system tests
use): it copies one input partition to an output topic, a transaction per poll, with the
consumer's positions and group metadata sent to the transaction (``--use-group-metadata``) and a
third of the transactions aborted at random (``--enable-random-aborts``; after an abort it seeks
back to the group's committed offset and copies those records again). The expected outcome is
stated once and must hold on both systems (run side by side): read_committed sees every input record exactly once,
in input order, and the group's committed offset is the input's end.

Producer-id rotation at the exhausted epoch (KIP-890 part 2) is not driven through the Java
producer here: reaching epoch 32,767 takes as many epoch bumps, each an acks=all state write
(~3 ms, ~100 s per peer), far beyond this tier's budget; pylog's own tests cover it.

The copier ends with ``System.exit``, so it runs in its own JVM (``run_kafka_tool``'s pooled
runner catches only ``Exit.exit``).
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from peer_support import unique_topic
from txn_clients import unique_txn_id, wait_for_txn_coordinator

from broker.client import Consumer, Producer

DEADLINE_S = 60.0
RECORDS = 600
INPUTS = [b"r%04d" % i for i in range(RECORDS)]
TRANSACTION_SIZE = 100  # the copier's max.poll.records: at most this many records per transaction
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"


def read_partition(peer, topic: str, isolation: str, expect: int) -> list[bytes]:
    """Values of partition 0 under ``isolation``, read until ``expect`` arrived and the position
    reached the end offset under that isolation (the LSO for read_committed), so one record too
    many below the end would show."""
    consumer = Consumer(peer.bootstrap, isolation_level=isolation, auto_offset_reset="earliest")
    try:
        consumer.assign([(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while True:
            values += [r.value for r in consumer.poll(200)]
            if len(values) >= expect and consumer.position((topic, 0)) >= consumer.end_offsets([(topic, 0)])[(topic, 0)]:
                return values
            assert time.monotonic() < deadline, f"{peer}: {len(values)} of {expect} records read in {DEADLINE_S} s"
    finally:
        consumer.close()


def copy_through_java(peer) -> tuple[list[bytes], int | None, int]:
    """One copier run on ``peer``: (output values under read_committed, the group's committed
    offset of the input partition, how many output records are on the log)."""
    from broker.tools.kafka_peer import find_kafka_install

    source = peer.create_topic(unique_topic("copier-in"), partitions=1)
    sink = peer.create_topic(unique_topic("copier-out"), partitions=1)
    group, tid = unique_txn_id("copier-group"), unique_txn_id("copier")
    with Producer(peer.bootstrap, acks="all") as plain:
        for value in INPUTS:
            plain.send(source, value, partition=0)
        plain.flush(int(DEADLINE_S * 1000))
    wait_for_txn_coordinator(peer, tid)
    result = subprocess.run(find_kafka_install().command(COPIER, [
        "--broker-list", peer.bootstrap, "--input-topic", source, "--input-partition", "0",
        "--output-topic", sink, "--transactional-id", tid, "--consumer-group", group,
        "--transaction-size", str(TRANSACTION_SIZE), "--max-messages", str(RECORDS),
        "--transaction-timeout", "20000", "--use-group-metadata", "--enable-random-aborts"]),
        capture_output=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"{peer}: {result.stderr[-3000:]}"
    status = [json.loads(line) for line in result.stdout.decode().splitlines() if line.startswith("{")]
    assert status and status[-1].get("stage") == "ShutdownComplete" and status[-1]["totalProcessed"] == RECORDS, \
        f"{peer}: {status[-3:]}"
    committed = read_partition(peer, sink, "read_committed", RECORDS)
    on_log = len(read_partition(peer, sink, "read_uncommitted", RECORDS))
    consumer = Consumer(peer.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        offset = consumer.committed([(source, 0)], timeout_ms=int(DEADLINE_S * 1000))[(source, 0)]
    finally:
        consumer.close()
    return committed, None if offset is None else offset.offset, on_log


def test_java_consume_transform_produce_with_random_aborts(kafka_peer, pylog_peer):
    """Both peers at once (their JVM starts and waits overlap): on each, read_committed sees
    every input record once and in order, and the group committed the input's end; the aborted
    copies (a random third of the transactions) are on the log but hidden."""
    with ThreadPoolExecutor(2) as pool:
        futures = {peer.name: pool.submit(copy_through_java, peer) for peer in (kafka_peer, pylog_peer)}
        seen = {name: future.result() for name, future in futures.items()}
    for name, (committed, offset, on_log) in seen.items():
        assert committed == INPUTS, f"{name}: read_committed must be every input record once, in order"
        assert offset == RECORDS, f"{name}: the group's committed offset"
        assert on_log >= RECORDS, name
    assert seen["kafka"][:2] == seen["pylog"][:2]
