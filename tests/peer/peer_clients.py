"""Client drivers of the peer tier: produce and read back one partition with confluent-kafka,
kafka-python and Apache Kafka's own console tools (the Java client), and reduce what each client
observes to plain tuples, so the same scenario's observations on Apache Kafka and on pylog can be
compared with ``==``.

No consumer here uses a group: pylog has no group coordinator yet, so reads assign partition 0
and start at the earliest offset (kafka-python ``group_id=None``, the console consumer
``--partition 0 --offset earliest``). confluent-kafka's consumer refuses to start without a
``group.id``, so confluent-kafka is driven as a producer and read back by the other two.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from broker.tools.kafka_peer import run_kafka_tool

DEADLINE_S = 30.0
PRODUCER_REQUEST_BYTES_MAX = 1_100_000  # above the brokers' 1 MiB limit: the broker decides
# Producers keep their default retries: Apache Kafka may answer NOT_LEADER_OR_FOLLOWER for a
# moment after a new topic's leader shows in Metadata (its metadata cache is published first).


@dataclass(frozen=True)
class Sent:
    """One record to produce; ``timestamp_ms`` None lets the producer stamp it."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


def observed(partition, offset, key, value, headers, timestamp_type, timestamp) -> tuple:
    """What a client saw of one record; headers None (no headers) reads as ()."""
    return (partition, offset, key, value, tuple(tuple(h) for h in headers or ()), timestamp_type,
            timestamp)


# ----------------------------------------------------------------------------- confluent-kafka


def produce_confluent(bootstrap: str, topic: str, records: list[Sent], compression: str) -> list:
    """Produce in order to partition 0; ``[(partition, offset, error code or None)]`` per record."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                         "linger.ms": 20, "message.max.bytes": PRODUCER_REQUEST_BYTES_MAX})
    reports: list = [None] * len(records)

    def report(index):
        def on_delivery(err, msg):
            reports[index] = (msg.partition(), msg.offset(), err.code() if err else None)
        return on_delivery

    for index, record in enumerate(records):
        producer.produce(topic, value=record.value, key=record.key, partition=0,
                         headers=list(record.headers) or None, timestamp=record.timestamp_ms or 0,
                         on_delivery=report(index))
    assert producer.flush(DEADLINE_S) == 0, "confluent-kafka did not deliver in time"
    return reports


# ------------------------------------------------------------------------------- kafka-python


def produce_kafka_python(bootstrap: str, topic: str, records: list[Sent], compression: str) -> list:
    """Produce in order to partition 0; ``[(partition, offset, error name or None)]``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                             compression_type=None if compression == "none" else compression,
                             max_request_size=PRODUCER_REQUEST_BYTES_MAX)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, partition=0,
                                 headers=list(r.headers), timestamp_ms=r.timestamp_ms)
                   for r in records]
        producer.flush(DEADLINE_S)
    finally:
        producer.close(timeout=DEADLINE_S)
    reports = []
    for future in futures:
        if future.failed():
            reports.append((0, -1, type(future.exception).__name__))
        else:
            meta = future.value
            reports.append((meta.partition, meta.offset, None))
    return reports


def produce_kafka_python_timestamps(bootstrap: str, topic: str, records: list[Sent]) -> list[int]:
    """Produce in order to partition 0; the timestamp each delivery report gives (the broker's
    stamp on a LogAppendTime topic, else the record's own)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, partition=0, timestamp_ms=r.timestamp_ms)
                   for r in records]
        producer.flush(DEADLINE_S)
    finally:
        producer.close(timeout=DEADLINE_S)
    return [future.get(timeout=0).timestamp for future in futures]


def consume_kafka_python(bootstrap: str, topic: str, count: int,
                         start_offset: int | None = None) -> list[tuple]:
    """Partition 0 from the earliest offset (or ``start_offset``) until ``count`` records (or the
    deadline), then one short poll more, so a record too many is seen too."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        if start_offset is None:
            consumer.seek_to_beginning()
        else:
            consumer.seek(TopicPartition(topic, 0), start_offset)
        records: list = []
        deadline = time.monotonic() + DEADLINE_S
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        for batch in consumer.poll(timeout_ms=200).values():  # anything more is one too many
            records.extend(batch)
    finally:
        consumer.close()
    return [observed(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp_type, r.timestamp)
            for r in records]


# ---------------------------------------------------------------------- Kafka's console tools

NULL_MARKER = "<NULL>"


def console_line(record: Sent) -> str:
    """``headers<TAB>key<TAB>value`` for ``kafka-console-producer`` with ``parse.headers``."""
    def text(data: bytes | None) -> str:
        return NULL_MARKER if data is None else data.decode()

    headers = ",".join(f"{name}:{text(value)}" for name, value in record.headers) or NULL_MARKER
    return f"{headers}\t{text(record.key)}\t{text(record.value)}"


def produce_console(bootstrap: str, topic: str, records: list[Sent], compression: str) -> None:
    """Kafka's ``kafka-console-producer`` (the Java producer), every line to partition 0."""
    lines = "".join(console_line(r) + "\n" for r in records).encode()
    result = run_kafka_tool("kafka-console-producer", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--compression-codec", compression,
        "--property", "parse.key=true", "--property", "parse.headers=true",
        "--property", f"null.marker={NULL_MARKER}",
    ], input=lines, timeout_s=60)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]


def consume_console(bootstrap: str, topic: str, count: int) -> list[tuple]:
    """Kafka's ``kafka-console-consumer`` on partition 0 from the earliest offset (no group)."""
    result = run_kafka_tool("kafka-console-consumer", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
        "--offset", "earliest", "--max-messages", str(count), "--timeout-ms", "20000",
        "--property", "print.timestamp=true", "--property", "print.partition=true",
        "--property", "print.offset=true", "--property", "print.headers=true",
        "--property", "print.key=true", "--property", f"null.literal={NULL_MARKER}",
    ], timeout_s=60)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return [_console_record(line) for line in result.stdout.decode().splitlines() if line]


def _console_record(line: str) -> tuple:
    """``CreateTime:T<TAB>Partition:P<TAB>Offset:O<TAB>headers<TAB>key<TAB>value``."""
    timestamp, partition, offset, headers, key, value = line.split("\t")
    timestamp_type, _, timestamp_ms = timestamp.rpartition(":")
    return (int(partition.removeprefix("Partition:")), int(offset.removeprefix("Offset:")),
            key, value, headers, timestamp_type, int(timestamp_ms))
