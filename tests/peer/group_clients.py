"""Consumer-group drivers of the peer tier: confluent-kafka and kafka-python consumers that
``subscribe()`` with a ``group.id``, each polled by a thread of its own, reduced to what a client
observes (its assignment, the records it read, its committed offsets), so the same group scenario
on Apache Kafka and on pylog can be compared with ``==``.

Also here: ``group_peer``, the per-system fixture of the group modules, the wait for a group's
coordinator, and records spread over a topic's partitions.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest
from wire_probe import connect

from broker.client.producer import Producer
from broker.wire import ApiKey, ErrorCode, FindCoordinatorRequest

__all__ = ["CLIENTS", "DEADLINE_S", "GroupMember", "group_peer", "open_consumer",
           "produce_spread", "unique_group", "wait_for_coordinator", "wait_until"]

DEADLINE_S = 30.0
POLL_S = 0.2
SESSION_TIMEOUT_MS = 6_000  # Kafka's group.min.session.timeout.ms: the shortest a broker accepts
HEARTBEAT_INTERVAL_MS = 500
CLIENTS = ("confluent", "kafka-python")

_group_numbers = itertools.count()


def unique_group(prefix: str = "peer-group") -> str:
    return f"{prefix}-{next(_group_numbers)}-{time.monotonic_ns() % 1_000_000}"


@pytest.fixture(params=["kafka", "pylog"])
def group_peer(request):
    """Either system, for group scenarios whose expected outcome is stated once and must hold on
    both (the outcome is what Apache Kafka 4.1 does, checked when this tier was written)."""
    return request.getfixturevalue(f"{request.param}_peer")


def wait_until(condition: Callable[[], object], what: str, timeout_s: float = DEADLINE_S):
    """``condition()``'s first truthy value, polled every 50 ms; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)
    return value


def find_coordinator_error(peer, group: str) -> str:
    """FindCoordinator v3 (one key, the last single-key version both speak) for ``group``."""
    with connect(peer) as raw:
        response = raw.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
    return ErrorCode(response.error_code).name


def wait_for_coordinator(peer, group: str, timeout_s: float = 15.0) -> None:
    """Until ``group`` has a coordinator. Both systems answer COORDINATOR_NOT_AVAILABLE while
    ``__consumer_offsets`` is being created on first use; waiting here keeps a client's own
    backoff out of the scenario's timings, and fails fast (not at a client's deadline) where
    there is no coordinator at all."""
    wait_until(lambda: find_coordinator_error(peer, group) == "NONE",
               f"a coordinator for {group} on {peer}", timeout_s)


def produce_spread(peer, topic: str, partitions: int, per_partition: int) -> None:
    """``per_partition`` records to each partition, values ``p<partition>-<i>``, acks=all."""
    with Producer(peer.bootstrap, linger_ms=5) as producer:
        for partition in range(partitions):
            for i in range(per_partition):
                producer.send(topic, b"p%d-%d" % (partition, i), key=b"k%d" % i, partition=partition)
        producer.flush()


# ------------------------------------------------------------------------------ one consumer


class _Confluent:
    """confluent-kafka (librdkafka): the range assignor unless ``config`` says otherwise, so the
    split is the same as kafka-python's and as the Java client's default (range, then
    cooperative-sticky). ``events`` are the rebalance callbacks seen: ("assign" | "revoke",
    sorted partitions), incremental ones under cooperative-sticky (the binding then assigns by
    itself, as the callbacks do not)."""

    def __init__(self, bootstrap: str, group: str, config: dict) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS, "partition.assignment.strategy": "range",
            **config})
        self.events: list[tuple[str, list[int]]] = []

    def subscribe(self, topics: list[str]) -> None:
        def seen(kind: str):
            return lambda _consumer, partitions: self.events.append((kind, sorted(tp.partition for tp in partitions)))

        self.consumer.subscribe(topics, on_assign=seen("assign"), on_revoke=seen("revoke"))

    def poll(self) -> list[tuple]:
        from confluent_kafka import KafkaError

        out = []
        for message in self.consumer.consume(num_messages=500, timeout=POLL_S):
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise AssertionError(f"confluent-kafka consumer error: {error}")
            if error is None:
                out.append((message.topic(), message.partition(), message.offset(), message.value()))
        return out

    def assignment(self) -> frozenset[tuple[str, int]]:
        return frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                             asynchronous=False)

    def committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        from confluent_kafka import TopicPartition

        answer = self.consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=DEADLINE_S)
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in answer}

    def close(self) -> None:
        self.consumer.close()


class _KafkaPython:
    """kafka-python: the range assignor only (its default list starts with it)."""

    def __init__(self, bootstrap: str, group: str, config: dict) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=[RangePartitionAssignor], **config)

    def subscribe(self, topics: list[str]) -> None:
        # kafka-python's leader assigns from the metadata it has when the join completes: with
        # none yet for a new topic it assigns nothing ("No partition metadata for topic") and
        # the group was seen to stay so for 30 s. The topics' metadata first, then the join.
        for topic in topics:
            wait_until(lambda: self.consumer.partitions_for_topic(topic), f"kafka-python metadata of {topic}")
        self.consumer.subscribe(topics)

    def poll(self) -> list[tuple]:
        batches = self.consumer.poll(timeout_ms=int(POLL_S * 1000))
        return [(r.topic, r.partition, r.offset, r.value) for records in batches.values() for r in records]

    def assignment(self) -> frozenset[tuple[str, int]]:
        return frozenset((tp.topic, tp.partition) for tp in self.consumer.assignment())

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        self.consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})

    def committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        from kafka import TopicPartition

        return {(t, p): self.consumer.committed(TopicPartition(t, p), timeout_ms=int(DEADLINE_S * 1000))
                for t, p in partitions}

    def close(self) -> None:
        self.consumer.close()


def open_consumer(client: str, bootstrap: str, group: str, **config):
    """A group consumer of ``client`` (one of ``CLIENTS``), not subscribed yet; ``config`` in
    that client's own spelling."""
    return {"confluent": _Confluent, "kafka-python": _KafkaPython}[client](bootstrap, group, config)


# ------------------------------------------------------------------------- a member, threaded


class GroupMember:
    """One consumer in a group, subscribed and polled by its own thread until ``stop()``: a
    member must keep polling for its group to rebalance (kafka-python joins inside ``poll``,
    librdkafka serves the rebalance there), and one member's join waits for the others to rejoin.
    The consumer is used by that thread only; ``assignment`` and ``records`` are what it saw."""

    def __init__(self, client: str, bootstrap: str, group: str, topics: list[str], **config) -> None:
        self.client = client
        self._open = lambda: open_consumer(client, bootstrap, group, **config)
        self._topics = topics
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._assignment: frozenset[tuple[str, int]] = frozenset()
        self._records: list[tuple] = []
        self._polls = 0
        self._events: list[tuple[str, list[int]]] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"group-member-{client}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            consumer = self._open()
            try:
                consumer.subscribe(self._topics)
                while not self._stop.is_set():
                    records = consumer.poll()
                    assignment = consumer.assignment()
                    with self._lock:
                        self._records.extend(records)
                        self._assignment = assignment
                        self._events = list(getattr(consumer, "events", ()))
                        self._polls += 1
            finally:
                consumer.close()
        except BaseException as exc:  # reported by stop() and by the properties
            self.error = exc

    def stop_polling(self) -> None:
        """Ask the thread to close after its current poll (``stop()`` waits for it): signal every
        member first, so no member's leaving hands its partitions to one still reading."""
        self._stop.set()

    def _check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.client} member failed: {self.error!r}") from self.error

    @property
    def assignment(self) -> frozenset[tuple[str, int]]:
        self._check()
        with self._lock:
            return self._assignment

    @property
    def records(self) -> list[tuple]:
        self._check()
        with self._lock:
            return list(self._records)

    @property
    def events(self) -> list[tuple[str, list[int]]]:
        """The rebalance callbacks the member saw (confluent-kafka only), in order."""
        self._check()
        with self._lock:
            return list(self._events)

    @property
    def polls(self) -> int:
        """How many polls the member has completed: waiting for two more than now means
        everything fetched until now has been seen."""
        with self._lock:
            return self._polls

    def stop(self) -> None:
        """Stop polling and close the consumer (which leaves the group)."""
        self.stop_polling()
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), f"{self.client} member did not close within {DEADLINE_S} s"
        self._check()
