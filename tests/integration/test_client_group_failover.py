"""pylog's own client in a group whose coordinator's broker is SIGKILLed (3 pylog brokers, offsets
RF 3): the member finds the new coordinator by itself (NOT_COORDINATOR / a dead connection ->
FindCoordinator again), acknowledged commits are never lost or go backwards, and a rebalance
that the kill interrupts completes on the new coordinator. The same scenarios with librdkafka
are in ``test_consumer_groups.py``; this module checks pylog's client side of them.
"""

from __future__ import annotations

import threading
import time

from broker.client import AdminClient, Cluster, Consumer, KafkaError, Producer
from broker.client.coordinator import find_coordinator

GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": "0", "group_min_session_timeout_ms": "1000"}
WAIT_S = 60.0
MEMBER = {"auto_offset_reset": "earliest", "session_timeout_ms": 6000, "heartbeat_interval_ms": 300}


def three_brokers(broker_cluster):
    return broker_cluster(3, offsets_topic_replication_factor="3", offsets_topic_num_partitions="10",
                          controlled_shutdown_enable="false", **GROUP_SETTINGS)


def create_and_fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topics(topic, partitions=partitions, replication_factor=3)
    with Producer(bootstrap, linger_ms=5) as producer:
        for i in range(records):
            producer.send(topic, b"v%d" % i, partition=i % partitions)
        producer.flush()


def coordinator_of(bootstrap: str, group: str) -> int:
    cluster = Cluster(bootstrap)
    try:
        return find_coordinator(cluster, group, timeout_ms=WAIT_S * 1000).node_id
    finally:
        cluster.close()


def wait_until(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.05)
    return value


def test_commits_survive_the_coordinators_broker_being_killed(broker_cluster):
    """One member commits synchronously after every record; at the 150th commit the
    coordinator's broker is SIGKILLed. Commits go on (a few may fail while it moves), and every
    acknowledged offset is in the group's committed offsets afterwards."""
    cluster = three_brokers(broker_cluster)
    create_and_fill(cluster.bootstrap, "ledger", 3, 600)
    acknowledged: dict[int, int] = {}
    commits, failures, killed = 0, 0, None
    consumer = Consumer(cluster.bootstrap, group_id="bookkeepers", enable_auto_commit=False, **MEMBER)
    try:
        consumer.subscribe(["ledger"])
        deadline = time.monotonic() + 2 * WAIT_S
        while (killed is None or commits < 400) and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=200, max_records=1):
                try:
                    consumer.commit({("ledger", record.partition): record.offset + 1}, timeout_ms=20_000)
                except KafkaError:
                    failures += 1  # the coordinator moving: this commit may or may not have landed
                    continue
                commits += 1
                acknowledged[record.partition] = max(acknowledged.get(record.partition, 0), record.offset + 1)
                if killed is None and commits == 150:
                    killed = coordinator_of(cluster.bootstrap, "bookkeepers")
                    cluster.broker(killed).kill()
        assert killed is not None and commits >= 400, (commits, failures)
        print(f"\n{commits} commits across the kill of broker {killed}, {failures} failed while it moved")
        lookups = consumer.statistics()["coordinator_lookups"]
        assert lookups >= 2  # found the new coordinator itself
    finally:
        consumer.close()
    survivors = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != killed)
    assert coordinator_of(survivors, "bookkeepers") != killed
    with Consumer(survivors, group_id="bookkeepers") as reader:
        committed = reader.committed([("ledger", p) for p in range(3)], timeout_ms=30_000)
    for partition, offset in acknowledged.items():
        assert committed[("ledger", partition)].offset >= offset, (partition, committed, offset)


class Member:
    """A pylog consumer subscribed to ``topic``, polled by its own thread until ``stop``."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer(bootstrap, group_id=group, partition_assignment_strategy="range", **MEMBER)
        self.consumer.subscribe([topic])
        self.partitions: tuple = ()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    self.consumer.poll(100)
                except KafkaError as exc:
                    if not exc.retriable:  # a retriable error is the coordinator moving
                        raise
                self.partitions = tuple(sorted(p for _, p in self.consumer.assignment()))
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self.consumer.close()
        assert self.error is None, repr(self.error)


def test_a_rebalance_survives_the_coordinators_broker_being_killed(broker_cluster):
    """Two members are Stable; a third joins and the coordinator's broker is SIGKILLed as the
    rebalance starts. The members find the new coordinator and the three split the partitions."""
    cluster = three_brokers(broker_cluster)
    create_and_fill(cluster.bootstrap, "rota", 6, 60)
    members = [Member(cluster.bootstrap, "rotas", "rota") for _ in range(2)]
    try:
        wait_until(lambda: sorted(m.partitions for m in members) == [(0, 1, 2), (3, 4, 5)], "two members")
        coordinator = coordinator_of(cluster.bootstrap, "rotas")
        members.append(Member(cluster.bootstrap, "rotas", "rota"))
        cluster.broker(coordinator).kill()
        started = time.monotonic()
        wait_until(lambda: sorted(m.partitions for m in members) == [(0, 1), (2, 3), (4, 5)], "three members")
        print(f"\nthe group of three formed {time.monotonic() - started:.1f} s after its coordinator's broker died")
        survivors = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != coordinator)
        assert coordinator_of(survivors, "rotas") != coordinator
    finally:
        for member in members:
            member.stop()
