"""Transaction faults on Apache Kafka and on pylog, the cheap ones a one-broker peer can show: a
producer SIGKILLed in the middle of a transaction (the next InitProducerId of its transactional
id aborts it) and a transaction left open past its transaction.timeout.ms (the coordinator aborts
it and fences the producer; the LSO moves on). In both: 0 aborted records read under
read_committed, 0 committed records lost, no transaction left holding the LSO.

The expected outcome is what Apache Kafka 4.1 does, stated once and checked on each system; the
two systems' halves run at once (``on_both_peers``), so their timeouts overlap.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

from peer_support import on_both_peers, unique_topic
from txn_clients import (
    Batch,
    open_txn_producer,
    partition_state,
    read_at_once,
    read_partition,
    settled,
    unique_txn_id,
    wait_for_leaders,
    wait_until,
)
from txn_wire import TxnWire

READY_TIMEOUT_S = 60.0
# The open transaction's transaction.timeout.ms: short, yet longer than a loaded machine may take
# between AddPartitionsToTxn and the produce. The coordinator looks every 1 s
# (COMMON_BROKER_SETTINGS); Kafka aborts a transaction once it is older than its timeout at such a
# check, and writes the markers after that.
TIMEOUT_MS = 2_000
ABORT_WITHIN_S = 15.0

# A transactional producer that commits one transaction (3 records), opens a second (2 records
# on the log), says so and waits to be killed.
_DOOMED_PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    bootstrap, transactional_id, topic = sys.argv[1:4]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"committed-%d" % i, partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, b"doomed-%d" % i, partition=0)
    assert producer.flush(30) == 0
    print("open", flush=True)
    time.sleep(600)
""")


def doomed_producer(peer, transactional_id: str, topic: str) -> subprocess.Popen:
    """The producer above, once its open transaction's records are on the log."""
    child = subprocess.Popen([sys.executable, "-c", _DOOMED_PRODUCER, peer.bootstrap, transactional_id, topic],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = wait_until(lambda: child.stdout.readline() or child.poll() is not None and "exited",
                          "the doomed producer's open transaction", READY_TIMEOUT_S)
        assert line.strip() == "open", f"the producer said {line!r} (exit status {child.poll()})"
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child


@on_both_peers("txn_peer")
def test_a_producer_killed_mid_transaction_is_aborted_by_the_next_init(txn_peer):
    """SIGKILL with 2 records of an open transaction on the log (LSO held at 4): nothing ends the
    transaction until a producer with the same transactional id calls init_transactions, which
    aborts it (ABORT marker at 6, LSO 7) before it returns. read_committed never sees the doomed
    records; the new producer's committed transaction follows (8, marker 9)."""
    topic = wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-kill"), partitions=1), 1)
    transactional_id = unique_txn_id("doomed")
    child = doomed_producer(txn_peer, transactional_id, topic)
    child.send_signal(signal.SIGKILL)
    assert child.wait(10) == -signal.SIGKILL
    state = partition_state(txn_peer, topic)
    assert state.batches == [Batch(0, 2, True, None), Batch(3, 3, True, "COMMIT"), Batch(4, 5, True, None)]
    assert (state.high_watermark, state.last_stable_offset) == (6, 4)
    assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 4) == [
        (0, b"committed-0"), (1, b"committed-1"), (2, b"committed-2")]

    successor = open_txn_producer("confluent", txn_peer, transactional_id)  # returns once the abort is done
    try:
        state = settled(txn_peer, topic, 0, 7)
        assert state.batches[3:] == [Batch(6, 6, True, "ABORT")]
        assert state.aborted_first_offsets == [4]
        successor.begin()
        successor.send(topic, 0, b"successor")
        successor.commit()
    finally:
        successor.close()
    state = settled(txn_peer, topic, 0, 9)
    assert state.batches[4:] == [Batch(7, 7, True, None), Batch(8, 8, True, "COMMIT")]
    expected = [(0, b"committed-0"), (1, b"committed-1"), (2, b"committed-2"), (7, b"successor")]
    assert read_at_once(txn_peer, topic, [(client, 0, "read_committed", 9, 0)
                                          for client in ("confluent", "kafka-python")]) == [expected, expected]


@on_both_peers("txn_peer")
def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(txn_peer):
    """Raw wire: a transaction with transaction.timeout.ms 2 s, 2 records on the log, then
    nothing. The coordinator aborts it on its own (CompleteAbort, the epoch bumped 0 -> 1 so the
    producer is fenced), writes the ABORT marker (LSO 3 = the high watermark); the producer's
    late commit is PRODUCER_FENCED, its next InitProducerId gets epoch 2 and a clean start."""
    topic = wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-timeout"), partitions=1), 1)
    with TxnWire(txn_peer, "timeout") as wire:
        assert wire.init(TIMEOUT_MS) == "NONE" and wire.epoch == 0
        assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
        started = time.monotonic()
        assert wire.produce(topic, 0, [b"late-0", b"late-1"]) == ("NONE", 0)
        assert partition_state(txn_peer, topic).last_stable_offset == 0
        wait_until(lambda: wire.state() == "CompleteAbort", "the timed-out transaction aborted", ABORT_WITHIN_S)
        took_s = time.monotonic() - started
        state = settled(txn_peer, topic, 0, 3)
        assert state.batches == [Batch(0, 1, True, None), Batch(2, 2, True, "ABORT")]
        assert state.aborted_first_offsets == [0]
        [described] = wire.describe()
        assert (described.producer_id, described.producer_epoch) == (wire.producer_id, 1)
        assert wire.end(True, retry=False) == "PRODUCER_FENCED"
        assert wire.add_partitions([(topic, 0)], retry=False) == {(topic, 0): "PRODUCER_FENCED"}
        assert wire.init(TIMEOUT_MS) == "NONE" and wire.epoch == 2
    assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 3) == []
    print(f"{txn_peer}: a transaction with a {TIMEOUT_MS} ms timeout aborted after {took_s:.1f} s")


@on_both_peers("txn_peer")
def test_a_client_whose_transaction_timed_out_cannot_commit(txn_peer):
    """confluent-kafka with transaction.timeout.ms 2 s: its transaction is aborted by the
    coordinator while it idles; commit_transaction then fails with a fatal error (_FENCED: the
    abort bumped the epoch) and nothing of the
    transaction is read under read_committed."""
    from confluent_kafka import KafkaException

    topic = wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-idle"), partitions=1), 1)
    producer = open_txn_producer("confluent", txn_peer, transaction_timeout_ms=TIMEOUT_MS)
    try:
        producer.begin()
        producer.send(topic, 0, b"idle")
        producer.flush()
        settled(txn_peer, topic, 0, 2)  # the coordinator's ABORT marker after the record
        try:
            producer.commit()
        except KafkaException as failure:
            error = failure.args[0]
            outcome = ("fenced" if error.fatal() else "abortable" if error.txn_requires_abort() else "retriable",
                       error.name())
        else:
            outcome = ("committed", "")
    finally:
        producer.close()
    assert outcome == ("fenced", "_FENCED")  # librdkafka's fatal error: the coordinator bumped the epoch
    assert partition_state(txn_peer, topic).batches == [Batch(0, 0, True, None), Batch(1, 1, True, "ABORT")]
    assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 2) == []


def fatal_error_name(action) -> str:
    """The name of the fatal KafkaError confluent-kafka raises from ``action()`` ("" if none)."""
    from confluent_kafka import KafkaException

    try:
        action()
    except KafkaException as failure:
        error = failure.args[0]
        return error.name() if error.fatal() else f"not fatal: {error.name()}"
    return ""


@on_both_peers("txn_peer")
def test_a_zombie_client_is_fenced_by_a_new_init(txn_peer):
    """confluent-kafka: a producer with a record of an open transaction on the log, then a second
    producer of the same transactional id calls init_transactions (which aborts the open
    transaction: ABORT marker at 1). The first producer is a zombie: its next send and its
    commit fail with the fatal _FENCED (INVALID_PRODUCER_EPOCH from the leader), nothing more is
    appended, and read_committed reads nothing of it."""
    topic = wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-zombie"), partitions=1), 1)
    transactional_id = unique_txn_id("zombie")
    zombie = open_txn_producer("confluent", txn_peer, transactional_id)
    successor = None
    try:
        zombie.begin()
        zombie.send(topic, 0, b"zombie-0")
        zombie.flush()
        successor = open_txn_producer("confluent", txn_peer, transactional_id)
        assert settled(txn_peer, topic, 0, 2).batches == [Batch(0, 0, True, None), Batch(1, 1, True, "ABORT")]
        zombie.send(topic, 0, b"zombie-late")
        assert fatal_error_name(zombie.flush) == "_FENCED"
        assert fatal_error_name(zombie.commit) == "_FENCED"
    finally:
        zombie.close()
        if successor is not None:
            successor.close()
    state = partition_state(txn_peer, topic)
    assert (state.batches, state.aborted_first_offsets) == ([Batch(0, 0, True, None), Batch(1, 1, True, "ABORT")], [0])
    assert read_partition("confluent", txn_peer, topic, 0, "read_committed", 2) == []
