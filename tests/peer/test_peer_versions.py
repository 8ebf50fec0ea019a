"""Produce and Fetch at every version both Apache Kafka and pylog serve: clients negotiate the
highest version in both ranges, and older clients stay lower, so each shared version must answer
alike. The same batch goes to a new topic on each system; the answers are compared field by
field, and the batches Fetch returns byte for byte (the stored batch: base offset and partition
leader epoch set by the broker, the rest as the producer sent it).
"""

from __future__ import annotations

import time

from peer_support import unique_topic

from broker.client.connection import BrokerConnection
from broker.records import Compression, Record, encode_batch
from broker.wire import ApiKey


def shared_versions(peers, api_key: int) -> range:
    """The versions of ``api_key`` both advertise and this test's client can send."""
    lows, highs = [], []
    for peer in peers:
        with BrokerConnection("127.0.0.1", peer.ports[0]) as conn:
            conn.connect()
            low, high = conn.broker_api_versions[api_key]
            lows.append(low)
            highs.append(min(high, conn.version_for(api_key)))
    return range(max(lows), min(highs) + 1)


def a_batch(compression: int) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(0, now, b"k0", b"v0", [("h", b"1")]), Record(1, now + 5, None, b"v1" * 50)],
                        compression=compression)


def fields(tagged, *names: str) -> tuple | None:
    """A tagged struct's fields, None when it was not sent."""
    return None if tagged is None else tuple(getattr(tagged, name) for name in names)


def produce(conn: BrokerConnection, topic: str, batch: bytes, version: int) -> tuple:
    response = conn.request(ApiKey.PRODUCE, {
        "acks": -1, "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        api_version=version)
    ((topic_answer,),) = [response.responses]
    (p,) = topic_answer.partition_responses
    return (p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset,
            [(e.batch_index, e.batch_index_error_message) for e in p.record_errors], p.error_message,
            fields(p.current_leader, "leader_id", "leader_epoch"))


def fetch(conn: BrokerConnection, topic: str, offset: int, version: int, isolation_level: int,
          max_bytes: int = 1 << 20) -> tuple:
    """``max_bytes`` bounds the response and the partition (KIP-74: the first batch comes whole
    even when it is larger)."""
    response = conn.request(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": []}, api_version=version)
    (topic_answer,) = response.responses
    (p,) = topic_answer.partitions
    aborted = None if p.aborted_transactions is None else list(p.aborted_transactions)
    return (response.error_code, response.session_id, p.error_code, p.high_watermark, p.last_stable_offset,
            p.log_start_offset, aborted, p.preferred_read_replica,
            fields(p.diverging_epoch, "epoch", "end_offset"),
            None if p.records is None else bytes(p.records))


def wait_until_writable(conn: BrokerConnection, topic: str) -> None:
    """A topic just created on Kafka takes a moment to get its leader: an empty Fetch answers
    NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION until then."""
    deadline = time.monotonic() + 30
    while (answer := fetch(conn, topic, 0, 4, 0))[2] != 0:
        assert time.monotonic() < deadline, f"{topic} not served in time: {answer}"
        time.sleep(0.05)


def test_produce_and_fetch_answer_alike_at_every_shared_version(peers):
    # Both advertise Produce from v0, but neither serves v0-2 (RecordBatch v2 needs v3; Kafka 4
    # removed them, KIP-896, and still advertises v0 for old librdkafka): see test_peer_frames.
    produce_versions = range(3, shared_versions(peers, ApiKey.PRODUCE).stop)
    fetch_versions = shared_versions(peers, ApiKey.FETCH)
    assert 3 in produce_versions and 12 in fetch_versions, (produce_versions, fetch_versions)
    batches = [a_batch(Compression.NONE), a_batch(Compression.GZIP)]
    seen = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("versions"))
        with BrokerConnection("127.0.0.1", peer.ports[0]) as conn:
            wait_until_writable(conn, topic)
            produced = [produce(conn, topic, batches[v % 2], v) for v in produce_versions]
            fetched = {(v, isolation, offset, max_bytes): fetch(conn, topic, offset, v, isolation, max_bytes)
                       for v in fetch_versions for isolation in (0, 1) for offset in (0, 3, 2 * len(produced))
                       for max_bytes in (1 << 20, 10)}
        seen[peer.name] = produced, fetched
    produced, fetched = seen["kafka"]
    assert seen["pylog"][0] == produced
    for key, answer in fetched.items():
        assert seen["pylog"][1][key] == answer, key
    # The scenario is sound: every batch appended in turn, and a fetch from 3 (inside the
    # second batch) starts at that batch.
    assert [p[:2] for p in produced] == [(0, 2 * i) for i in range(len(produced))]
    assert fetched[(12, 0, 3, 1 << 20)][9][:8] == (2).to_bytes(8, "big")
    assert len(fetched[(12, 0, 3, 1 << 20)][9]) > len(fetched[(12, 0, 3, 10)][9]) > 10  # one whole batch


# The transaction APIs (issue 15) pylog advertises differently from Apache Kafka 4.1, and why.
# Every other transaction key served by both must advertise the same range.
TXN_VERSION_DIFFERENCES = {
    # v2 adds the transactional-id pattern filter (KIP-1152), which pylog's core does not apply.
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}
# InitProducerId v5 and TxnOffsetCommit v5 (transaction version 2, KIP-890 part 2) are served
# since pylog finalizes transaction.version 2, so they now match Kafka 4.1's ranges.
TXN_KEYS = (ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
            ApiKey.WRITE_TXN_MARKERS, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS,
            ApiKey.TXN_OFFSET_COMMIT)


def advertised(peer) -> dict[int, tuple[int, int]]:
    with BrokerConnection("127.0.0.1", peer.ports[0]) as conn:
        conn.connect()
        return dict(conn.broker_api_versions)


def test_transaction_api_versions_are_kafkas_but_for_named_differences(peers):
    """AddPartitionsToTxn is advertised 0-5 by both although clients stop at v3: v4+ is the
    broker-to-broker KIP-890 verification form, and a broker serves only what it advertises."""
    seen = {peer.name: advertised(peer) for peer in peers}
    kafka, pylog = seen["kafka"], seen["pylog"]
    for key in TXN_KEYS:
        assert key in kafka, f"Kafka 4.1 does not advertise {key!r}"
        assert pylog.get(key) == TXN_VERSION_DIFFERENCES.get(key, kafka[key]), (key, kafka[key], pylog.get(key))
    for key, ours in TXN_VERSION_DIFFERENCES.items():
        assert kafka[key] != ours, f"{key!r}: Kafka now advertises {kafka[key]} as pylog; drop the difference"
