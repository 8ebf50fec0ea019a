"""Transactions against real ZooKeeper and pylog broker processes, driven by confluent-kafka's
transactional producer (librdkafka) and read_committed consumers: a committed transaction over 2
topics and 6 partitions is read whole, an aborted one never; a producer killed mid-transaction
has its transaction aborted by the next ``init_transactions``; a zombie is fenced; a transaction
left open is aborted by its timeout and the last stable offset moves on; the transaction
coordinator's broker killed between EndTxn(commit) and the markers: the next coordinator finishes
the commit; RF=3 with the EndTxn round trip printed; kafka-python's transactional producer.

Every wait is a condition with a deadline. Brokers run with
``transaction.abort.timed.out.transaction.cleanup.interval.ms=500`` so the timeout test waits
seconds, and small internal topics (quick loads).

The single-broker tests share one broker for the module (``one_broker``; each has its own
topics and transactional ids, and none stops the broker): a broker start is most of such a
test's time. The 3-broker tests each start their own cluster: two of them kill brokers.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from integration_support import ClusterFactory

WAIT_S = 60.0
TXN_SETTINGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
                "transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}


def cluster_of(broker_cluster, n: int):
    factor = str(min(n, 3))
    return broker_cluster(n, overrides={
        **TXN_SETTINGS, "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": str(min(n, 2)), "offsets.topic.replication.factor": factor,
        "default.replication.factor": factor, "min.insync.replicas": str(min(n, 2))})


@pytest.fixture(scope="module")
def one_broker(zookeeper, tmp_path_factory):
    """One broker (``cluster_of(..., 1)``'s settings) shared by the module's single-broker tests."""
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("txn-one"))
    try:
        yield cluster_of(factory.make, 1)
    finally:
        factory.close()


def create_topics(bootstrap: str, names, partitions: int, replication: int = 1, assignment=None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT_S
    while admin.list_topics(timeout=10).controller_id < 0:  # see test_consumer_groups.wait_for_controller
        assert time.monotonic() < deadline, "no controller in the metadata"
        time.sleep(0.1)
    for name in names:
        new = (NewTopic(name, len(assignment), replica_assignment=assignment) if assignment is not None
               else NewTopic(name, partitions, replication))
        while True:
            try:
                admin.create_topics([new])[name].result(30)
                break
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    for name in names:
        while True:
            topic = admin.list_topics(name, timeout=10).topics[name]
            if topic.error is None and len(topic.partitions) == partitions and all(
                    p.leader >= 0 and p.error is None for p in topic.partitions.values()):
                break
            assert time.monotonic() < deadline, f"{name} has no leaders"
            time.sleep(0.1)


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, **extra})
    producer.init_transactions(WAIT_S)
    return producer


def produce_all(producer: Producer, topics, partitions: int, tag: str, per_partition: int = 5) -> list[bytes]:
    values = []
    for topic in topics:
        for partition in range(partitions):
            for i in range(per_partition):
                value = f"{tag}-{topic}-{partition}-{i}".encode()
                producer.produce(topic, value=value, partition=partition)
                values.append(value)
    return values


def read_all(bootstrap: str, topics, partitions: int, isolation: str = "read_committed",
             quiet_s: float = 0.5, expect: int = 0) -> list[bytes]:
    """Every record visible at ``isolation``, read from the start until the end offsets (at that
    isolation) are reached, at least ``expect`` records came, and nothing new for ``quiet_s``.

    Pass ``expect`` after a commit: ``commit_transaction`` returns once EndTxn is answered
    (PrepareCommit written), the markers that move the last stable offset follow, so read_committed
    may reach the end of every partition before the commit is visible (a probe on the 2-core
    machine: the LSO lagged the return in 15 of 40 commits, by up to 253 ms; under load 8-16, more
    than ``quiet_s``). ``expect`` waits for the commit (to the deadline), ``quiet_s`` still catches
    any record too many (0.5 s: a record past the end offsets can only come from a later move of the
    last stable offset, and every caller's writes are done by then; it was 2 s, 16 s of idle time
    over the module)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        assignment = [TopicPartition(t, p, 0) for t in topics for p in range(partitions)]
        consumer.assign(assignment)
        values, eof, last_new = [], set(), time.monotonic()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if (len(eof) == len(assignment) and len(values) >= expect
                        and time.monotonic() - last_new > quiet_s):
                    break
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    eof.add((message.topic(), message.partition()))
                    continue
                raise KafkaException(message.error())
            eof.discard((message.topic(), message.partition()))
            values.append(message.value())
            last_new = time.monotonic()
        return values
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets", "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                if isolation == "read_uncommitted" else
                consumer.offsets_for_times([TopicPartition(topic, p, -1)], timeout=10)[0].offset
                for p in range(partitions)]
    finally:
        consumer.close()


# ----------------------------------------------------------------------------------- tests


def test_commit_and_abort_over_two_topics_and_six_partitions(one_broker):
    cluster = one_broker
    topics = ["txn-a", "txn-b"]
    create_topics(cluster.bootstrap, topics, 3)
    producer = txn_producer(cluster.bootstrap, "tx-basic")
    producer.begin_transaction()
    committed = produce_all(producer, topics, 3, "c1")
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    aborted = produce_all(producer, topics, 3, "a1")
    producer.flush(WAIT_S)
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    committed += produce_all(producer, topics, 3, "c2")
    producer.commit_transaction(WAIT_S)
    seen = read_all(cluster.bootstrap, topics, 3, expect=len(committed))
    assert sorted(seen) == sorted(committed) and not set(seen) & set(aborted)
    assert sorted(read_all(cluster.bootstrap, topics, 3, "read_uncommitted", expect=len(committed + aborted))) == \
        sorted(committed + aborted)
    # EndTxn latency (commit of one small transaction), printed for the report.
    latencies = []
    for n in range(30):
        producer.begin_transaction()
        producer.produce("txn-a", value=b"x%d" % n, partition=n % 3)
        producer.flush(WAIT_S)
        started = time.perf_counter()
        producer.commit_transaction(WAIT_S)
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    print(f"commit_transaction after flush (EndTxn round trip), 1 broker: p50 {latencies[15]:.1f} ms, "
          f"p99 {latencies[-1]:.1f} ms")


_VICTIM = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2], "linger.ms": 0})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(20):
        producer.produce(sys.argv[3], value=b"open-%d" % i, partition=i % 3)
    producer.flush(60)
    print("produced", flush=True)
    time.sleep(600)
""")


def start_victim(bootstrap: str, transactional_id: str, topic: str) -> subprocess.Popen:
    victim = subprocess.Popen([sys.executable, "-c", _VICTIM, bootstrap, transactional_id, topic],
                              stdout=subprocess.PIPE, text=True)
    line = victim.stdout.readline()
    assert line.strip() == "produced", line
    return victim


def test_a_killed_producers_transaction_is_aborted_by_the_next_init_transactions(one_broker):
    cluster = one_broker
    create_topics(cluster.bootstrap, ["txn-kill"], 3)
    victim = start_victim(cluster.bootstrap, "tx-kill", "txn-kill")
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # The open transaction holds the last stable offset: read_committed sees nothing.
    assert read_all(cluster.bootstrap, ["txn-kill"], 3, quiet_s=0.5) == []
    producer = txn_producer(cluster.bootstrap, "tx-kill")  # aborts the previous incarnation's transaction
    producer.begin_transaction()
    committed = produce_all(producer, ["txn-kill"], 3, "after")
    producer.commit_transaction(WAIT_S)
    assert sorted(read_all(cluster.bootstrap, ["txn-kill"], 3, expect=len(committed))) == sorted(committed)


def test_a_zombie_producer_is_fenced(one_broker):
    cluster = one_broker
    create_topics(cluster.bootstrap, ["txn-zombie"], 3)
    zombie = txn_producer(cluster.bootstrap, "tx-zombie")
    zombie.begin_transaction()
    zombie.produce("txn-zombie", value=b"zombie-1", partition=0)
    zombie.flush(WAIT_S)
    successor = txn_producer(cluster.bootstrap, "tx-zombie")  # new epoch: fences the zombie
    successor.begin_transaction()
    committed = produce_all(successor, ["txn-zombie"], 3, "succ")
    successor.commit_transaction(WAIT_S)
    with pytest.raises(KafkaException) as info:
        zombie.produce("txn-zombie", value=b"zombie-2", partition=1)
        zombie.commit_transaction(WAIT_S)
    error = info.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    seen = read_all(cluster.bootstrap, ["txn-zombie"], 3, expect=len(committed))
    assert sorted(seen) == sorted(committed)


def test_an_open_transaction_is_aborted_by_its_timeout_and_the_lso_moves_on(one_broker):
    cluster = one_broker
    create_topics(cluster.bootstrap, ["txn-timeout"], 3)
    stuck = txn_producer(cluster.bootstrap, "tx-timeout", **{"transaction.timeout.ms": 2000})
    stuck.begin_transaction()
    for i in range(6):
        stuck.produce("txn-timeout", value=b"stuck-%d" % i, partition=i % 3)
    stuck.flush(WAIT_S)
    other = txn_producer(cluster.bootstrap, "tx-other")
    other.begin_transaction()
    committed = produce_all(other, ["txn-timeout"], 3, "later")
    other.commit_transaction(WAIT_S)
    # The stuck transaction holds the LSO (nothing after it is visible) until the coordinator
    # aborts it (2 s timeout, checked every 500 ms); then the later commit becomes visible.
    deadline = time.monotonic() + WAIT_S
    while True:
        seen = read_all(cluster.bootstrap, ["txn-timeout"], 3, quiet_s=0.3)
        if sorted(seen) == sorted(committed):
            break
        assert not any(v.startswith(b"stuck") for v in seen)
        assert time.monotonic() < deadline, f"the LSO did not move: {len(seen)} visible"
        time.sleep(0.5)


def test_the_new_coordinator_finishes_a_commit_whose_broker_died(broker_cluster):
    """3 brokers: C leads the producer's ``__transaction_state`` partition, F follows it (2
    replicas), X holds none of it. The data partitions live on X and F (one replica each). X is
    stopped (SIGSTOP) before EndTxn(commit): C writes PrepareCommit (replicated to F) and answers,
    but cannot write X's markers; C is then killed (SIGKILL) and X resumed. F takes over the
    partition, finds the transaction in PrepareCommit and writes the markers: every committed
    record becomes visible under read_committed, and the id works again through F."""
    cluster = broker_cluster(3, overrides={
        **TXN_SETTINGS, "transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1",
        "offsets.topic.replication.factor": "1"})
    producer = txn_producer(cluster.bootstrap, "tx-failover")
    coordinator, replicas = txn_partition(cluster.bootstrap, "tx-failover")
    follower = next(b for b in replicas if b != coordinator)
    outsider = next(b.broker_id for b in cluster.brokers if b.broker_id not in replicas)
    topics = ["txn-fail-a", "txn-fail-b"]
    create_topics(cluster.bootstrap, topics, 3, assignment=[[outsider], [follower], [outsider]])
    producer.begin_transaction()
    committed = produce_all(producer, topics, 3, "fo")
    producer.flush(WAIT_S)
    stopped = cluster.broker(outsider)
    stopped.kill(signal.SIGSTOP)
    try:
        started = time.perf_counter()
        producer.commit_transaction(WAIT_S)  # answered once PrepareCommit is on C and F
        assert time.perf_counter() - started < 3, "the commit waited for the stopped broker"
        cluster.broker(coordinator).kill(signal.SIGKILL)
    finally:
        stopped.kill(signal.SIGCONT)
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != coordinator)
    # Visible once F has taken over (after C's ZooKeeper session expired) and written the markers.
    assert sorted(read_all(bootstrap, topics, 3, expect=len(committed))) == sorted(committed)
    deadline = time.monotonic() + WAIT_S
    while txn_partition(bootstrap, "tx-failover")[0] != follower:  # a broker's metadata may lag
        assert time.monotonic() < deadline, "the follower did not become the coordinator"
        time.sleep(0.2)
    again = txn_producer(bootstrap, "tx-failover")  # CONCURRENT_TRANSACTIONS until the commit completed
    again.begin_transaction()
    more = produce_all(again, topics[:1], 3, "fo2", per_partition=1)
    again.commit_transaction(WAIT_S)
    assert sorted(read_all(bootstrap, topics, 3, expect=len(committed + more))) == sorted(committed + more)


def txn_partition(bootstrap: str, transactional_id: str) -> tuple[int, list[int]]:
    """(leader, replicas) of the id's ``__transaction_state`` partition, once it has a leader."""
    from broker.coordinator.txn.core import partition_for
    admin = AdminClient({"bootstrap.servers": bootstrap})
    index = partition_for(transactional_id, int(TXN_SETTINGS["transaction.state.log.num.partitions"]))
    deadline = time.monotonic() + WAIT_S
    while True:
        topic = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
        partition = topic.partitions.get(index)
        if partition is not None and partition.leader >= 0 and partition.error is None:
            return partition.leader, list(partition.replicas)
        assert time.monotonic() < deadline, "no coordinator"
        time.sleep(0.1)


def test_transactions_at_replication_factor_3_and_end_txn_latency(broker_cluster):
    """3 brokers, every topic at RF=3 with min.insync.replicas=2: transactions whose partitions
    are led by other brokers than the coordinator (remote KIP-890 verification, remote markers)
    commit and abort correctly. Prints the EndTxn round trip (commit_transaction after a flush:
    PrepareCommit replicated with acks=all, then answered; markers follow)."""
    cluster = cluster_of(broker_cluster, 3)
    topics = ["txn-rf3-a", "txn-rf3-b"]
    create_topics(cluster.bootstrap, topics, 3, replication=3)
    producer = txn_producer(cluster.bootstrap, "tx-rf3")
    producer.begin_transaction()
    committed = produce_all(producer, topics, 3, "c")
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    aborted = produce_all(producer, topics, 3, "a")
    producer.flush(WAIT_S)
    producer.abort_transaction(WAIT_S)
    latencies = []
    for n in range(100):
        producer.begin_transaction()
        value = b"l%d" % n
        producer.produce(topics[n % 2], value=value, partition=n % 3)
        committed.append(value)
        producer.flush(WAIT_S)
        started = time.perf_counter()
        producer.commit_transaction(WAIT_S)
        latencies.append((time.perf_counter() - started) * 1000)
    seen = read_all(cluster.bootstrap, topics, 3, expect=len(committed))
    assert sorted(seen) == sorted(committed) and not set(seen) & set(aborted)
    latencies.sort()
    print(f"\nEndTxn round trip at RF=3 (100 transactions of 1 record): p50 {latencies[49]:.1f} ms, "
          f"p99 {latencies[98]:.1f} ms, max {latencies[-1]:.1f} ms")


def test_kafka_python_transactional_producer(one_broker):
    """kafka-python's transactional producer (its own protocol code, not librdkafka's): a commit
    is read under read_committed, an abort never."""
    from kafka import KafkaProducer
    cluster = one_broker
    create_topics(cluster.bootstrap, ["txn-kp"], 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="tx-kafka-python")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        committed = [b"kp-c-%d" % i for i in range(9)]
        for i, value in enumerate(committed):
            producer.send("txn-kp", value=value, partition=i % 3)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(9):
            producer.send("txn-kp", value=b"kp-a-%d" % i, partition=i % 3)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=10)
    assert sorted(read_all(cluster.bootstrap, ["txn-kp"], 3, expect=len(committed))) == sorted(committed)


def test_markers_follow_a_new_leader_when_a_partition_leader_dies(broker_cluster):
    """3 brokers; data at RF=3. V, a broker outside the producer's ``__transaction_state``
    partition (2 replicas) that leads some of the transaction's partitions, is killed after the
    records were sent and before EndTxn(commit): the commit is answered at once, its markers to V
    fail (connection refused) and are retried with backoff until the controller has moved those
    partitions, then written to the new leaders. Every committed record becomes visible."""
    cluster = broker_cluster(3, overrides={
        **TXN_SETTINGS, "transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1",
        "offsets.topic.replication.factor": "1", "min.insync.replicas": "2"})
    producer = txn_producer(cluster.bootstrap, "tx-leader-dies")
    coordinator, replicas = txn_partition(cluster.bootstrap, "tx-leader-dies")
    victim = next(b.broker_id for b in cluster.brokers if b.broker_id not in replicas)
    a, b = replicas
    topics = ["txn-leader-a", "txn-leader-b"]
    create_topics(cluster.bootstrap, topics, 3, assignment=[[victim, a, b], [a, victim, b], [victim, b, a]])
    producer.begin_transaction()
    committed = produce_all(producer, topics, 3, "ld")
    producer.flush(WAIT_S)
    cluster.broker(victim).kill(signal.SIGKILL)
    started = time.perf_counter()
    producer.commit_transaction(WAIT_S)
    assert time.perf_counter() - started < 3, "EndTxn waited for the dead leader"
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != victim)
    assert sorted(read_all(bootstrap, topics, 3, expect=len(committed))) == sorted(committed)
    log = cluster.broker(coordinator).log_path.read_text()
    assert f"WriteTxnMarkers to broker {victim} failed" in log, "the markers were not retried"
