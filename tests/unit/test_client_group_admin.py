"""The client's ``GroupAdmin`` and ``KafkaOffsetStore``: the pure parts (request bodies, decoding
of members, input checks that run before any I/O). The cluster side runs in
tests/peer/test_peer_groups_tool.py; the coordinator's own admin APIs in test_group_admin.py."""

from __future__ import annotations

import pytest

from broker.client.group_admin import _description, _offset_fetch_body, _simple_commit_body, _state_name
from broker.client.metadata import BrokerInfo
from broker.client.offset_store import KafkaOffsetStore, OffsetStoreError
from broker.wire import ApiKey, ErrorCode, consumer_protocol, spec_for
from broker.wire.apis import API_SPECS


def test_simple_commit_is_generation_minus_one_without_member():
    body = _simple_commit_body("g", [{"name": "t", "partitions": []}])
    assert body["generation_id_or_member_epoch"] == -1 and body["member_id"] == "" and body["group_instance_id"] is None
    API_SPECS[ApiKey.OFFSET_COMMIT].request_class.from_dict(body)  # every key is a field of the spec


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_offset_fetch_bodies(version):
    body = _offset_fetch_body("g", [("t", 1), ("t", 0), ("u", 2)], version)
    spec_for(ApiKey.OFFSET_FETCH).request_class.from_dict(body)
    topics = body["groups"][0]["topics"] if version >= 8 else body["topics"]
    assert topics == [{"name": "t", "partition_indexes": [1, 0]}, {"name": "u", "partition_indexes": [2]}]
    every = _offset_fetch_body("g", None, version)
    assert (every["groups"][0]["topics"] if version >= 8 else every["topics"]) is None  # null: all topics


def test_state_names_any_case():
    assert _state_name("stable") == "Stable" and _state_name("PREPARINGREBALANCE") == "PreparingRebalance"
    with pytest.raises(ValueError, match="unknown group state"):
        _state_name("running")


def described(protocol_type, metadata, assignment, error_code=ErrorCode.NONE, state="Stable"):
    response = spec_for(ApiKey.DESCRIBE_GROUPS).response_class.from_dict({"groups": [{
        "error_code": error_code, "group_id": "g", "group_state": state, "protocol_type": protocol_type,
        "protocol_data": "range", "members": [{"member_id": "m-1", "client_id": "m", "client_host": "/h",
                                               "member_metadata": metadata, "member_assignment": assignment}]}]})
    return _description(response.groups[0], BrokerInfo(1, "h", 9092))


def test_consumer_members_are_decoded():
    metadata = consumer_protocol.encode_subscription({"topics": ["b", "a"]}, version=1)
    assignment = consumer_protocol.encode_assignment(
        {"assigned_partitions": [{"topic": "b", "partitions": [2, 0]}, {"topic": "a", "partitions": [1]}]})
    d = described("consumer", metadata, assignment)
    m = d.members[0]
    assert (m.topics, m.assignment) == (("a", "b"), (("a", 1), ("b", 0), ("b", 2)))
    assert d.is_active and d.protocol == "range"


def test_undecodable_or_foreign_members_keep_their_bytes():
    broken = described("consumer", b"\x00", b"\x00\x00\xff")
    assert (broken.members[0].topics, broken.members[0].assignment) == ((), ())
    connect = described("connect", b"opaque", b"bytes")
    assert connect.members[0].assignment == () and connect.members[0].metadata == b"opaque"


def test_unknown_group_is_dead():
    d = described("", b"", b"", error_code=ErrorCode.GROUP_ID_NOT_FOUND, state="")
    assert d.state == "Dead" and not d.is_active


@pytest.mark.parametrize("group, offsets", [
    ("", {("t", 0): 1}), ("g", {("t", 0): -1}), ("g", {("t", -1): 1}), ("g", {("", 0): 1}),
    ("g", {("t", 0): True}), ("x" * 250, {("t", 0): 1}),
])
def test_kafka_store_checks_input_before_any_request(group, offsets):
    with KafkaOffsetStore("127.0.0.1:1") as store:  # nothing listens there: no request is sent
        with pytest.raises(OffsetStoreError):
            store.commit(group, offsets)


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 0.0

    def monotonic_ms(self) -> float:
        return self.now_ms

    def time_ms(self) -> int:
        return int(self.now_ms)

    def sleep_ms(self, ms: float) -> None:
        self.now_ms += ms


class FakeCluster:
    """Brokers 1 and 2; each request answers the next scripted OffsetCommit error code."""

    def __init__(self, codes: list[int]) -> None:
        from broker.client.config import ClientConfig
        self.config, self.clock = ClientConfig(request_timeout_ms=1_000, retry_backoff_ms=100), FakeClock()
        self.codes, self.asked = list(codes), []

    def connection(self, node_id: int):
        cluster = self

        class Conn:
            def version_for(self, api_key, min_version=0):
                return 8

            def request(self, api_key, body, version):
                cluster.asked.append(node_id)
                code = cluster.codes.pop(0)
                return spec_for(ApiKey.OFFSET_COMMIT).response_class.from_dict({"topics": [
                    {"name": "t", "partitions": [{"partition_index": 0, "error_code": code}]}]})
        return Conn()

    def invalidate(self, topic=None) -> None:
        pass


@pytest.fixture
def coordinators(monkeypatch):
    """FindCoordinator answers broker 1, then 2, then 1 ... (the coordinator moving)."""
    from broker.client import group_admin
    answers = iter([1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2])
    monkeypatch.setattr(group_admin, "find_coordinator", lambda cluster, key, key_type: (next(answers), "h", 9))


def test_a_moved_coordinator_is_found_again_and_the_commit_retried(coordinators):
    from broker.client.group_admin import GroupAdmin
    cluster = FakeCluster([ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NONE])
    GroupAdmin(cluster=cluster).alter_group_offsets("g", {("t", 0): 5})
    assert cluster.asked == [1, 2, 1]


def test_refusals_name_the_group_and_are_not_retried(coordinators):
    from broker.client.errors import KafkaError
    from broker.client.group_admin import GroupAdmin
    cluster = FakeCluster([ErrorCode.UNKNOWN_MEMBER_ID])
    with pytest.raises(KafkaError, match="UNKNOWN_MEMBER_ID .*group 'g', t-0: .*active members") as caught:
        GroupAdmin(cluster=cluster).alter_group_offsets("g", {("t", 0): 5})
    assert caught.value.code == ErrorCode.UNKNOWN_MEMBER_ID and cluster.asked == [1]


def test_retries_stop_at_the_request_timeout(coordinators):
    from broker.client.errors import KafkaError
    from broker.client.group_admin import GroupAdmin
    cluster = FakeCluster([ErrorCode.COORDINATOR_NOT_AVAILABLE] * 50)
    with pytest.raises(KafkaError, match="COORDINATOR_NOT_AVAILABLE .*group 'g'"):
        GroupAdmin(cluster=cluster).alter_group_offsets("g", {("t", 0): 5})
    assert len(cluster.asked) == 11 and cluster.clock.now_ms == 1_000  # every 100 ms for 1 s
