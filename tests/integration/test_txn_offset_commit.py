"""Consume-transform-produce with ``send_offsets_to_transaction`` (TxnOffsetCommit, KIP-98/447)
against a pylog broker process, driven by confluent-kafka: a loop killed in the middle of a
transaction (its output and its offsets pending), the broker restarted (the group coordinator
loads the transactional offset records and markers from ``__consumer_offsets``, one transaction
still open), a new incarnation of the loop (its init_transactions aborts the open transaction):
read_committed sees every input transformed exactly once and the group's committed offsets are
the input's end offsets."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from test_transactions import WAIT_S, cluster_of, create_topics, read_all

PARTITIONS = 3
INPUTS = 300
GROUP = "ctp-group"

_LOOP = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, Producer
    bootstrap, mode, commits = sys.argv[1], sys.argv[2], int(sys.argv[3])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp-group", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-tx", "linger.ms": 5})
    producer.init_transactions(60)
    consumer.subscribe(["ctp-in"])
    done, idle_since = 0, None
    while True:
        messages = [m for m in consumer.consume(40, 0.5) if not m.error()]
        if not messages:
            if mode == "finish" and done and time.monotonic() - (idle_since or time.monotonic()) > 4:
                break
            idle_since = idle_since or time.monotonic()
            continue
        idle_since = None
        producer.begin_transaction()
        for m in messages:
            producer.produce("ctp-out", value=b"out-" + m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        if mode == "kill" and done == commits:
            producer.flush(60)
            print("open", flush=True)  # the transaction stays open: killed here
            time.sleep(600)
        producer.commit_transaction(60)
        done += 1
    print("finished", done, flush=True)
    consumer.close()
""")


def committed_offsets(bootstrap: str, isolation: str = "read_uncommitted", timeout_s: float = 10) -> list[int]:
    """The group's committed offsets of ctp-in. librdkafka's OffsetFetch asks require_stable
    under read_committed: then an open transaction's offsets answer UNSTABLE_OFFSET_COMMIT,
    which it retries until ``timeout_s``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "isolation.level": isolation})
    try:
        parts = consumer.committed([TopicPartition("ctp-in", p) for p in range(PARTITIONS)], timeout=timeout_s)
        return [p.offset for p in parts]
    finally:
        consumer.close()


def loaded_committed_offsets(bootstrap: str, isolation: str = "read_uncommitted") -> list[int]:
    """``committed_offsets`` once the coordinator answers (NOT_COORDINATOR right after a start)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return committed_offsets(bootstrap, isolation)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def assert_unstable(bootstrap: str) -> None:
    """Under require_stable the open transaction's offsets stay unstable: librdkafka times out."""
    with pytest.raises(KafkaException) as raised:
        committed_offsets(bootstrap, "read_committed", timeout_s=2)
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT


def run_loop(bootstrap: str, mode: str, commits: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _LOOP, bootstrap, mode, str(commits)],
                            stdout=subprocess.PIPE, text=True)


def test_consume_transform_produce_survives_a_killed_loop_and_a_broker_restart(broker_cluster):
    cluster = cluster_of(broker_cluster, 1)
    create_topics(cluster.bootstrap, ["ctp-in", "ctp-out"], PARTITIONS)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    inputs = [f"in-{n}".encode() for n in range(INPUTS)]
    for n, value in enumerate(inputs):
        producer.produce("ctp-in", value=value, partition=n % PARTITIONS)
    assert producer.flush(WAIT_S) == 0

    loop = run_loop(cluster.bootstrap, "kill", commits=2)
    try:
        assert loop.stdout.readline().strip() == "open"
    finally:
        loop.send_signal(signal.SIGKILL)
        loop.wait(10)
    committed_before = committed_offsets(cluster.bootstrap)
    assert 0 < sum(max(o, 0) for o in committed_before) < INPUTS  # two transactions' offsets, not the open one's
    assert_unstable(cluster.bootstrap)
    cluster.brokers[0].restart()  # the coordinator loads committed, and one open, transactional offsets
    assert loaded_committed_offsets(cluster.bootstrap) == committed_before
    assert_unstable(cluster.bootstrap)  # still pending after the load

    loop = run_loop(cluster.bootstrap, "finish")
    try:
        out, _ = loop.communicate(timeout=120)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait(10)
    assert loop.returncode == 0 and out.startswith("finished"), out
    seen = read_all(cluster.bootstrap, ["ctp-out"], PARTITIONS, expect=INPUTS)
    assert sorted(seen) == sorted(b"out-" + value for value in inputs)  # each input exactly once
    assert loaded_committed_offsets(cluster.bootstrap, "read_committed") == [INPUTS // PARTITIONS] * PARTITIONS
    # the killed transaction's output is in the log, aborted
    assert len(read_all(cluster.bootstrap, ["ctp-out"], PARTITIONS, "read_uncommitted")) > INPUTS


def test_java_transactional_message_copier_with_group_metadata(broker_cluster):
    """Kafka's own consume-transform-produce client (``TransactionalMessageCopier``, the system
    tests' copier; Java producer and consumer): subscribed to the input (--group-mode), KIP-447
    group metadata in TxnOffsetCommit (--use-group-metadata), transactions of 40 messages, some
    aborted at random and retried. The output has each input once under read_committed and the
    group's offsets are the input's end."""
    from broker.tools.kafka_peer import find_kafka_install
    install = find_kafka_install()  # make setup fetches it: missing is a set-up failure, not a skip
    cluster = cluster_of(broker_cluster, 1)
    create_topics(cluster.bootstrap, ["ctp-in", "ctp-out"], PARTITIONS)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    inputs = [f"in-{n}".encode() for n in range(INPUTS)]
    for n, value in enumerate(inputs):
        producer.produce("ctp-in", value=value, partition=n % PARTITIONS)
    assert producer.flush(WAIT_S) == 0
    copier = subprocess.run(install.command("org.apache.kafka.tools.TransactionalMessageCopier", [
        "--broker-list", cluster.bootstrap, "--input-topic", "ctp-in", "--input-partition", "0",
        "--output-topic", "ctp-out", "--consumer-group", GROUP, "--transactional-id", "ctp-java",
        "--transaction-size", "40", "--group-mode", "--use-group-metadata", "--enable-random-aborts",
        "--max-messages", str(INPUTS)]), capture_output=True, text=True, timeout=180)
    assert copier.returncode == 0, copier.stderr[-3000:]
    seen = read_all(cluster.bootstrap, ["ctp-out"], PARTITIONS, expect=INPUTS)
    assert sorted(seen) == sorted(inputs)  # the copier copies values as they are
    assert loaded_committed_offsets(cluster.bootstrap, "read_committed") == [INPUTS // PARTITIONS] * PARTITIONS
