"""ListOffsets by timestamp: the same batches, with producer-set CreateTime timestamps that are
neither increasing nor unique, on Apache Kafka and on pylog; the (error, offset, timestamp,
leader epoch) each answers for earliest (-2), latest (-1), max timestamp (-3, KIP-734), times
before, at, between and after the records, at every ListOffsets version both serve and both
isolation levels, must be the same. A partition with no records is asked the same questions.
"""

from __future__ import annotations

import time

import pytest
from peer_support import unique_topic

from broker.client.connection import BrokerConnection
from broker.wire import ApiKey

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# Batches as the producer sends them: (timestamp offsets from the base time, one per record).
BATCHES = [(100, 300, 200), (500,), (500, 400), (50,)]
# Times asked, relative to the base time: before all, at, between, at the maximum, after all.
ASKED = [0, 50, 100, 150, 250, 300, 350, 450, 500, 501, 10_000]


def produce_batches(bootstrap: str, topic: str, base_ms: int, compression: str) -> None:
    """One record batch per entry of ``BATCHES`` (a flush after each), all to partition 0."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=60_000,
                             compression_type=None if compression == "none" else compression)
    try:
        for batch in BATCHES:
            futures = [producer.send(topic, key=b"k", value=f"at {t}".encode(), partition=0,
                                     timestamp_ms=base_ms + t) for t in batch]
            producer.flush(30)
            assert all(f.succeeded() for f in futures), [f.exception for f in futures]
    finally:
        producer.close(timeout=30)


def list_offsets(connection, topic: str, partitions: list[tuple[int, int]], version: int,
                 isolation_level: int = 0) -> list:
    """One ListOffsets request for ``[(partition, timestamp)]``; its answers, sorted, as
    ``(partition, error, offset, timestamp, leader epoch)``."""
    response = connection.request(ApiKey.LIST_OFFSETS, {
        "replica_id": -1, "isolation_level": isolation_level,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "timestamp": t} for p, t in partitions]}],
    }, api_version=version)
    return sorted((p.partition_index, p.error_code, p.offset, p.timestamp, p.leader_epoch)
                  for answer in response.topics for p in answer.partitions)


def wait_until_served(peer, topic: str, partitions: int = 1) -> None:
    """A topic just created may not have its leaders in place yet (Kafka's brokers learn them
    from the metadata log a moment later): ask for the latest offsets until every partition
    answers without error."""
    deadline = time.monotonic() + 30
    with BrokerConnection("127.0.0.1", peer.ports[0]) as connection:
        while True:
            answer = list_offsets(connection, topic, [(p, LATEST) for p in range(partitions)], 1)
            if all(error == 0 for _, error, *_ in answer):
                return
            assert time.monotonic() < deadline, f"{peer}: {topic} not served in time: {answer}"
            time.sleep(0.05)


def answers_per_timestamp(peer, topic: str, base_ms: int, versions: range) -> dict:
    """Every asked timestamp, in its own request, at every version and isolation level."""
    with BrokerConnection("127.0.0.1", peer.ports[0]) as connection:
        return {(version, isolation, t): list_offsets(connection, topic, [(0, t)], version, isolation)
                for version in versions for isolation in ((0, 1) if version >= 2 else (0,))
                for t in asked_timestamps(base_ms, version)}


def asked_timestamps(base_ms: int, version: int) -> list[int]:
    special = [EARLIEST, LATEST] + ([MAX_TIMESTAMP] if version >= 7 else [])
    return special + [base_ms + t for t in ASKED]


def shared_versions(peers) -> range:
    """The ListOffsets versions both systems serve (and this test's client can send)."""
    ranges = []
    for peer in peers:
        with BrokerConnection("127.0.0.1", peer.ports[0]) as connection:
            connection.connect()
            low, high = connection.broker_api_versions[ApiKey.LIST_OFFSETS]
            ranges.append((low, min(high, connection.version_for(ApiKey.LIST_OFFSETS))))
    return range(max(r[0] for r in ranges), min(r[1] for r in ranges) + 1)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_list_offsets_by_timestamp_matches_apache_kafka(peers, compression):
    base_ms = int(time.time() * 1000) - 60_000
    versions = shared_versions(peers)
    assert 7 in versions, versions  # max timestamp (KIP-734) is asked of both
    answers = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic(f"offsets-{compression}"))
        empty = peer.create_topic(unique_topic("offsets-empty"))
        produce_batches(peer.bootstrap, topic, base_ms, compression)
        wait_until_served(peer, empty)
        answers[peer.name] = {"records": answers_per_timestamp(peer, topic, base_ms, versions),
                              "empty": answers_per_timestamp(peer, empty, base_ms, versions)}
    for which in ("records", "empty"):
        for key, kafka_answer in answers["kafka"][which].items():
            assert answers["pylog"][which][key] == kafka_answer, (which, key)
    # The scenario asks something: at v7, earliest, latest and max timestamp of the records are
    # 0, the log end and the first record of the largest timestamp (offset 3, not 4).
    kafka_v7 = answers["kafka"]["records"]
    assert [kafka_v7[(7, 0, t)][0][2] for t in (EARLIEST, LATEST, MAX_TIMESTAMP)] == [0, 7, 3]


def test_a_partition_asked_twice_is_one_invalid_request_answer(peers):
    """ListOffsets v1+ allows one entry per partition: a repeated partition is answered once,
    INVALID_REQUEST, and the other partitions of the request are answered normally."""
    answers = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("offsets-twice"), partitions=2)
        wait_until_served(peer, topic, partitions=2)
        with BrokerConnection("127.0.0.1", peer.ports[0]) as connection:
            answers[peer.name] = [
                list_offsets(connection, topic, [(0, EARLIEST), (1, LATEST), (0, LATEST)], version)
                for version in (1, 7)]
    assert answers["pylog"] == answers["kafka"]
    assert [[entry[:2] for entry in answer] for answer in answers["kafka"]] == [[(0, 42), (1, 0)]] * 2


def test_current_leader_epoch_is_checked_alike(peers):
    """ListOffsets v4+ carries the client's idea of the leader epoch (KIP-320): none (-1) and the
    current one are served, a newer one is UNKNOWN_LEADER_EPOCH, and the answer names the epoch."""
    answers = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("offsets-epoch"))
        wait_until_served(peer, topic)
        with BrokerConnection("127.0.0.1", peer.ports[0]) as connection:
            answers[peer.name] = [connection.request(ApiKey.LIST_OFFSETS, {
                "replica_id": -1, "topics": [{"name": topic, "partitions": [
                    {"partition_index": 0, "timestamp": LATEST, "current_leader_epoch": epoch}]}]},
                api_version=version).topics[0].partitions[0] for version in (4, 7) for epoch in (-1, 0, 1)]
        answers[peer.name] = [(p.error_code, p.offset, p.leader_epoch) for p in answers[peer.name]]
    assert answers["pylog"] == answers["kafka"]
    assert [error for error, _, _ in answers["kafka"]] == [0, 0, 75] * 2
