"""Helpers shared by the client's unit tests against ``InMemoryKafka`` (consumer, consumer to
Arrow, producer, producer pipelining): the cluster a test runs against, clients with short
timeouts, batches written straight into a partition, and what the brokers received."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from broker.client.config import ClientConfig
from broker.client.consumer import Consumer
from broker.client.producer import Producer
from fake_kafka import InMemoryKafka
from broker.records import ControlRecord, ControlType, Record, encode_batch, encode_control_batch
from broker.wire import ApiKey

FAST = ClientConfig(request_timeout_ms=2000, connect_timeout_ms=1000, retry_backoff_ms=5)


@contextmanager
def in_memory_cluster(partitions: int, **options) -> Iterator[InMemoryKafka]:
    """Two fake brokers holding topic "t" with ``partitions`` partitions (leaders alternate
    between them). On a clean exit, asserts that no broker handler raised."""
    with InMemoryKafka(brokers=2, **options) as kafka:
        kafka.create_topic("t", partitions)
        yield kafka
        assert kafka.handler_errors == []


def consumer(kafka: InMemoryKafka, *, config: ClientConfig = FAST, **options) -> Consumer:
    options.setdefault("fetch_max_wait_ms", 20)
    return Consumer(kafka.bootstrap, config=config, **options)


def producer(kafka: InMemoryKafka, *, config: ClientConfig = FAST, **options) -> Producer:
    options.setdefault("linger_ms", 0)
    return Producer(kafka.bootstrap, config=config, **options)


def append_batch(kafka: InMemoryKafka, partition: int, records: list[Record], *, pid: int = -1,
                 txn: bool = False, topic: str = "t") -> int:
    """Writes ``records`` as one batch, bypassing the producer; ``pid`` >= 0 makes it idempotent
    (epoch 0, first sequence 0). Returns the batch's base offset."""
    return kafka.append_raw(topic, partition, encode_batch(
        records, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1, transactional=txn))


def end_txn(kafka: InMemoryKafka, partition: int, pid: int, commit: bool) -> int:
    """Writes the COMMIT or ABORT marker that ends producer ``pid``'s transaction on "t"."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    return kafka.append_raw("t", partition, encode_control_batch(
        ControlRecord(kind, 0), offset=0, timestamp=1, producer_id=pid, producer_epoch=0))


def produce_requests(kafka: InMemoryKafka, node: int | None = None) -> list:
    """The Produce requests broker ``node`` received, or every broker's when ``node`` is None."""
    brokers = kafka.brokers if node is None else [kafka.brokers[node]]
    return [r for b in brokers for _, r in b.requests_for(ApiKey.PRODUCE)]


def values(kafka: InMemoryKafka, partition: int, topic: str = "t") -> list[bytes]:
    return [r.value for r in kafka.records(topic, partition)]


def wait_until(predicate: Callable[[], object], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True
