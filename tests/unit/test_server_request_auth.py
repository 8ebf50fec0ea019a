"""broker.server.request_auth through the real dispatcher (the unit harness): Kafka's per-API
resource, operation and error; the denied part of a request never reaches a handler."""

from __future__ import annotations

import pytest

from broker.auth.acl import AccessControlEntry, AclOperation as Op, AclPermissionType as Perm, PatternType
from broker.auth.acl import ResourcePattern, ResourceType as Rt
from broker.auth.authorizer import AclIndex, Authorizer
from broker.wire import ApiKey, ErrorCode, ProduceRequest, MetadataRequest, DescribeAclsRequest
from broker.wire import FetchRequest, ListOffsetsRequest, JoinGroupRequest, InitProducerIdRequest
from test_server_harness import Harness, batch, run

ANON = "User:ANONYMOUS"


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, auto_create_topics_enable="true")
    h.add_topic("open", {0: [1]})
    h.add_topic("closed", {0: [1]})
    h.context.authorizer = Authorizer()
    yield h
    h.close()


def grant(h, resource_type, name, *ops, permission=Perm.ALLOW, pattern=PatternType.LITERAL):
    index = h.context.authorizer.index
    key = ResourcePattern(resource_type, name, pattern)
    entries = set(index.patterns().get(key, ())) | {AccessControlEntry(ANON, "*", op, permission) for op in ops}
    h.context.authorizer.update(index.with_pattern(key, entries))


def produce(*topics, transactional_id=None, acks=1):
    return ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=t, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch())]) for t in topics])


def errors(response):
    return {t.name: [p.error_code for p in t.partition_responses] for t in response.responses}


def test_produce_splits_by_topic_and_the_denied_topic_is_untouched(harness):
    grant(harness, Rt.TOPIC, "open", Op.WRITE)
    response = run(harness.call(ApiKey.PRODUCE, 9, produce("open", "closed")))
    assert errors(response) == {"open": [ErrorCode.NONE], "closed": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
    assert harness.replicas.get("open", 0).log.log_end_offset == 3
    assert harness.replicas.get("closed", 0).log.log_end_offset == 0


def test_produce_transactional_id_checked_first_and_acks0_denied_closes(harness):
    grant(harness, Rt.TOPIC, "open", Op.WRITE)
    response = run(harness.call(ApiKey.PRODUCE, 9, produce("open", transactional_id="tx")))
    assert errors(response) == {"open": [ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]}
    from broker.server.network import CloseConnection
    with pytest.raises(CloseConnection):
        run(harness.call(ApiKey.PRODUCE, 9, produce("closed", acks=0)))
    assert harness.replicas.get("open", 0).log.log_end_offset == 0


def test_metadata_all_topics_hides_named_topic_fails_and_auto_create_needs_create(harness):
    grant(harness, Rt.TOPIC, "open", Op.READ)
    everything = run(harness.call(ApiKey.METADATA, 9, MetadataRequest(topics=None)))
    assert [t.name for t in everything.topics] == ["open"]
    named = run(harness.call(ApiKey.METADATA, 9, MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name=n) for n in ("open", "closed")], allow_auto_topic_creation=True)))
    assert {t.name: t.error_code for t in named.topics} == {
        "open": ErrorCode.NONE, "closed": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    grant(harness, Rt.TOPIC, "new", Op.DESCRIBE)
    created = run(harness.call(ApiKey.METADATA, 9, MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="new")], allow_auto_topic_creation=True)))
    assert created.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # DESCRIBE but not CREATE
    assert "new" not in harness.snapshot.topics


def test_fetch_and_list_offsets_per_topic(harness):
    grant(harness, Rt.TOPIC, "open", Op.READ)
    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        FetchRequest.FetchTopic(topic=t, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]) for t in ("open", "closed")])
    response = run(harness.call(ApiKey.FETCH, 11, fetch))
    assert response.error_code == 0
    assert {t.topic: t.partitions[0].error_code for t in response.responses} == {
        "open": ErrorCode.NONE, "closed": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    follower = run(harness.call(ApiKey.FETCH, 11, FetchRequest(**{**fetch.to_dict(), "replica_id": 2,
                                                                   "topics": fetch.topics})))
    assert {p.error_code for t in follower.responses for p in t.partitions} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    offsets = run(harness.call(ApiKey.LIST_OFFSETS, 7, ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])
        for t in ("open", "closed")])))
    assert {t.name: t.partitions[0].error_code for t in offsets.topics} == {
        "open": ErrorCode.NONE, "closed": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_group_idempotence_and_acl_admin_errors(harness):
    join = run(harness.call(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
        group_id="g", session_timeout_ms=6000, rebalance_timeout_ms=6000, member_id="", protocol_type="consumer",
        protocols=[])))
    assert join.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    idempotent = run(harness.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000)))
    assert idempotent.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(harness, Rt.TOPIC, "open", Op.WRITE)  # KIP-679: WRITE on any topic will do
    assert run(harness.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000))).error_code == ErrorCode.NONE
    grant(harness, Rt.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)
    describe = run(harness.call(ApiKey.DESCRIBE_ACLS, 2, DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)))
    assert describe.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(harness, Rt.CLUSTER, "kafka-cluster", Op.ALTER)  # ALTER implies DESCRIBE
    describe = run(harness.call(ApiKey.DESCRIBE_ACLS, 2, DescribeAclsRequest(
        resource_type_filter=2, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)))
    assert describe.error_code == ErrorCode.NONE
    assert [r.resource_name for r in describe.resources] == ["open"]


def test_without_an_authorizer_acl_apis_answer_security_disabled(harness):
    harness.context.authorizer = None
    describe = run(harness.call(ApiKey.DESCRIBE_ACLS, 2, DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)))
    assert describe.error_code == ErrorCode.SECURITY_DISABLED


def test_every_served_api_has_a_rule():
    """A new API falls back to ALTER on the cluster (fail closed); this names the ones that do,
    so adding an API means deciding its rule."""
    from broker.server.request_auth import RULES
    from broker.wire import SUPPORTED_API_VERSIONS
    assert sorted(int(k) for k in SUPPORTED_API_VERSIONS if int(k) not in RULES) == []


def test_describe_cluster_answers_this_principals_operations(harness):
    from broker.wire import DescribeClusterRequest
    grant(harness, Rt.CLUSTER, "kafka-cluster", Op.ALTER, Op.IDEMPOTENT_WRITE)
    response = run(harness.call(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(
        include_cluster_authorized_operations=True)))
    # ALTER (7), DESCRIBE (8, implied by ALTER), IDEMPOTENT_WRITE (12)
    assert response.cluster_authorized_operations == (1 << 7) | (1 << 8) | (1 << 12)


def test_batched_names_split_by_entry_and_the_denied_ones_never_reach_the_handler(harness):
    """DeleteTopics v5 (topic_names) and FindCoordinator v4 (coordinator_keys) share _split."""
    grant(harness, Rt.TOPIC, "open", Op.DELETE)
    deleted = run(harness.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["open", "closed"], "timeout_ms": 1000}))
    assert {r.name: r.error_code for r in deleted.responses} == {
        "open": ErrorCode.NONE, "closed": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    assert "closed" in harness.snapshot.topics and "open" not in harness.snapshot.topics
    grant(harness, Rt.GROUP, "g1", Op.DESCRIBE)
    found = run(harness.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]}))
    codes = {c.key: c.error_code for c in found.coordinators}
    assert codes["g2"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert codes["g1"] != ErrorCode.GROUP_AUTHORIZATION_FAILED
