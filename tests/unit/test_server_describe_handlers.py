"""DescribeCluster (60), DescribeTopicPartitions (75) and ListPartitionReassignments (46): the
admin APIs Kafka 4's Java admin client asks (kafka-topics --describe, kafka-configs --entity-type
brokers), through the real codec and dispatcher over a hand-made cluster snapshot."""

from __future__ import annotations

import pytest
from test_server_harness import Harness, run

from broker.wire import ErrorCode

DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS, LIST_REASSIGNMENTS = 60, 75, 46


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2))
    h.add_topic("beta", {0: [1, 2], 1: [2, 1], 2: [1, 3]}, leaders={2: 3})  # broker 3 is not live
    h.add_topic("alpha", {0: [1]})
    h.add_topic("__consumer_offsets", {0: [2]})
    yield h
    h.close()


# ------------------------------------------------------------------------ DescribeCluster


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_lists_live_brokers_and_the_controller(harness, version):
    request = {"include_cluster_authorized_operations": False, "endpoint_type": 1,
               "include_fenced_brokers": True}
    response = run(harness.call(DESCRIBE_CLUSTER, version, request))
    assert (response.error_code, response.cluster_id, response.controller_id) == (0, "test-cluster", 1)
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in response.brokers] == [
        (1, "host1", 9091, None, False), (2, "host2", 9092, None, False)]
    assert response.endpoint_type == 1
    assert response.cluster_authorized_operations == -(2**31)


@pytest.mark.parametrize("endpoint_type, error", [
    (2, ErrorCode.MISMATCHED_ENDPOINT_TYPE), (0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
    (7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)])
def test_describe_cluster_serves_only_the_broker_endpoint_type(harness, endpoint_type, error):
    response = run(harness.call(DESCRIBE_CLUSTER, 1, {"endpoint_type": endpoint_type}))
    assert response.error_code == error and response.error_message
    assert response.brokers == []


# --------------------------------------------------------------- DescribeTopicPartitions


def describe(h: Harness, topics, limit: int = 2000, cursor: tuple[str, int] | None = None):
    request = {"topics": [{"name": t} for t in topics], "response_partition_limit": limit,
               "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}}
    return run(h.call(DESCRIBE_TOPIC_PARTITIONS, 0, request))


def shape(response):
    """(topic, error, [partition indexes]) per topic, and the next cursor."""
    topics = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]
    cursor = response.next_cursor
    return topics, None if cursor is None else (cursor.topic_name, cursor.partition_index)


def test_all_topics_in_name_order_with_partition_details(harness):
    response = describe(harness, [])
    assert shape(response) == ([("__consumer_offsets", 0, [0]), ("alpha", 0, [0]), ("beta", 0, [0, 1, 2])], None)
    internal = {t.name: t.is_internal for t in response.topics}
    assert internal == {"__consumer_offsets": True, "alpha": False, "beta": False}
    beta = response.topics[2].partitions
    assert [(p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
            for p in beta] == [
        (0, 1, 0, [1, 2], [1, 2], []),
        (0, 2, 0, [2, 1], [2, 1], []),
        (ErrorCode.LEADER_NOT_AVAILABLE, -1, 0, [1, 3], [1, 3], [3]),
    ]
    # No eligible leader replicas in ZooKeeper mode: empty lists (Kafka 4's answer for a full
    # ISR), never null, so the Java admin client prints "Elr: " as it does for Kafka.
    assert all(p.eligible_leader_replicas == [] and p.last_known_elr == [] for p in beta)


def test_named_topics_missing_and_invalid(harness):
    topics, cursor = shape(describe(harness, ["beta", "nope", "bad name", "alpha", "beta"]))
    assert topics == [("alpha", 0, [0]), ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION, []),
                      ("beta", 0, [0, 1, 2]), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])]
    assert cursor is None


@pytest.mark.parametrize("limit, expected", [
    (1, ([("__consumer_offsets", 0, [0])], ("alpha", 0))),       # budget ends with a topic
    (3, ([("__consumer_offsets", 0, [0]), ("alpha", 0, [0]), ("beta", 0, [0])], ("beta", 1))),
    (5, ([("__consumer_offsets", 0, [0]), ("alpha", 0, [0]), ("beta", 0, [0, 1, 2])], None)),
    (0, ([], ("__consumer_offsets", 0))),
])
def test_paging_by_partition_limit(harness, limit, expected):
    assert shape(describe(harness, [], limit=limit)) == expected


def test_paging_walks_every_partition_once(harness):
    seen, cursor = [], None
    for _ in range(10):
        topics, cursor = shape(describe(harness, [], limit=2, cursor=cursor))
        seen += [(name, index) for name, _, indexes in topics for index in indexes]
        if cursor is None:
            break
    assert seen == [("__consumer_offsets", 0), ("alpha", 0), ("beta", 0), ("beta", 1), ("beta", 2)]


def test_cursor_starts_inside_its_topic(harness):
    assert shape(describe(harness, ["alpha", "beta"], cursor=("beta", 1))) == ([("beta", 0, [1, 2])], None)
    assert shape(describe(harness, [], cursor=("b", 0))) == ([("beta", 0, [0, 1, 2])], None)


def test_cursor_topic_must_be_among_the_named_topics(harness):
    response = describe(harness, ["alpha"], cursor=("beta", 0))
    assert shape(response) == ([("alpha", ErrorCode.INVALID_REQUEST, [])], None)


# ------------------------------------------------------------- ListPartitionReassignments


@pytest.mark.parametrize("topics", [None, [{"name": "beta", "partition_indexes": [0, 2]}],
                                    [{"name": "nope", "partition_indexes": [0]}]])
def test_an_idle_controller_lists_no_reassignment(harness, topics):
    response = run(harness.call(LIST_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": topics}))
    assert (response.error_code, response.error_message, response.topics) == (0, None, [])


def test_only_the_controller_lists_reassignments(harness):
    harness.controller.active = False
    response = run(harness.call(LIST_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None}))
    assert (response.error_code, response.topics) == (ErrorCode.NOT_CONTROLLER, [])
