"""Transaction drivers of the peer tier: a transactional producer (confluent-kafka or
kafka-python) reduced to begin / send / commit / abort, consumers that read a partition under an
isolation level to its end, and the broker-side state a client relies on, read on the raw wire
(the batches with their markers, the last stable offset of Fetch and of ListOffsets, Fetch's
aborted transactions), so the same transactional scenario on Apache Kafka and on pylog can be
compared with ``==``.

Also here: ``txn_peer``, the per-system fixture of the transaction modules.
"""

from __future__ import annotations

import itertools
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import pytest
from group_clients import DEADLINE_S, wait_until
from wire_probe import connect

from broker.records import ControlType, decode_batch, decode_control_record, iter_batches
from broker.wire import ApiKey, ErrorCode, FindCoordinatorRequest

__all__ = ["COORDINATOR_TIMEOUT_S", "FETCH_VERSION", "LIST_OFFSETS_VERSION", "TRANSACTION_TIMEOUT_MS",
           "Batch", "PartitionReader", "PartitionState", "TxnProducer", "aborted_from", "open_txn_producer", "partition_state", "read_at_once", "read_partition",
           "settled", "txn_peer", "unique_txn_id", "wait_for_leaders", "wait_for_txn_coordinator", "wait_until"]

TRANSACTION_TIMEOUT_MS = 20_000  # a client's transaction.timeout.ms unless a scenario needs another
COORDINATOR_TIMEOUT_S = 20.0     # Kafka creates __transaction_state (50 partitions) on first use
FETCH_VERSION = 12               # the newest Fetch with topic names, offered by both
LIST_OFFSETS_VERSION = 7
READ_COMMITTED, READ_UNCOMMITTED = 1, 0
LATEST_TIMESTAMP = -1

_txn_numbers = itertools.count()
_no_coordinator: set[str] = set()  # peers seen without a transaction coordinator this session


def unique_txn_id(prefix: str = "peer-txn") -> str:
    return f"{prefix}-{next(_txn_numbers)}-{time.monotonic_ns() % 1_000_000}"


@pytest.fixture(params=["kafka", "pylog"])
def txn_peer(request):
    """Either system, for transactional scenarios whose expected outcome is stated once (what
    Apache Kafka 4.1 does, checked when this tier was written) and must hold on both."""
    return request.getfixturevalue(f"{request.param}_peer")


# ------------------------------------------------------------------------- the coordinator


def find_txn_coordinator_error(peer, transactional_id: str) -> str:
    """FindCoordinator v3 with key type 1 (a transactional id)."""
    with connect(peer) as raw:
        response = raw.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=transactional_id, key_type=1))
    return ErrorCode(response.error_code).name


def wait_for_txn_coordinator(peer, transactional_id: str) -> None:
    """Until ``transactional_id`` has a coordinator (both create ``__transaction_state`` on first
    use and answer COORDINATOR_NOT_AVAILABLE meanwhile), so a client's backoff is not part of the
    scenario. A peer seen without one once in this session fails at once after that: every
    transactional test would otherwise wait out the same deadline."""
    if peer.name in _no_coordinator:
        raise AssertionError(f"{peer}: no transaction coordinator (seen earlier in this session)")
    try:
        wait_until(lambda: find_txn_coordinator_error(peer, transactional_id) == "NONE",
                   f"a transaction coordinator for {transactional_id} on {peer}", COORDINATOR_TIMEOUT_S)
    except AssertionError:
        _no_coordinator.add(peer.name)
        raise


# ------------------------------------------------------------------------------- producers


class TxnProducer:
    """A transactional producer of ``client`` ("confluent" or "kafka-python"), its calls
    reduced to the ones a scenario makes. ``send`` is fire-and-forget; ``flush`` waits until
    every record sent is acknowledged (on the log, inside the open transaction)."""

    def __init__(self, client: str, bootstrap: str, transactional_id: str,
                 transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS) -> None:
        self.client = client
        if client == "confluent":
            from confluent_kafka import Producer

            self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                      "transaction.timeout.ms": transaction_timeout_ms, "linger.ms": 5})
        else:
            from kafka import KafkaProducer

            self.producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                          transaction_timeout_ms=transaction_timeout_ms, linger_ms=5)

    def init(self) -> None:
        if self.client == "confluent":
            self.producer.init_transactions(DEADLINE_S)
        else:
            self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        if self.client == "confluent":
            self.producer.produce(topic, value, partition=partition)
        else:
            self.producer.send(topic, value, partition=partition)

    def flush(self) -> None:
        if self.client == "confluent":
            assert self.producer.flush(DEADLINE_S) == 0
        else:
            self.producer.flush(timeout=DEADLINE_S)

    def send_offsets(self, offsets: dict[tuple[str, int], int], consumer) -> None:
        """``send_offsets_to_transaction`` with ``consumer``'s group metadata (a confluent or a
        kafka-python consumer of that client)."""
        if self.client == "confluent":
            from confluent_kafka import TopicPartition

            self.producer.send_offsets_to_transaction(
                [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                consumer.consumer_group_metadata(), DEADLINE_S)
        else:
            from kafka import TopicPartition
            from kafka.structs import OffsetAndMetadata

            self.producer.send_offsets_to_transaction(
                {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
                consumer.config["group_id"])

    def commit(self) -> None:
        if self.client == "confluent":
            self.producer.commit_transaction(DEADLINE_S)
        else:
            self.producer.commit_transaction()

    def abort(self) -> None:
        if self.client == "confluent":
            self.producer.abort_transaction(DEADLINE_S)
        else:
            self.producer.abort_transaction()

    def close(self) -> None:
        """Close now, while the peer is up: a producer left to the garbage collector reconnects
        to a stopped cluster at session end (and confluent-kafka's close aborts an open
        transaction, so none is left behind)."""
        if self.client == "kafka-python":
            self.producer.close(timeout=5)
            return
        from confluent_kafka import KafkaException

        try:
            with warnings.catch_warnings():  # "abort_transaction failed during close": fenced, see below
                warnings.simplefilter("ignore", RuntimeWarning)
                self.producer.close()
        except KafkaException as failure:  # a fenced producer cannot abort: it is closed all the same
            if not failure.args[0].fatal():
                raise


def open_txn_producer(client: str, peer, transactional_id: str | None = None, **options) -> TxnProducer:
    """A producer whose ``init_transactions`` has returned (its coordinator found first)."""
    transactional_id = transactional_id or unique_txn_id(client)
    wait_for_txn_coordinator(peer, transactional_id)
    producer = TxnProducer(client, peer.bootstrap, transactional_id, **options)
    producer.init()
    return producer


# ------------------------------------------------------------------------------- consumers


class PartitionReader:
    """A consumer of ``client`` with ``isolation.level`` ``isolation``, assigned ``partition``
    from ``start``, kept open so a scenario can read, change the log, and read on."""

    def __init__(self, client: str, peer, topic: str, partition: int, isolation: str, start: int = 0) -> None:
        self.client, self.isolation, self.where, self.start = client, isolation, f"{topic}-{partition}", start
        if client == "confluent":
            from confluent_kafka import Consumer, TopicPartition

            self.consumer = Consumer({"bootstrap.servers": peer.bootstrap, "group.id": unique_txn_id("reader"),
                                      "isolation.level": isolation, "enable.auto.commit": False,
                                      "enable.partition.eof": False})
            self.consumer.assign([TopicPartition(topic, partition, start)])
            self.tp = TopicPartition(topic, partition)
        else:
            from kafka import KafkaConsumer, TopicPartition

            self.consumer = KafkaConsumer(bootstrap_servers=peer.bootstrap, isolation_level=isolation,
                                          enable_auto_commit=False, group_id=None)
            self.tp = TopicPartition(topic, partition)
            self.consumer.assign([self.tp])
            self.consumer.seek(self.tp, start)

    def poll(self) -> list[tuple[int, bytes]]:
        if self.client == "confluent":
            messages = self.consumer.consume(num_messages=500, timeout=0.2)
            assert all(m.error() is None for m in messages), [m.error() for m in messages]
            return [(m.offset(), m.value()) for m in messages]
        batches = self.consumer.poll(timeout_ms=200)
        return [(r.offset, r.value) for records in batches.values() for r in records]

    def position(self) -> int:
        if self.client == "confluent":  # OFFSET_INVALID (-1001) until a record was consumed: still at start
            return max(self.consumer.position([self.tp])[0].offset, self.start)
        return self.consumer.position(self.tp)

    def read_to(self, end: int) -> list[tuple[int, bytes]]:
        """(offset, value) of the records read until the position reaches ``end`` (the LSO or
        the high watermark: markers are skipped, so the position passes them), plus one poll
        more, so a record too many (or a position past ``end``) would show."""
        records: list[tuple[int, bytes]] = []
        wait_until(lambda: records.extend(self.poll()) or self.position() >= end,
                   f"{self.client} ({self.isolation}) at offset {end} of {self.where}")
        records.extend(self.poll())
        final = self.position()
        assert final == end, f"{self.client} ({self.isolation}) read past {end}: at {final}"
        return records

    def close(self) -> None:
        self.consumer.close()


def read_partition(client: str, peer, topic: str, partition: int, isolation: str, end: int,
                   start: int = 0) -> list[tuple[int, bytes]]:
    """``PartitionReader.read_to(end)`` of a reader opened for it and closed after."""
    reader = PartitionReader(client, peer, topic, partition, isolation, start)
    try:
        return reader.read_to(end)
    finally:
        reader.close()


def read_at_once(peer, topic: str, reads) -> list[list[tuple[int, bytes]]]:
    """``read_partition(client, peer, topic, partition, isolation, end, start)`` for each
    ``(client, partition, isolation, end, start)`` of ``reads``, all at the same time (each its
    own consumer: the log is settled, so they cannot disturb each other), in order."""
    with ThreadPoolExecutor(len(reads)) as pool:
        futures = [pool.submit(read_partition, client, peer, topic, partition, isolation, end, start)
                   for client, partition, isolation, end, start in reads]
        return [future.result() for future in futures]


# ---------------------------------------------------------------------- the broker's state


class Batch(NamedTuple):
    """One batch on the log: its offsets, whether it is transactional, and the marker it is
    (``"COMMIT"``/``"ABORT"``) or ``None`` for data."""

    base_offset: int
    last_offset: int
    transactional: bool
    marker: str | None


class PartitionState(NamedTuple):
    """What a partition's leader says of it: the batches (read_uncommitted Fetch from 0), the
    high watermark, Fetch's ``last_stable_offset`` (read_committed), ListOffsets latest under
    read_committed and read_uncommitted, and Fetch's aborted transactions (their first offsets,
    read_committed from 0) with the producer ids they name, relative to the data batches'. Also
    what a read_uncommitted Fetch says of both: its ``last_stable_offset`` and its aborted
    transactions (None: the field is null)."""

    batches: list[Batch]
    high_watermark: int
    last_stable_offset: int
    latest_committed: int
    latest_uncommitted: int
    aborted_first_offsets: list[int]
    aborted_by_the_batches_producer: bool
    uncommitted_fetch_lso: int
    uncommitted_fetch_aborted: list | None


def _fetch(raw, topic: str, partition: int, isolation_level: int, fetch_offset: int = 0):
    [answer] = raw.call(ApiKey.FETCH, FETCH_VERSION, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
        "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": fetch_offset,
                                                   "partition_max_bytes": 1 << 24}]}],
        "forgotten_topics_data": [], "rack_id": ""}).responses
    [answer] = answer.partitions
    assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code).name
    return answer


def _list_offsets(raw, topic: str, partition: int, isolation_level: int):
    [answer] = raw.call(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, {
        "replica_id": -1, "isolation_level": isolation_level, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "timestamp": LATEST_TIMESTAMP}]}]}).topics
    [answer] = answer.partitions
    return answer


def _latest(raw, topic: str, partition: int, isolation_level: int) -> int:
    answer = _list_offsets(raw, topic, partition, isolation_level)
    assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code).name
    return answer.offset


def wait_for_leaders(peer, topic: str, partitions: int) -> str:
    """``topic`` once its leader serves every partition (a raw produce right after CreateTopics
    may get NOT_LEADER_OR_FOLLOWER; clients retry that, a raw request does not)."""
    with connect(peer) as raw:
        for partition in range(partitions):
            wait_until(lambda: _list_offsets(raw, topic, partition, READ_UNCOMMITTED).error_code == ErrorCode.NONE,
                       f"a leader for {topic}-{partition} on {peer}")
    return topic


def _batches(records) -> tuple[list[Batch], set[int]]:
    """The batches of a Fetch's records, and the producer ids of its transactional data."""
    data = bytes(records or b"")
    batches, producers = [], set()
    for position, header in iter_batches(data):
        marker = None
        if header.is_control:
            [record] = decode_batch(data[position:position + header.size]).records
            marker = "COMMIT" if decode_control_record(record).type == ControlType.COMMIT else "ABORT"
        elif header.is_transactional:
            producers.add(header.producer_id)
        batches.append(Batch(header.base_offset, header.last_offset, header.is_transactional, marker))
    return batches, producers


def partition_state(peer, topic: str, partition: int = 0) -> PartitionState:
    with connect(peer) as raw:
        uncommitted = _fetch(raw, topic, partition, READ_UNCOMMITTED)
        committed = _fetch(raw, topic, partition, READ_COMMITTED)
        latest_committed = _latest(raw, topic, partition, READ_COMMITTED)
        latest_uncommitted = _latest(raw, topic, partition, READ_UNCOMMITTED)
    batches, producers = _batches(uncommitted.records)
    aborted = sorted(committed.aborted_transactions or [], key=lambda a: a.first_offset)
    return PartitionState(
        batches, uncommitted.high_watermark, committed.last_stable_offset, latest_committed,
        latest_uncommitted, [a.first_offset for a in aborted],
        all(a.producer_id in producers for a in aborted), uncommitted.last_stable_offset,
        None if uncommitted.aborted_transactions is None else list(uncommitted.aborted_transactions))


def settled(peer, topic: str, partition: int, high_watermark: int) -> PartitionState:
    """The partition's state once its last marker is written and the LSO reached
    ``high_watermark`` (EndTxn is answered before the markers: Kafka writes them after
    PrepareCommit/PrepareAbort is durable)."""
    return wait_until(lambda: (s := partition_state(peer, topic, partition)).last_stable_offset == high_watermark
                      and s.high_watermark == high_watermark and s,
                      f"{topic}-{partition} stable at {high_watermark}")


def aborted_from(peer, topic: str, partition: int, fetch_offset: int) -> list[int]:
    """The first offsets of the aborted transactions a read_committed Fetch from
    ``fetch_offset`` names (those whose data reaches ``fetch_offset`` or later, below the LSO)."""
    with connect(peer) as raw:
        answer = _fetch(raw, topic, partition, READ_COMMITTED, fetch_offset)
    return sorted(a.first_offset for a in answer.aborted_transactions or [])
