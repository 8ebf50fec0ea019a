"""Internal topics (``__consumer_offsets``, ``__transaction_state``): the broker settings, the
replication factor rule, the controller path in the simulator's ZooKeeper, and what FindCoordinator,
Metadata, Produce and DeleteTopics do with them (through the real dispatcher, ``Harness``)."""

from __future__ import annotations

from collections import Counter
from random import Random

import pytest
from test_controller_core import World, leaders
from test_server_harness import Harness, batch, run

from broker.cluster.internal_topics import (
    GROUP_METADATA_TOPIC_NAME as OFFSETS,
    TRANSACTION_STATE_TOPIC_NAME as TXN,
    InternalTopicsConfig,
    internal_topic_spec,
    is_internal,
    topic_for_key_type,
)
from broker.cluster.layout import PartitionState
from broker.server.config import BrokerConfig, ConfigError
from broker.server.internal_topics import plan_internal_topic
from broker.wire import ErrorCode

PRODUCE, METADATA, DELETE, FIND_COORD = 0, 3, 20, 10
BASE = {"broker.id": "0", "zookeeper.connect": "zk:2181"}


# ---------------------------------------------------------------------------- broker settings


def test_settings_default_to_kafkas():
    config = BrokerConfig.from_properties(BASE).internal_topics
    assert config == InternalTopicsConfig(50, 3, 104_857_600, 50, 3, 2, 104_857_600)


def test_settings_are_read_and_known():
    props = {**BASE, "offsets.topic.num.partitions": "7", "offsets.topic.replication.factor": "1",
             "offsets.topic.segment.bytes": "1024", "transaction.state.log.num.partitions": "5",
             "transaction.state.log.replication.factor": "2", "transaction.state.log.min.isr": "1",
             "transaction.state.log.segment.bytes": "2048"}
    config = BrokerConfig.from_properties(props)
    assert config.internal_topics == InternalTopicsConfig(7, 1, 1024, 5, 2, 1, 2048)
    assert config.unknown_keys == ()  # no "isn't a known config" warning at start


@pytest.mark.parametrize("key,value", [
    ("offsets.topic.num.partitions", "0"), ("offsets.topic.replication.factor", "0"),
    ("offsets.topic.replication.factor", "32768"), ("offsets.topic.segment.bytes", "0"),
    ("transaction.state.log.num.partitions", "-1"), ("transaction.state.log.replication.factor", "x"),
    ("transaction.state.log.min.isr", "0"), ("transaction.state.log.segment.bytes", "2147483648"),
])
def test_settings_outside_kafkas_bounds_stop_the_broker(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties({**BASE, key: value})


# ------------------------------------------------------------------------- names and specs


def test_names_and_key_types():
    assert is_internal(OFFSETS) and is_internal(TXN)
    assert not is_internal("consumer_offsets") and not is_internal(None)
    assert [topic_for_key_type(t) for t in (0, 1, 2, -1)] == [OFFSETS, TXN, None, None]


def test_specs_carry_kafkas_topic_configs():
    config = InternalTopicsConfig(offsets_topic_segment_bytes=1000, transaction_state_log_min_isr=3)
    offsets = internal_topic_spec(OFFSETS, config)
    assert (offsets.partitions, offsets.replication_factor) == (50, 3)
    assert dict(offsets.configs) == {"cleanup.policy": "compact", "compression.type": "producer",
                                     "segment.bytes": "1000"}
    txn = internal_topic_spec(TXN, config)
    assert (txn.partitions, txn.replication_factor) == (50, 3)
    assert dict(txn.configs) == {"cleanup.policy": "compact", "compression.type": "uncompressed",
                                 "min.insync.replicas": "3", "segment.bytes": "104857600",
                                 "unclean.leader.election.enable": "false"}


# ------------------------------------------------------------------ the replication factor rule


@pytest.mark.parametrize("live,factor,created", [
    ([], 1, False), ([1], 3, False), ([1, 2], 3, False), ([1, 2, 3], 3, True),
    ([4, 1, 2, 3], 3, True), ([1], 1, True),
])
def test_created_only_when_enough_brokers_are_live(live, factor, created):
    spec = internal_topic_spec(OFFSETS, InternalTopicsConfig(offsets_topic_replication_factor=factor))
    plan = plan_internal_topic(spec, live, Random(0))
    assert (plan.assignment is not None) == created
    if not created:  # never RF = min(configured, live)
        assert f"Number of alive brokers '{len(live)}'" in plan.refusal
        assert "offsets.topic.replication.factor" in plan.refusal


def test_assignment_spreads_leaders_and_replicas():
    spec = internal_topic_spec(TXN, InternalTopicsConfig())
    plan = plan_internal_topic(spec, [3, 1, 2], Random(7))
    assert sorted(plan.assignment) == list(range(50))
    assert all(len(set(r)) == 3 and set(r) == {1, 2, 3} for r in plan.assignment.values())
    first = Counter(r[0] for r in plan.assignment.values())
    assert max(first.values()) - min(first.values()) <= 1  # preferred leaders round-robin
    assert "transaction.state.log.replication.factor" in plan_internal_topic(spec, [1], Random(0)).refusal


# ------------------------------------------------------------------------- the controller path


def test_controller_elects_a_leader_for_every_partition_of_a_new_internal_topic():
    """The plan goes through the same ZooKeeper writes as any topic; the controller's topic
    event then writes every partition's state and tells each broker what it leads."""
    world = World(brokers=(1, 2, 3))
    core, _ = world.controller(1)
    spec = internal_topic_spec(OFFSETS, InternalTopicsConfig())
    plan = plan_internal_topic(spec, world.clients[1].get_broker_ids(), Random(3))
    world.clients[2].create_topic(OFFSETS, plan.assignment, dict(spec.configs))  # any broker writes
    sends = core.on_topic_change()
    assert world.zk.configs[OFFSETS]["cleanup.policy"] == "compact"
    for p, replicas in plan.assignment.items():
        assert world.state(OFFSETS, p) == PartitionState(replicas[0], 0, tuple(replicas), 1)
    led = {b: {tp for tp, (leader, _, _) in leaders(sends, b).items() if leader == b} for b in (1, 2, 3)}
    assert sum(len(v) for v in led.values()) == 50 and all(len(v) in (16, 17) for v in led.values())


# ------------------------------------------------------------------ handlers, through dispatch


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1,), offsets_topic_replication_factor="1",
                transaction_state_log_replication_factor="1", offsets_topic_num_partitions="4")
    yield h
    h.close()


def find_coordinator(h: Harness, key_type: int = 0, version: int = 4, keys=("g",), answers: bool = False):
    request = {"key": keys[0] if keys else "", "key_type": key_type, "coordinator_keys": list(keys)}
    response = run(h.call(FIND_COORD, version, request))
    if answers:
        found = response.coordinators if version >= 4 else [response]
        return [(c.node_id, c.host, c.port, c.error_code) for c in found]
    return [c.error_code for c in response.coordinators] if version >= 4 else [response.error_code]


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator_creates_the_offsets_topic_then_names_the_partitions_leader(harness, version):
    assert find_coordinator(harness, 0, version) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    topic = harness.snapshot.topics[OFFSETS]
    assert len(topic.partitions) == 4 and dict(topic.config)["cleanup.policy"] == "compact"
    assert find_coordinator(harness, 0, version, answers=True) == [(1, "host1", 9091, ErrorCode.NONE)]
    assert harness.controller.created == [OFFSETS]  # asked once: the second saw it in metadata


def test_find_coordinator_names_the_leader_of_the_groups_partition(tmp_path):
    """partition_for("g", 4) == 3 and partition_for("a", 4) == 1 (Java's hashCode: 103, 97):
    the leaders of those partitions answer; a partition without a live leader is unavailable."""
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2, 3), offsets_topic_num_partitions="4")
    try:
        h.add_topic(OFFSETS, {0: [1], 1: [2], 2: [1], 3: [3]}, leaders={3: 4})  # broker 4 is not live
        assert find_coordinator(h, 0, 4, keys=("g", "a"), answers=True) == [
            (-1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE), (2, "host2", 9092, ErrorCode.NONE)]
        assert find_coordinator(h, 0, 3, keys=("a",), answers=True) == [(2, "host2", 9092, ErrorCode.NONE)]
        assert find_coordinator(h, 1, 4, keys=("t",)) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
        assert h.controller.created == [TXN]
    finally:
        h.close()


def test_find_coordinator_for_a_transaction_creates_the_transaction_topic(harness):
    assert find_coordinator(harness, 1) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
    assert harness.controller.created == [TXN]
    assert dict(harness.snapshot.topics[TXN].config)["min.insync.replicas"] == "2"
    assert len(harness.snapshot.topics[TXN].partitions) == 50


def test_find_coordinator_creates_nothing_with_too_few_brokers(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2))  # default replication factor 3
    try:
        assert find_coordinator(h, 0) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
        assert find_coordinator(h, 1, version=3) == [ErrorCode.COORDINATOR_NOT_AVAILABLE]
        assert h.controller.created == [] and OFFSETS not in h.snapshot.topics
    finally:
        h.close()


def test_find_coordinator_without_keys_or_with_an_unknown_key_type(harness):
    assert find_coordinator(harness, 0, keys=()) == []
    assert find_coordinator(harness, 2) == [ErrorCode.INVALID_REQUEST]
    assert find_coordinator(harness, 5, version=3) == [ErrorCode.INVALID_REQUEST]
    assert harness.controller.created == []


def test_metadata_marks_internal_topics(harness):
    find_coordinator(harness, 0)
    harness.add_topic("events", {0: [1]})
    response = run(harness.call(METADATA, 9, {"topics": None, "allow_auto_topic_creation": False}))
    assert {t.name: t.is_internal for t in response.topics} == {OFFSETS: True, "events": False}


def test_metadata_auto_creation_of_an_internal_topic_uses_its_spec(tmp_path):
    h = Harness(tmp_path, brokers=(1,), auto_create_topics_enable="true",
                offsets_topic_replication_factor="1", num_partitions="2")
    try:
        request = {"topics": [{"name": OFFSETS}], "allow_auto_topic_creation": True}
        [topic] = run(h.call(METADATA, 9, request)).topics
        assert (topic.error_code, topic.is_internal) == (ErrorCode.LEADER_NOT_AVAILABLE, True)
        assert len(h.snapshot.topics[OFFSETS].partitions) == 50  # not num.partitions
    finally:
        h.close()


def produce(h: Harness, topic: str, partition: int, acks: int = -1):
    request = {"transactional_id": None, "acks": acks, "timeout_ms": 1000,
               "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch()}]}]}
    response = run(h.call(PRODUCE, 9, request))
    return response.responses[0].partition_responses[0] if response is not None else None


def test_produce_to_an_internal_topic_is_refused_as_kafka_refuses_it(harness):
    assert produce(harness, OFFSETS, 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # not yet
    find_coordinator(harness, 0)
    refused = produce(harness, OFFSETS, 0)
    assert (refused.error_code, refused.error_message, refused.base_offset) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION, None, -1)
    assert harness.replicas.get(OFFSETS, 0).log.log_end_offset == 0  # nothing appended
    assert produce(harness, OFFSETS, 99).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_to_an_internal_partition_led_elsewhere_is_still_invalid_topic(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2))
    try:
        h.add_topic(TXN, {0: [2]})  # broker 2 leads: Kafka refuses before it looks at leadership
        assert produce(h, TXN, 0).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    finally:
        h.close()


@pytest.mark.parametrize("version", [1, 5, 6])
def test_delete_topics_refuses_internal_topics(harness, version):
    find_coordinator(harness, 1)
    harness.add_topic("events", {0: [1]})
    if version >= 6:
        ids = {n: harness.snapshot.topics[n].topic_id for n in (TXN, "events")}
        request = {"topics": [{"name": n, "topic_id": ids[n]} for n in (TXN, "events")], "timeout_ms": 0}
    else:
        request = {"topic_names": [TXN, "events"], "timeout_ms": 0}
    response = run(harness.call(DELETE, version, request))
    codes = {r.name: r.error_code for r in response.responses}
    assert codes == {TXN: ErrorCode.INVALID_TOPIC_EXCEPTION, "events": ErrorCode.NONE}
    assert TXN in harness.snapshot.topics and "events" not in harness.snapshot.topics


# ------------------------------------------------------------------------------ pylog cluster up


@pytest.mark.parametrize("brokers,factor,min_isr", [(1, "1", "1"), (2, "2", "2"), (5, "3", "2")])
def test_cluster_up_sizes_the_internal_topics_to_the_cluster(tmp_path, brokers, factor, min_isr):
    from broker.server.config import parse_properties
    from broker.tools.cluster import ClusterDir, ClusterSpec, render_broker_config

    spec = ClusterSpec(brokers, 19092, 12181)
    props = parse_properties(render_broker_config(ClusterDir(tmp_path), spec, 0))
    assert (props["offsets.topic.replication.factor"], props["transaction.state.log.replication.factor"],
            props["transaction.state.log.min.isr"]) == (factor, factor, min_isr)
    overridden = ClusterSpec(1, 19092, 12181, {"offsets.topic.replication.factor": "3"})
    props = parse_properties(render_broker_config(ClusterDir(tmp_path), overridden, 0))
    assert props["offsets.topic.replication.factor"] == "3"  # --set wins


@pytest.mark.parametrize("name", [OFFSETS, TXN])
def test_a_user_may_create_a_topic_with_an_internal_name_before_first_use(harness, name):
    """Kafka 4.1 accepts it (validate-only 0 in the peer tier's probe); once it exists both
    answer TOPIC_ALREADY_EXISTS (tests/peer/test_peer_internal_topics.py)."""
    topic = {"name": name, "num_partitions": 3, "replication_factor": 1, "assignments": [], "configs": []}
    response = run(harness.call(19, 5, {"topics": [topic], "timeout_ms": 0, "validate_only": True}))
    assert response.topics[0].error_code == ErrorCode.NONE
    find_coordinator(harness, 0 if name == OFFSETS else 1)
    response = run(harness.call(19, 5, {"topics": [topic], "timeout_ms": 0, "validate_only": False}))
    assert response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
