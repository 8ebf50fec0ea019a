"""AdminClient against the in-memory cluster: topics, typed errors, controller routing, offsets."""

from __future__ import annotations

import pytest

from broker.client.admin import AdminClient
from broker.client.config import ClientConfig
from broker.client.errors import KafkaError
from broker.client.offsets import offset_spec_timestamp
from fake_kafka import Fault, InMemoryKafka
from broker.records import Record, encode_batch
from broker.wire import SUPPORTED_API_VERSIONS, ApiKey, ErrorCode

FAST = ClientConfig(request_timeout_ms=2000, connect_timeout_ms=1000, retry_backoff_ms=10)


@pytest.fixture
def kafka():
    with InMemoryKafka(brokers=3, controller_id=2) as k:
        yield k
        assert k.handler_errors == []


@pytest.fixture
def admin(kafka):
    with AdminClient(kafka.brokers[0].address, config=FAST) as client:
        yield client


def test_create_describe_list_delete(kafka, admin):
    admin.create_topics("orders", partitions=3, replication_factor=1, config={"retention.ms": "1000"})
    # Sent to the controller (broker 2), not to the bootstrap broker.
    assert kafka.brokers[2].requests_for(ApiKey.CREATE_TOPICS)
    assert not kafka.brokers[0].requests_for(ApiKey.CREATE_TOPICS)
    (header, request), = kafka.brokers[2].requests_for(ApiKey.CREATE_TOPICS)
    topic = request.topics[0]
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("orders", 3, 1)
    assert [(c.name, c.value) for c in topic.configs] == [("retention.ms", "1000")]

    assert admin.list_topics() == ["orders"]
    (desc,) = admin.describe_topics(["orders"])
    assert [(p.partition, p.leader, p.replicas, p.isr) for p in desc.partitions] == [
        (0, 0, (0,), (0,)), (1, 1, (1,), (1,)), (2, 2, (2,), (2,))]
    assert desc.replication_factor == 1
    assert admin.describe_configs("orders") == {"retention.ms": "1000"}

    admin.delete_topics("orders")
    assert admin.list_topics() == []


@pytest.mark.parametrize("kwargs, code", [
    ({"partitions": 0, "replication_factor": 1}, ErrorCode.INVALID_PARTITIONS),
    ({"partitions": 1, "replication_factor": 9}, ErrorCode.INVALID_REPLICATION_FACTOR),
])
def test_create_errors_are_typed_with_the_brokers_message(admin, kwargs, code):
    with pytest.raises(KafkaError) as info:
        admin.create_topics("bad", **kwargs)
    assert info.value.code == code and info.value.name == ErrorCode(code).name
    assert "'bad'" in str(info.value) and not info.value.retriable


def test_topic_already_exists(kafka, admin):
    kafka.create_topic("orders", 1)
    with pytest.raises(KafkaError) as info:
        admin.create_topics("orders", 1, 1)
    assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert str(info.value).startswith("TOPIC_ALREADY_EXISTS (36): topic 'orders'")


def test_not_controller_is_retried_after_a_metadata_refresh(kafka, admin):
    kafka.inject(Fault(ApiKey.CREATE_TOPICS, code=ErrorCode.NOT_CONTROLLER))
    admin.create_topics("orders", 1, 1)
    assert len(kafka.brokers[2].requests_for(ApiKey.CREATE_TOPICS)) == 2
    assert "orders" in kafka.topics


def test_default_partitions_need_create_topics_v4(kafka):
    versions = dict(SUPPORTED_API_VERSIONS)
    versions[ApiKey.CREATE_TOPICS] = (0, 3)
    kafka.api_versions = versions
    with AdminClient(kafka.bootstrap, config=FAST) as admin:
        with pytest.raises(KafkaError) as info:
            admin.create_topics("orders")  # -1 / -1: broker defaults
        assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
        admin.create_topics("orders", 2, 1)  # explicit values work with v3
        (header, _), = kafka.brokers[2].requests_for(ApiKey.CREATE_TOPICS)
        assert header.api_version == 3


def test_delete_unknown_topic_raises(admin):
    with pytest.raises(KafkaError) as info:
        admin.delete_topics("nope")
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_unknown_topic_raises(admin):
    with pytest.raises(KafkaError) as info:
        admin.describe_topics(["nope"])
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_earliest_latest_and_by_timestamp(kafka, admin):
    kafka.create_topic("t", 2)
    records = [Record(i, 1000 + 10 * i, None, b"v") for i in range(5)]
    kafka.append_raw("t", 0, encode_batch(records))
    kafka.delete_records("t", 1, 0)
    assert admin.list_offsets("t", spec="earliest") == {0: 0, 1: 0}
    assert admin.list_offsets("t", spec="latest") == {0: 5, 1: 0}
    assert admin.list_offsets("t", [0], spec=1025) == {0: 3}  # first record with ts >= 1025
    assert admin.list_offsets("t", [0], spec=10_000) == {0: -1}  # none: -1, as Kafka answers
    # Each partition went to its own leader.
    assert kafka.brokers[0].requests_for(ApiKey.LIST_OFFSETS)
    assert kafka.brokers[1].requests_for(ApiKey.LIST_OFFSETS)


def test_list_offsets_follows_a_moved_leader(kafka, admin):
    kafka.create_topic("t", 1)
    kafka.append_raw("t", 0, encode_batch([Record(0, 1, None, b"v")]))
    assert admin.list_offsets("t") == {0: 1}
    kafka.set_leader("t", 0, 1)  # the client's cache still says broker 0
    assert admin.list_offsets("t") == {0: 1}
    assert kafka.brokers[1].requests_for(ApiKey.LIST_OFFSETS)


@pytest.mark.parametrize("spec, expected", [
    ("earliest", -2), ("latest", -1), ("LATEST", -1), (0, 0), ("1700000000000", 1_700_000_000_000),
])
def test_offset_specs(spec, expected):
    assert offset_spec_timestamp(spec) == expected


@pytest.mark.parametrize("spec", ["soon", -5, "", True])
def test_bad_offset_specs(spec):
    with pytest.raises(ValueError):
        offset_spec_timestamp(spec)
