"""Bad CreateTopics and DeleteTopics requests sent to Apache Kafka and to pylog: the per-topic
error codes compared, at the same request versions (``validate_only`` both ways for CreateTopics).
"""

from __future__ import annotations

import uuid

import pytest
from peer_answers import compare, compared_versions, create_answer, create_topics_answer
from peer_support import unique_topic
from wire_probe import connect

from broker.wire import ApiKey, CreateTopicsRequest, DeleteTopicsRequest, ErrorCode

ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def versions(peers) -> dict[int, list[int]]:
    return compared_versions(peers)


INVALID_NAMES = ["x" * 250, "bad/name", "spaces here", "ünïcode", "tab\tname", ".", "..", ""]


def test_invalid_topic_names_are_refused_alike(peers, versions):
    valid = unique_topic("valid-beside-invalid")
    for version in versions[ApiKey.CREATE_TOPICS]:
        names = [*INVALID_NAMES, f"{valid}-v{version}"]
        seen = compare(peers, lambda p: create_topics_answer(p, version, names))
        assert seen["kafka"] == seen["pylog"], f"CreateTopics v{version}"
        assert seen["pylog"] == {**{n: "INVALID_TOPIC_EXCEPTION" for n in INVALID_NAMES},
                                 f"{valid}-v{version}": "NONE"}


def test_topic_name_colliding_by_dot_and_underscore_is_refused_alike(peers, versions):
    base = unique_topic("collide")
    version = versions[ApiKey.CREATE_TOPICS][-1]
    for peer in peers:
        peer.create_topic(f"{base}.a")
    seen = compare(peers, lambda p: create_topics_answer(p, version, [f"{base}_a"]))
    assert seen["kafka"] == seen["pylog"] == {f"{base}_a": "INVALID_TOPIC_EXCEPTION"}


def test_bad_create_topics_requests_are_refused_alike(peers, versions):
    base = unique_topic("create")
    for peer in peers:
        peer.create_topic(f"{base}-exists")
    config = CreateTopicsRequest.CreatableTopicConfig
    topics = [
        {"name": f"{base}-exists", "num_partitions": 1, "replication_factor": 1},
        {"name": f"{base}-zero-partitions", "num_partitions": 0, "replication_factor": 1},
        {"name": f"{base}-negative-partitions", "num_partitions": -5, "replication_factor": 1},
        {"name": f"{base}-rf-3-of-1", "num_partitions": 1, "replication_factor": 3},
        {"name": f"{base}-rf-0", "num_partitions": 1, "replication_factor": 0},
        {"name": f"{base}-unknown-config", "num_partitions": 1, "replication_factor": 1,
         "configs": [config(name="no.such.config", value="1")]},
        {"name": f"{base}-bad-config-value", "num_partitions": 1, "replication_factor": 1,
         "configs": [config(name="retention.ms", value="soon")]},
        {"name": f"{base}-both-counts-and-assignments", "num_partitions": 2, "replication_factor": 1,
         "assignments": [CreateTopicsRequest.CreatableReplicaAssignment(
             partition_index=0, broker_ids=[1])]},
    ]
    for version in versions[ApiKey.CREATE_TOPICS]:
        for validate_only in (True, False):
            seen = compare(peers, lambda p: create_answer(p, version, topics, validate_only))
            assert seen["kafka"] == seen["pylog"], f"CreateTopics v{version} validate_only={validate_only}"
    twice = [{"name": f"{base}-twice", "num_partitions": 1, "replication_factor": 1}] * 2
    seen = compare(peers, lambda p: create_answer(p, versions[ApiKey.CREATE_TOPICS][-1], twice))
    assert seen["kafka"] == seen["pylog"], "the same topic twice in one request"


def delete_answer(peer, version: int, names: list[str]) -> list[tuple[str, str]]:
    if version >= 6:
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=ZERO_UUID)
                                              for n in names], timeout_ms=10_000)
    else:
        request = DeleteTopicsRequest(topic_names=names, timeout_ms=10_000)
    with connect(peer) as raw:
        response = raw.call(ApiKey.DELETE_TOPICS, version, request)
    return [(r.name, ErrorCode(r.error_code).name) for r in response.responses]


def test_bad_delete_topics_requests_are_refused_alike(peers, versions):
    base = unique_topic("delete")
    cases = {
        "unknown topic": [f"{base}-never-created"],
        "invalid name": ["bad/name"],
        "the same topic twice": [f"{base}-twice", f"{base}-twice"],
    }
    for peer in peers:
        peer.create_topic(f"{base}-twice")
    for case, names in cases.items():
        version = versions[ApiKey.DELETE_TOPICS][-1]
        seen = compare(peers, lambda p: delete_answer(p, version, names))
        assert seen["kafka"] == seen["pylog"], f"DeleteTopics v{version}: {case}"
        assert all(error != "NONE" for _, error in seen["pylog"]), case
