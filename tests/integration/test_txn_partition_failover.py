"""The partition side of transactions across a leader's crash, with real broker processes and
confluent-kafka's transactional producer: an open transaction holds the last stable offset; the
partition leader is SIGKILLed; the follower that becomes leader answers the same LSO, and its
aborted-transaction index (rebuilt from the replicated markers) makes read_committed skip the
aborted records exactly as before; the crashed broker comes back with the same ``.txnindex``
bytes as the others (recovery replays the markers). Ending the transaction moves the LSO on.

Every wait is a condition with a deadline.
"""

from __future__ import annotations

import signal
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from test_transactions import WAIT_S, cluster_of, create_topics, read_all, txn_producer

TOPIC = "lso-failover"


def latest(bootstrap: str, isolation: str) -> int:
    """ListOffsets latest at ``isolation`` (librdkafka asks at its consumer's isolation level):
    the LSO under read_committed, the high watermark under read_uncommitted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


def stable_and_high(bootstrap: str) -> tuple[int, int]:
    return latest(bootstrap, "read_committed"), latest(bootstrap, "read_uncommitted")


def leader_of(bootstrap: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    return metadata.topics[TOPIC].partitions[0].leader


def wait_for(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = last = condition()
            if value:
                return value
        except Exception as exc:  # a broker still electing: ask again until the deadline
            last = exc
        assert time.monotonic() < deadline, f"timed out waiting for {what} (last: {last!r})"
        time.sleep(0.2)


def txn_index_bytes(broker) -> bytes:
    directory = broker.data_dir / f"{TOPIC}-0"
    return b"".join(p.read_bytes() for p in sorted(directory.glob("*.txnindex")))


def test_the_lso_and_aborted_index_survive_the_leaders_crash(broker_cluster):
    cluster = cluster_of(broker_cluster, 3)
    create_topics(cluster.bootstrap, [TOPIC], 1, replication=3)
    producer = txn_producer(cluster.bootstrap, "tx-lso", **{"transaction.timeout.ms": "300000"})
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, value=b"c-%d" % i, partition=0)
    producer.commit_transaction(WAIT_S)                     # 0-2, marker 3
    producer.begin_transaction()
    for i in range(2):
        producer.produce(TOPIC, value=b"a-%d" % i, partition=0)
    producer.flush(WAIT_S)
    producer.abort_transaction(WAIT_S)                      # 4-5, marker 6
    producer.begin_transaction()
    for i in range(4):
        producer.produce(TOPIC, value=b"o-%d" % i, partition=0)
    producer.flush(WAIT_S)                                  # 7-10, open
    assert wait_for(lambda: stable_and_high(cluster.bootstrap) == (7, 11), "LSO 7 / HW 11")
    committed = [b"c-0", b"c-1", b"c-2"]
    assert read_all(cluster.bootstrap, [TOPIC], 1, quiet_s=0.5) == committed
    indexes = wait_for(lambda: (lambda b: b if len(set(b)) == 1 and b[0] else None)(
        [txn_index_bytes(broker) for broker in cluster.brokers]), "the same .txnindex on every replica")
    assert len(indexes[0]) == 34  # one abort: producer, first offset 4, marker 6, LSO after 7
    assert int.from_bytes(indexes[0][10:18], "big") == 4 and int.from_bytes(indexes[0][18:26], "big") == 6

    old_leader = leader_of(cluster.bootstrap)
    victim = cluster.broker(old_leader)
    victim.kill(signal.SIGKILL)
    others = ",".join(b.bootstrap for b in cluster.brokers if b is not victim)
    wait_for(lambda: leader_of(others) not in (-1, old_leader), "a new leader")
    assert wait_for(lambda: stable_and_high(others) == (7, 11), "the same LSO on the new leader")
    assert read_all(others, [TOPIC], 1, quiet_s=0.5) == committed  # aborted skipped, open not shown
    uncommitted = read_all(others, [TOPIC], 1, "read_uncommitted", quiet_s=0.5)
    assert uncommitted == committed + [b"a-0", b"a-1"] + [b"o-%d" % i for i in range(4)]

    victim.start()  # crash recovery: the index is rebuilt to the same bytes
    wait_for(lambda: txn_index_bytes(victim) == indexes[0], "the restarted broker's .txnindex")

    producer.commit_transaction(WAIT_S)                     # marker 11
    assert wait_for(lambda: stable_and_high(cluster.bootstrap) == (12, 12), "LSO = HW after the commit")
    assert read_all(cluster.bootstrap, [TOPIC], 1, quiet_s=0.5) == committed + [b"o-%d" % i for i in range(4)]
