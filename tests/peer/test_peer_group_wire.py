"""The consumer-group wire specs (issue 14) and the client's find_coordinator against Apache
Kafka 4.1: for every version of every group API that Kafka advertises and our codec speaks, Kafka
parses the request we encode (it would close the connection otherwise) and we parse its answer;
find_coordinator finds Kafka's broker for a group and for a transactional id.

Requests are harmless: unknown groups, unknown members, a topic that does not exist.
"""

from __future__ import annotations

import itertools
import time

from wire_probe import api_version_ranges, connect

from broker.client.config import ClientConfig
from broker.client.coordinator import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, find_coordinator
from broker.client.metadata import Cluster
from broker.wire import API_SPECS, ApiKey, ErrorCode

_groups = itertools.count()
SESSION_TIMEOUT_MS = 10_000  # within Kafka's group.min/max.session.timeout.ms (6 s, 30 min)


def request_for(api_key: int, version: int, group: str) -> dict:
    member = {"member_id": "nobody", "group_instance_id": None}
    topics = [{"name": "no-such-topic", "partition_indexes": [0]}]
    return {
        ApiKey.JOIN_GROUP: {"group_id": group, "session_timeout_ms": SESSION_TIMEOUT_MS,
                            "rebalance_timeout_ms": SESSION_TIMEOUT_MS, "member_id": "",
                            "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"}],
                            "reason": "peer tier"},
        ApiKey.SYNC_GROUP: {"group_id": group, "generation_id": 1, "member_id": "nobody",
                            "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
        ApiKey.HEARTBEAT: {"group_id": group, "generation_id": 1, "member_id": "nobody"},
        ApiKey.LEAVE_GROUP: {"group_id": group, "member_id": "nobody", "members": [member]},
        ApiKey.OFFSET_COMMIT: {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                               "topics": [{"name": "no-such-topic", "partitions": [
                                   {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"}]}]},
        ApiKey.OFFSET_FETCH: {"group_id": group, "topics": topics,
                              "groups": [{"group_id": group, "topics": topics}]},
        ApiKey.OFFSET_DELETE: {"group_id": group, "topics": [{"name": "no-such-topic", "partitions": [
            {"partition_index": 0}]}]},
        ApiKey.LIST_GROUPS: {},
        ApiKey.DESCRIBE_GROUPS: {"groups": [group], "include_authorized_operations": True},
        ApiKey.DELETE_GROUPS: {"groups_names": [group]},
    }[api_key]


GROUP_KEYS = [ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
              ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE, ApiKey.LIST_GROUPS,
              ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS]


def wait_for_group_coordinator(peer, deadline_s: float = 60.0) -> None:
    """The first FindCoordinator creates __consumer_offsets; group requests answer
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until its partitions are loaded."""
    cluster = Cluster(peer.bootstrap, ClientConfig(request_timeout_ms=int(deadline_s * 1000), retry_backoff_ms=50))
    try:
        find_coordinator(cluster, "peer-wire-warmup")
    finally:
        cluster.close()
    deadline = time.monotonic() + deadline_s
    loading = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}
    while True:
        with connect(peer) as raw:
            code = raw.call(ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["peer-wire-warmup"]}).groups[0].error_code
        if code not in loading:
            return
        assert time.monotonic() < deadline, f"group coordinator still answers {code}"
        time.sleep(0.1)


def test_kafka_parses_every_shared_version_of_every_group_api(kafka_peer):
    wait_for_group_coordinator(kafka_peer)
    offered = api_version_ranges(kafka_peer)
    seen = {}
    for api_key in GROUP_KEYS:
        spec = API_SPECS[api_key]
        low, high = max(offered[api_key][0], spec.valid.low), min(offered[api_key][1], spec.valid.high)
        assert low <= high, f"{spec.name}: Kafka offers {offered[api_key]}"
        for version in range(low, high + 1):
            group = f"peer-wire-{next(_groups)}"
            with connect(kafka_peer) as raw:  # a parse failure on Kafka's side closes it: call raises
                response = raw.call(api_key, version, request_for(api_key, version, group))
            seen[(spec.name, version)] = response
    # a few answers checked for meaning, not only for parsing
    join = seen[("JoinGroup", 9)]
    assert join.error_code == ErrorCode.MEMBER_ID_REQUIRED and join.member_id != ""  # KIP-394
    assert seen[("Heartbeat", 4)].error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.GROUP_ID_NOT_FOUND)
    described = seen[("DescribeGroups", 5)].groups[0]
    assert (described.group_state, described.members) == ("Dead", [])
    described = seen[("DescribeGroups", 6)].groups[0]  # KIP-1043
    assert (described.error_code, described.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    assert seen[("DeleteGroups", 2)].results[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    fetched = seen[("OffsetFetch", 9)].groups[0]
    assert fetched.error_code == ErrorCode.NONE
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [-1]
    assert seen[("ListGroups", 5)].error_code == ErrorCode.NONE
    print("Kafka offers:", {API_SPECS[k].name: offered[k] for k in GROUP_KEYS})


def test_find_coordinator_finds_kafkas_broker(kafka_peer):
    config = ClientConfig(request_timeout_ms=60_000, retry_backoff_ms=50)
    cluster = Cluster(kafka_peer.bootstrap, config)
    try:
        group = find_coordinator(cluster, f"peer-coordinator-{next(_groups)}", KEY_TYPE_GROUP)
        txn = find_coordinator(cluster, "peer-coordinator-tx", KEY_TYPE_TRANSACTION)
        brokers = cluster.brokers if cluster.brokers else None
    finally:
        cluster.close()
    [port] = kafka_peer.ports
    assert group.port == port and txn.port == port
    assert group.node_id == txn.node_id >= 0
    if brokers:
        assert group.node_id in brokers


def test_kafka_names_a_coordinator_even_for_an_empty_group_id(kafka_peer):
    """Pinned so the group tools know: FindCoordinator does not validate the group id (the
    group APIs do), so find_coordinator returns a node for ""."""
    cluster = Cluster(kafka_peer.bootstrap, ClientConfig(request_timeout_ms=60_000, retry_backoff_ms=50))
    try:
        node = find_coordinator(cluster, "")
    finally:
        cluster.close()
    assert node.port == kafka_peer.ports[0]
