"""The group handlers through the real dispatcher (``Harness``): every served version of every
group API round-trips; without a coordinator each answers COORDINATOR_NOT_AVAILABLE; with one,
the request reaches it with the client id; OffsetCommit answers unknown partitions itself,
as Kafka's ``KafkaApis`` does, and merges the coordinator's answer in request order."""

from __future__ import annotations

import pytest
from test_server_harness import Harness, run

from broker.server.dispatch import SERVED_API_VERSIONS
from broker.wire import ApiKey, ErrorCode, OffsetCommitResponse

NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
P = {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}


def commit_request(*topics) -> dict:
    return {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
            "topics": [{"name": name, "partitions": [{**P, "partition_index": i} for i in indexes]}
                       for name, indexes in topics]}


REQUESTS = {
    ApiKey.JOIN_GROUP: {"group_id": "g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                        "member_id": "", "protocol_type": "consumer",
                        "protocols": [{"name": "range", "metadata": b"x"}]},
    ApiKey.SYNC_GROUP: {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []},
    ApiKey.HEARTBEAT: {"group_id": "g", "generation_id": 1, "member_id": "m"},
    ApiKey.LEAVE_GROUP: {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
    ApiKey.OFFSET_COMMIT: commit_request(("events", [0])),
    ApiKey.OFFSET_FETCH: {"group_id": "g", "topics": [{"name": "events", "partition_indexes": [0, 1]}],
                          "groups": [{"group_id": "g", "topics": None}]},
    ApiKey.OFFSET_DELETE: {"group_id": "g", "topics": [{"name": "events", "partitions": [{"partition_index": 0}]}]},
    ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g", "h"]},
    ApiKey.DELETE_GROUPS: {"groups_names": ["g", "h"]},
}


def error_codes(api_key: int, version: int, response) -> list[int]:
    """Every error code in a response, wherever the API puts them."""
    if api_key == ApiKey.OFFSET_COMMIT:
        return [p.error_code for t in response.topics for p in t.partitions]
    if api_key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return [g.error_code for g in response.groups]
        codes = [p.error_code for t in response.topics for p in t.partitions]
        return codes + ([response.error_code] if version >= 2 else [])
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return [g.error_code for g in response.groups]
    if api_key == ApiKey.DELETE_GROUPS:
        return [r.error_code for r in response.results]
    return [response.error_code]


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1,))
    h.add_topic("events", {0: [1], 1: [1]})
    yield h
    h.close()


CASES = [(key, v) for key in REQUESTS for v in range(SERVED_API_VERSIONS[key][0], SERVED_API_VERSIONS[key][1] + 1)]


@pytest.mark.parametrize("api_key,version", CASES)
def test_without_a_coordinator_every_version_answers_coordinator_not_available(harness, api_key, version):
    response = run(harness.call(api_key, version, REQUESTS[api_key]))
    codes = error_codes(api_key, version, response)
    assert codes and set(codes) == {NOT_AVAILABLE}


class FakeGroups:
    def __init__(self) -> None:
        self.seen: list = []

    def submit(self, api_key, api_version, request, client_id, client_host):
        return self.handle(api_key, api_version, request, client_id, client_host)

    async def handle(self, api_key, api_version, request, client_id, client_host):
        self.seen.append((api_key, api_version, request, client_id, client_host))
        if api_key == ApiKey.OFFSET_COMMIT:
            return OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
                name=t.name, partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=ErrorCode.NONE) for p in t.partitions])
                for t in request.topics])
        from broker.server.handlers import HANDLERS
        return HANDLERS[api_key].error_response(_Header(api_version), request, ErrorCode.NOT_COORDINATOR)


class _Header:
    def __init__(self, api_version: int) -> None:
        self.api_version = api_version


def test_requests_reach_the_coordinator_with_the_client_id(harness):
    harness.context.groups = groups = FakeGroups()
    response = run(harness.call(ApiKey.HEARTBEAT, 4, REQUESTS[ApiKey.HEARTBEAT]))
    assert response.error_code == ErrorCode.NOT_COORDINATOR
    ((api_key, version, request, client_id, host),) = groups.seen
    assert (api_key, version, request.member_id, client_id, host) == (ApiKey.HEARTBEAT, 4, "m", "test", "/")


def test_offset_commit_answers_unknown_partitions_itself_in_request_order(harness):
    harness.context.groups = groups = FakeGroups()
    request = commit_request(("nope", [0]), ("events", [1, 7, 0]))
    response = run(harness.call(ApiKey.OFFSET_COMMIT, 9, request))
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in response.topics] == [
        ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]),
        ("events", [(1, ErrorCode.NONE), (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (0, ErrorCode.NONE)])]
    ((_, _, forwarded, _, _),) = groups.seen
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in forwarded.topics] == [("events", [1, 0])]
    assert (forwarded.group_id, forwarded.member_id, forwarded.generation_id_or_member_epoch) == ("g", "m", 1)
    # Nothing known: the coordinator is not asked at all.
    response = run(harness.call(ApiKey.OFFSET_COMMIT, 9, commit_request(("nope", [0, 1]))))
    assert [p.error_code for p in response.topics[0].partitions] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    assert len(groups.seen) == 1


@pytest.mark.parametrize("api_key,version", [(ApiKey.OFFSET_COMMIT, 0), (ApiKey.OFFSET_COMMIT, 1),
                                             (ApiKey.OFFSET_FETCH, 0)])
def test_versions_kafka_4_removed_parse_and_answer_unsupported_version(harness, api_key, version):
    response = run(harness.call(api_key, version, REQUESTS[api_key]))
    assert set(error_codes(api_key, version, response)) == {ErrorCode.UNSUPPORTED_VERSION}
