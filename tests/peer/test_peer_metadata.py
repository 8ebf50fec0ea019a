"""ApiVersions and Metadata as a client reads them, from Apache Kafka and from pylog.

ApiVersions: for every API both advertise, the ranges overlap (clients negotiate the highest
version in both) and pylog never claims a version newer than the reference. Metadata: the same
request (a topic of 3 partitions, an unknown topic, with and without authorized operations) at
every version both serve, reduced to what a client depends on: node ids are compared as indexes
into the broker list (Kafka's node ids start at 1, pylog's at its broker.id), ids by whether they
are set, never by value.
"""

from __future__ import annotations

import time
import uuid

from peer_support import unique_topic

from broker.client.connection import BrokerConnection
from broker.wire import ApiKey

# Intended difference: pylog is a ZooKeeper-mode cluster whose brokers send each other Kafka 2.x's
# controller requests; Apache Kafka 4 (KRaft only) no longer has these APIs.
PYLOG_ONLY_APIS = {ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                   ApiKey.CONTROLLED_SHUTDOWN}
ZERO_UUID = uuid.UUID(int=0)


def connection(peer) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", peer.ports[0])


def advertised(peer) -> dict[int, tuple[int, int]]:
    with connection(peer) as conn:
        conn.connect()
        return dict(conn.broker_api_versions)


def test_api_versions_of_shared_apis_overlap_and_pylog_claims_nothing_newer(peers):
    kafka, pylog = (advertised(peer) for peer in peers)
    # Intended difference: pylog advertises only the APIs it serves (no transactions, ACLs,
    # KIP-848 consumer groups or KRaft APIs yet), so Kafka's list is longer; the ZooKeeper-mode
    # ones are pylog's own. The classic group APIs are advertised as Kafka 4.1 advertises them,
    # up to the versions pylog parses.
    assert set(pylog) - set(kafka) == PYLOG_ONLY_APIS
    for key in sorted(set(pylog) & set(kafka)):
        (k_low, k_high), (p_low, p_high) = kafka[key], pylog[key]
        assert max(k_low, p_low) <= min(k_high, p_high), (key, kafka[key], pylog[key])
        assert p_high <= k_high, f"pylog claims {key} v{p_high}, Apache Kafka 4.1 stops at v{k_high}"
    # Intended difference: ListOffsets from v0 (Kafka 4 from v1, KIP-896): Burrow 1.2.1 in Debian sends v0.
    assert (pylog[ApiKey.LIST_OFFSETS][0], kafka[ApiKey.LIST_OFFSETS][0]) == (0, 1)
    classic_groups = {ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
                      ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE, ApiKey.LIST_GROUPS,
                      ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS}
    # Every classic group API has Kafka's exact range (Kafka 4.1 does not advertise the v10 of
    # OffsetCommit/OffsetFetch that its JSON defines).
    for key in classic_groups:
        assert pylog[key] == kafka[key], key


def test_api_versions_answer_alike_at_every_version(peers):
    answers = {}
    for peer in peers:
        with connection(peer) as conn:
            conn.connect()
            answers[peer.name] = [_api_versions_shape(conn.request(ApiKey.API_VERSIONS, {
                "client_software_name": "pylog-peer-tier", "client_software_version": "1"},
                api_version=version)) for version in range(0, 5)]
    assert answers["pylog"] == answers["kafka"]


def test_feature_flags_transaction_version_on_both(peers):
    # KIP-584 feature flags (ApiVersions v3+ tagged fields): both finalize transaction.version 2,
    # which Java clients read to use transaction version 2 (KIP-890 part 2). Intended difference:
    # the KRaft metadata versions and Kafka's other features, which a ZooKeeper-mode pylog lacks.
    features = {}
    levels = {}
    for peer in peers:
        with connection(peer) as conn:
            response = conn.request(ApiKey.API_VERSIONS, {"client_software_name": "pylog-peer-tier",
                                                          "client_software_version": "1"}, api_version=4)
        features[peer.name] = ({f.name for f in response.supported_features or ()},
                               {f.name for f in response.finalized_features or ()})
        levels[peer.name] = {f.name: f.max_version_level for f in response.finalized_features or ()}
    assert "metadata.version" in features["kafka"][0] and "metadata.version" in features["kafka"][1]
    assert features["pylog"] == ({"transaction.version"}, {"transaction.version"})
    assert levels["pylog"]["transaction.version"] == levels["kafka"]["transaction.version"] == 2


def _api_versions_shape(response) -> tuple:
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    return (response.error_code, response.throttle_time_ms, ApiKey.API_VERSIONS in keys,
            keys.get(ApiKey.API_VERSIONS), keys.get(ApiKey.METADATA) is not None)


def metadata_versions(peers) -> range:
    kafka, pylog = (advertised(peer) for peer in peers)
    with connection(peers[1]) as conn:
        codec_high = conn.version_for(ApiKey.METADATA)
    return range(max(kafka[ApiKey.METADATA][0], pylog[ApiKey.METADATA][0]),
                 min(kafka[ApiKey.METADATA][1], pylog[ApiKey.METADATA][1], codec_high) + 1)


def metadata(conn: BrokerConnection, version: int, names: list[str] | None, operations: bool):
    topics = None if names is None else [{"name": name} for name in names]
    return conn.request(ApiKey.METADATA, {
        "topics": topics, "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": operations,
        "include_topic_authorized_operations": operations}, api_version=version)


def metadata_shape(response, roles: dict[str, str]) -> dict:
    """What a client depends on; topic names replaced by their role in the scenario."""
    brokers = sorted(b.node_id for b in response.brokers)
    index = {node: i for i, node in enumerate(brokers)}.get
    cluster_id = response.cluster_id
    return {
        "brokers": [(b.host, b.rack) for b in sorted(response.brokers, key=lambda b: b.node_id)],
        "cluster_id": None if cluster_id is None else (type(cluster_id), len(cluster_id)),
        "controller": index(response.controller_id, response.controller_id),
        "cluster_operations": response.cluster_authorized_operations,
        "topics": sorted((roles[t.name], t.error_code, t.topic_id not in (None, ZERO_UUID), t.is_internal,
                          t.topic_authorized_operations, [
                              (p.error_code, p.partition_index, index(p.leader_id, p.leader_id),
                               p.leader_epoch, [index(r, r) for r in p.replica_nodes],
                               [index(r, r) for r in p.isr_nodes], list(p.offline_replicas))
                              for p in sorted(t.partitions, key=lambda p: p.partition_index)])
                         for t in response.topics if t.name in roles),
    }


def wait_for_leaders(conn: BrokerConnection, topic: str, version: int) -> None:
    """Kafka's brokers learn a new topic's leaders from the metadata log a moment after
    CreateTopics returns; wait until every partition has one."""
    deadline = time.monotonic() + 30
    while True:
        (answer,) = metadata(conn, version, [topic], False).topics
        if answer.error_code == 0 and all(p.error_code == 0 and p.leader_id >= 0 for p in answer.partitions):
            return
        assert time.monotonic() < deadline, f"{topic}: no leaders in time: {answer}"
        time.sleep(0.05)


def test_metadata_matches_apache_kafka_at_every_shared_version(peers):
    versions = metadata_versions(peers)
    assert 12 in versions, versions
    shapes = {}
    for peer in peers:
        topic, unknown = peer.create_topic(unique_topic("metadata"), partitions=3), unique_topic("absent")
        roles = {topic: "topic", unknown: "unknown"}
        with connection(peer) as conn:
            wait_for_leaders(conn, topic, versions[-1])
            shapes[peer.name] = {
                (version, operations): metadata_shape(
                    metadata(conn, version, [topic, unknown], operations), roles)
                for version in versions for operations in ((False, True) if version >= 8 else (False,))}
            # All topics (v1+ null list) lists the topic as asking for it by name does.
            every = metadata_shape(metadata(conn, versions[-1], None, False), roles)
            assert every["topics"] == shapes[peer.name][(versions[-1], False)]["topics"][:1], peer
    for key, kafka_shape in shapes["kafka"].items():
        assert shapes["pylog"][key] == kafka_shape, key
    kafka_shape = shapes["kafka"][(versions[-1], False)]
    assert kafka_shape["cluster_id"] == (str, 22) and kafka_shape["controller"] == 0
    assert [t[:3] for t in kafka_shape["topics"]] == [("topic", 0, True), ("unknown", 3, False)]


def test_metadata_by_topic_id_matches_apache_kafka(peers):
    """Metadata v12 names topics by id: a known id answers the topic and its name, an unknown
    id is UNKNOWN_TOPIC_ID with a null name."""
    answers = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("metadata-id"))
        with connection(peer) as conn:
            wait_for_leaders(conn, topic, 12)
            (by_name,) = metadata(conn, 12, [topic], False).topics
            response = conn.request(ApiKey.METADATA, {
                "topics": [{"topic_id": by_name.topic_id, "name": None},
                           {"topic_id": uuid.UUID(int=12345), "name": None}],
                "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
                api_version=12)
        answers[peer.name] = sorted(
            (t.error_code, t.name == topic, t.name is None, t.topic_id == by_name.topic_id, len(t.partitions),
             t.topic_authorized_operations)
            for t in response.topics)
    assert answers["pylog"] == answers["kafka"]
    assert [answer[:4] for answer in answers["kafka"]] == [(0, True, False, True), (100, False, True, False)]


def test_metadata_names_a_topic_asked_twice_once(peers):
    answers = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("metadata-twice"))
        with connection(peer) as conn:
            wait_for_leaders(conn, topic, 12)
            answers[peer.name] = [[(t.name == topic, t.error_code) for t in metadata(
                conn, version, [topic, unique_topic("absent"), topic], False).topics] for version in (1, 12)]
    assert answers["pylog"] == answers["kafka"]
    assert answers["kafka"][0].count((True, 0)) == 1
