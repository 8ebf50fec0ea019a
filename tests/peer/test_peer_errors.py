"""The same bad request to Apache Kafka and to pylog: the error each answers, compared.

Each scenario sends identical bytes (built with ``broker.wire``) to both brokers at the same
request versions (``peer_answers.compared_versions``), reduces the answers to what a client acts
on and compares them. Here: unknown topics and partitions, invalid names on the data APIs, leader
epochs, out-of-range fetch offsets, invalid acks. Bad batches are in ``test_peer_bad_batches.py``,
CreateTopics/DeleteTopics in ``test_peer_admin_errors.py``. A deliberate difference is named where
it is asserted.
"""

from __future__ import annotations

import time

import pytest
from peer_answers import (
    compare,
    compared_versions,
    fetch_answer,
    list_offsets_answer,
    metadata_answer,
    produce_answer,
)
from peer_support import unique_topic
from wire_probe import (
    batch_of,
    connect,
    highest_common_version,
    produce_partition,
    produce_request,
    serves_after,
)

from broker.records import iter_batches
from broker.wire import ApiKey, ErrorCode, FetchRequest, MetadataRequest, OffsetForLeaderEpochRequest


@pytest.fixture(scope="module")
def versions(peers) -> dict[int, list[int]]:
    return compared_versions(peers)


def test_unknown_topic_gets_the_same_error_from_every_data_api(peers, versions):
    topic = unique_topic("never-created")
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topic, batch_of([b"lost"])))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    for version in versions[ApiKey.FETCH]:
        seen = compare(peers, lambda p: fetch_answer(p, version, topic, 0))
        assert seen["kafka"] == seen["pylog"], f"Fetch v{version}"
        assert seen["pylog"][1] == "UNKNOWN_TOPIC_OR_PARTITION"
    for version in versions[ApiKey.LIST_OFFSETS]:
        seen = compare(peers, lambda p: list_offsets_answer(p, version, topic, -1))
        assert seen["kafka"] == seen["pylog"], f"ListOffsets v{version}"
        assert seen["pylog"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    for version in versions[ApiKey.METADATA]:
        seen = compare(peers, lambda p: metadata_answer(p, version, topic))
        assert seen["kafka"] == seen["pylog"], f"Metadata v{version}"
        assert seen["pylog"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert all(serves_after(peer) for peer in peers)


def test_unknown_partition_of_a_known_topic_gets_the_same_error(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("one-partition")) for peer in peers}
    version = versions[ApiKey.PRODUCE][-1]

    def observe(peer):
        with connect(peer) as raw:
            request = produce_request(topics[peer.name], batch_of([b"nowhere"]), partition=7)
            partition = produce_partition(raw, version, request)
        return ErrorCode(partition.error_code).name, partition.base_offset

    seen = compare(peers, observe)
    assert seen["kafka"] == seen["pylog"] == ("UNKNOWN_TOPIC_OR_PARTITION", -1)
    for version in versions[ApiKey.FETCH]:
        seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], 0, partition=7))
        assert seen["kafka"] == seen["pylog"], f"Fetch v{version}"
    for version in versions[ApiKey.LIST_OFFSETS]:
        seen = compare(peers, lambda p: list_offsets_answer(p, version, topics[p.name], -1, partition=7))
        assert seen["kafka"] == seen["pylog"], f"ListOffsets v{version}"


def leader_epoch(peer, topic: str) -> int:
    with connect(peer) as raw:
        response = raw.call(ApiKey.METADATA, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    [answer] = response.topics
    [partition] = answer.partitions
    return partition.leader_epoch


def test_a_stale_or_future_leader_epoch_is_fenced_alike(peers, versions):
    """KIP-320: a consumer's current_leader_epoch older than the leader's is FENCED_LEADER_EPOCH,
    newer is UNKNOWN_LEADER_EPOCH, -1 is not checked."""
    topics = {peer.name: peer.create_topic(unique_topic("epochs")) for peer in peers}
    epochs = {peer.name: leader_epoch(peer, topics[peer.name]) for peer in peers}
    assert epochs["kafka"] == epochs["pylog"]
    expected = {0: "NONE", 1: "UNKNOWN_LEADER_EPOCH", 5: "UNKNOWN_LEADER_EPOCH", None: "NONE"}
    if epochs["pylog"] > 0:  # epoch - 1 is -1 (not checked) on a fresh topic
        expected[-1] = "FENCED_LEADER_EPOCH"
    for delta, error in expected.items():
        def epoch_for(p):
            return -1 if delta is None else epochs[p.name] + delta
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], 0, leader_epoch=epoch_for(p)))
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} epoch {delta}"
            assert seen["pylog"][1] == error
        for version in versions[ApiKey.LIST_OFFSETS]:
            seen = compare(peers, lambda p: list_offsets_answer(p, version, topics[p.name], -1,
                                                                leader_epoch=epoch_for(p)))
            assert seen["kafka"] == seen["pylog"], f"ListOffsets v{version} epoch {delta}"
            assert seen["pylog"][0] == error


def test_metadata_and_produce_for_invalid_topic_names_answer_alike(peers, versions):
    for name in ("bad/name", ".", "x" * 250):
        for version in versions[ApiKey.METADATA]:
            seen = compare(peers, lambda p: metadata_answer(p, version, name))
            assert seen["kafka"] == seen["pylog"], f"Metadata v{version} {name[:20]}"
        for version in versions[ApiKey.PRODUCE]:
            seen = compare(peers, lambda p: produce_answer(p, version, name, batch_of([b"v"])))
            assert seen["kafka"] == seen["pylog"], f"Produce v{version} {name[:20]}"


def test_fetch_offset_out_of_range_is_answered_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("range")) for peer in peers}
    for peer in peers:
        assert produce_answer(peer, versions[ApiKey.PRODUCE][-1], topics[peer.name],
                              batch_of([b"r%d" % i for i in range(3)]))[:2] == ("NONE", 0)
    # 3 is the log end (a valid, empty fetch); 4 and far beyond are above it; -1 is below the
    # log start (0 here: neither side has deleted anything).
    for offset in (3, 4, 1 << 40, -1):
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], offset))
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} at offset {offset}"
            assert seen["pylog"][1] == ("NONE" if offset == 3 else "OFFSET_OUT_OF_RANGE")


def earliest_offset(peer, topic: str) -> int:
    answer = list_offsets_answer(peer, 7, topic, -2)
    assert answer[0] == "NONE", answer
    return answer[2]


def test_fetch_below_a_moved_log_start_is_out_of_range_alike(peers, versions):
    """retention.bytes deletes the two closed segments (one ~600 KB batch each; segment.bytes at
    Kafka's 1 MiB minimum), so the log starts at 2 on both; offsets 0 and 1 are then gone."""
    configs = {"segment.bytes": "1048576", "retention.bytes": "1"}
    topics = {peer.name: peer.create_topic(unique_topic("log-start"), configs=configs) for peer in peers}
    value = b"s" * 600_000
    for peer in peers:
        for offset in range(3):
            answer = produce_answer(peer, versions[ApiKey.PRODUCE][-1], topics[peer.name], batch_of([value]))
            assert answer[:2] == ("NONE", offset), peer.name
    deadline = time.monotonic() + 30
    while any(earliest_offset(p, topics[p.name]) < 2 for p in peers):
        assert time.monotonic() < deadline, {p.name: earliest_offset(p, topics[p.name]) for p in peers}
        time.sleep(0.1)  # retention runs on each broker's own schedule (every 500 ms here)
    for offset in (0, 1, 2):
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], offset)[:5])
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} at offset {offset}"
            assert seen["pylog"][1] == ("NONE" if offset == 2 else "OFFSET_OUT_OF_RANGE")


def test_produce_with_invalid_acks_is_refused_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("acks")) for peer in peers}
    for acks in (5, 2, -2):
        seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                       batch_of([b"bad acks"]), acks=acks))
        assert seen["kafka"] == seen["pylog"], f"acks={acks}"
        assert seen["pylog"][0] == "INVALID_REQUIRED_ACKS"


def epoch_end_answer(peer, version: int, topic: str, leader_epoch: int, current_leader_epoch: int = -1,
                     partition: int = 0) -> tuple:
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic=topic, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
    with connect(peer) as raw:
        response = raw.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, request)
    [answer] = response.topics
    [result] = answer.partitions
    return ErrorCode(result.error_code).name, result.leader_epoch, result.end_offset


def test_offset_for_leader_epoch_answers_alike(peers):
    """What a consumer validating its position after a leader change (KIP-320) is told."""
    version = highest_common_version(peers, ApiKey.OFFSET_FOR_LEADER_EPOCH)
    topics = {peer.name: peer.create_topic(unique_topic("epoch-end")) for peer in peers}
    for peer in peers:
        assert produce_answer(peer, 9, topics[peer.name], batch_of([b"e"] * 4))[:2] == ("NONE", 0)
    epoch = leader_epoch(peers[1], topics["pylog"])
    cases = {
        "the current epoch": dict(leader_epoch=epoch),
        "a future epoch": dict(leader_epoch=epoch + 3),
        "current_leader_epoch ahead": dict(leader_epoch=epoch, current_leader_epoch=epoch + 1),
        "unknown partition": dict(leader_epoch=epoch, partition=5),
    }
    for case, fields in cases.items():
        seen = compare(peers, lambda p: epoch_end_answer(p, version, topics[p.name], **fields))
        assert seen["kafka"] == seen["pylog"], f"OffsetForLeaderEpoch v{version}: {case}"
    seen = compare(peers, lambda p: epoch_end_answer(p, version, unique_topic("epoch-end-missing"), 0))
    assert seen["kafka"] == seen["pylog"] == ("UNKNOWN_TOPIC_OR_PARTITION", -1, -1)


def test_min_insync_replicas_above_the_replication_factor_answers_alike(peers, versions):
    """Kafka 4 caps min.insync.replicas at the replica count (KIP-966 effectiveMinIsr), so acks=all
    to an RF=1 topic with min.insync.replicas=2 is accepted, not NOT_ENOUGH_REPLICAS."""
    topics = {peer.name: peer.create_topic(unique_topic("min-isr"), configs={"min.insync.replicas": "2"})
              for peer in peers}
    for offset, acks in enumerate((-1, 1)):
        seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                       batch_of([b"isr"]), acks=acks))
        assert seen["kafka"] == seen["pylog"], f"acks={acks}"
        assert seen["pylog"][:2] == ("NONE", offset)


def test_fetch_size_limits_at_zero_answer_alike(peers, versions):
    """KIP-74: the first partition still gets one whole batch whatever the byte limits say."""
    topics = {peer.name: peer.create_topic(unique_topic("fetch-limits")) for peer in peers}
    for peer in peers:
        for i in range(2):
            assert produce_answer(peer, versions[ApiKey.PRODUCE][-1], topics[peer.name],
                                  batch_of([b"limit-%d" % i] * 3))[0] == "NONE"
    for max_bytes, partition_max_bytes in ((0, 1 << 20), (1 << 20, 0), (0, 0), (1, 1)):
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_batches(p, version, topics[p.name], max_bytes, partition_max_bytes))
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} max {max_bytes}/{partition_max_bytes}"
            assert seen["pylog"][:2] == ("NONE", [0]), "one whole batch"


def fetch_batches(peer, version: int, topic: str, max_bytes: int, partition_max_bytes: int):
    """(error, base offsets of the whole batches returned, high watermark)."""
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[])
    with connect(peer) as raw:
        response = raw.call(ApiKey.FETCH, version, request)
    [partition] = response.responses[0].partitions
    records = bytes(partition.records or b"")
    return (ErrorCode(partition.error_code).name, [h.base_offset for _, h in iter_batches(records)],
            partition.high_watermark)


def test_a_transactional_id_with_plain_batches_is_appended_alike(peers, versions):
    """Produce carries a transactional id, its batches are not transactional: Kafka appends them."""
    topics = {peer.name: peer.create_topic(unique_topic("txn-id")) for peer in peers}
    batches = [batch_of([b"plain"]), batch_of([b"idempotent"], producer_id=3, producer_epoch=0, base_sequence=0)]
    for offset, batch in enumerate(batches):
        def observe(peer):
            request = produce_request(topics[peer.name], batch)
            request.transactional_id = "peer-tier-txn"
            with connect(peer) as raw:
                answer = produce_partition(raw, versions[ApiKey.PRODUCE][-1], request)
            return ErrorCode(answer.error_code).name, answer.base_offset
        seen = compare(peers, observe)
        assert seen["kafka"] == seen["pylog"] == ("NONE", offset)
