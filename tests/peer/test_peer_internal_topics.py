"""Internal topics compared with Apache Kafka 4.1: FindCoordinator creates ``__consumer_offsets``
and ``__transaction_state`` (the same partition count and replication factor on both, marked
internal in Metadata), a client's Produce to them and CreateTopics of their names get the same
error codes. Both peers run one broker with internal replication factor 1 (``peer_support
.internal_topic_settings``).

FindCoordinator of a group (issue 14) and of a transactional id (issue 15) are answered alike:
with the coordinator once the topic's leaders exist.

Named differences, pinned here so a change on either side shows up:
- DeleteTopics of an internal topic: Kafka 4.1 deletes it (0); pylog refuses with
  INVALID_TOPIC_EXCEPTION (17) (why: ``broker/server/handlers/delete_topics.py``). The test
  deletes Kafka's ``__transaction_state`` and has it created again before it ends.
"""

from __future__ import annotations

import time

import pytest
from wire_probe import answer_or_close, batch_of, connect, highest_common_version, produce_partition, produce_request

from broker.wire import (
    ApiKey,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ErrorCode,
    FindCoordinatorRequest,
    MetadataRequest,
)

OFFSETS, TXN = "__consumer_offsets", "__transaction_state"
KEY_TYPES = {OFFSETS: 0, TXN: 1}
CREATION_TIMEOUT_S = 60.0


def find_coordinator(peer, key_type: int) -> int:
    request = FindCoordinatorRequest(key="peer-group", key_type=key_type, coordinator_keys=["peer-group"])
    with connect(peer) as raw:
        response = raw.call(ApiKey.FIND_COORDINATOR, 4, request)
    return response.coordinators[0].error_code


def metadata(peer, names: list[str]) -> dict:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                              allow_auto_topic_creation=False)
    with connect(peer) as raw:
        response = raw.call(ApiKey.METADATA, 9, request)
    return {t.name: t for t in response.topics}


def led(topic) -> bool:
    return topic.error_code == ErrorCode.NONE and all(p.error_code == ErrorCode.NONE for p in topic.partitions)


def create_by_find_coordinator(peer, name: str) -> list[int]:
    """FindCoordinator until ``name`` exists with a leader per partition; the answers seen."""
    answers = []
    deadline = time.monotonic() + CREATION_TIMEOUT_S
    while True:
        answers.append(find_coordinator(peer, KEY_TYPES[name]))
        if led(metadata(peer, [name])[name]):
            return answers
        assert time.monotonic() < deadline, f"{peer}: {name} was not created"
        time.sleep(0.25)


@pytest.fixture(scope="module")
def internal(peers):
    """Both internal topics exist on both peers; the first FindCoordinator answer of each."""
    return {(peer.name, name): create_by_find_coordinator(peer, name)[0]
            for peer in peers for name in (OFFSETS, TXN)}


def test_find_coordinator_creates_both_topics_alike(peers, internal):
    shapes = {}
    for peer in peers:
        topics = metadata(peer, [OFFSETS, TXN])
        shapes[peer.name] = {n: (t.is_internal, len(t.partitions), {len(p.replica_nodes) for p in t.partitions})
                             for n, t in topics.items()}
    assert shapes["kafka"] == shapes["pylog"] == {OFFSETS: (True, 50, {1}), TXN: (True, 50, {1})}
    # Once the leaders exist both peers name a coordinator for a group and a transactional id.
    answers = {peer.name: [find_coordinator(peer, t) for t in (0, 1)] for peer in peers}
    assert answers["kafka"] == answers["pylog"] == [ErrorCode.NONE] * 2


@pytest.mark.parametrize("name", [OFFSETS, TXN])
def test_produce_to_an_internal_topic_is_refused_alike(peers, internal, name):
    version = highest_common_version(peers, ApiKey.PRODUCE)
    seen = {}
    for peer in peers:
        with connect(peer) as raw:
            refused = produce_partition(raw, version, produce_request(name, batch_of([b"v"])))
            missing = produce_partition(raw, version, produce_request(name, batch_of([b"v"]), partition=999))
        seen[peer.name] = (refused.error_code, refused.base_offset, missing.error_code)
    assert seen["kafka"] == seen["pylog"] == (
        ErrorCode.INVALID_TOPIC_EXCEPTION, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_produce_with_acks_0_to_an_internal_topic_closes_the_connection_alike(peers, internal):
    version = highest_common_version(peers, ApiKey.PRODUCE)
    seen = {}
    for peer in peers:
        with connect(peer) as raw:
            raw.send(ApiKey.PRODUCE, version, produce_request(OFFSETS, batch_of([b"v"]), acks=0))
            seen[peer.name] = answer_or_close(raw)
    assert seen == {"kafka": "closed", "pylog": "closed"}


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_topics_of_an_existing_internal_name_is_refused_alike(peers, internal, validate_only):
    topic = CreateTopicsRequest.CreatableTopic(name=OFFSETS, num_partitions=3, replication_factor=1,
                                               assignments=[], configs=[])
    request = CreateTopicsRequest(topics=[topic], timeout_ms=10_000, validate_only=validate_only)
    codes = {}
    for peer in peers:
        with connect(peer) as raw:
            [result] = raw.call(ApiKey.CREATE_TOPICS, 5, request).topics
        codes[peer.name] = result.error_code
    assert codes == {"kafka": ErrorCode.TOPIC_ALREADY_EXISTS, "pylog": ErrorCode.TOPIC_ALREADY_EXISTS}


def test_delete_topics_of_an_internal_topic_is_a_named_difference(peers, internal):
    request = DeleteTopicsRequest(topic_names=[TXN], timeout_ms=10_000)
    codes = {}
    for peer in peers:
        with connect(peer) as raw:
            [result] = raw.call(ApiKey.DELETE_TOPICS, 5, request).responses
        codes[peer.name] = result.error_code
    kafka, pylog = peers
    create_by_find_coordinator(kafka, TXN)  # leave Kafka's cluster as the other tests found it
    assert codes == {"kafka": ErrorCode.NONE, "pylog": ErrorCode.INVALID_TOPIC_EXCEPTION}
    assert led(metadata(pylog, [TXN])[TXN])



@pytest.mark.parametrize("key_type", [2, 9])
def test_find_coordinator_with_another_key_type_is_invalid_request_alike(peers, key_type):
    """2 is Kafka's share coordinator (FindCoordinator v6+ only); 9 is no type at all."""
    assert [find_coordinator(peer, key_type) for peer in peers] == [ErrorCode.INVALID_REQUEST] * 2
