"""The transaction handlers through the real dispatcher (``Harness``): every advertised version
of AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions
round-trips and answers COORDINATOR_NOT_AVAILABLE without a coordinator; with one, the request
reaches it; InitProducerId with a transactional id goes to the coordinator (NOT_COORDINATOR when
this broker does not coordinate the id), idempotent ones stay as they were; FindCoordinator key
type 1 names the leader of the id's ``__transaction_state`` partition."""

from __future__ import annotations

import pytest
from test_server_harness import Harness, run

from broker.coordinator.txn.core import partition_for
from broker.server.dispatch import SERVED_API_VERSIONS
from broker.server.handlers import HANDLERS
from broker.wire import SUPPORTED_API_VERSIONS, ApiKey, ErrorCode

NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
TXN = "__transaction_state"
TOPICS = [{"name": "events", "partitions": [0, 1]}]

REQUESTS = {
    ApiKey.ADD_PARTITIONS_TO_TXN: {
        "v3_and_below_transactional_id": "t", "v3_and_below_producer_id": 7, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": TOPICS,
        "transactions": [{"transactional_id": "t", "producer_id": 7, "producer_epoch": 0, "verify_only": True,
                          "topics": TOPICS}]},
    ApiKey.ADD_OFFSETS_TO_TXN: {"transactional_id": "t", "producer_id": 7, "producer_epoch": 0, "group_id": "g"},
    ApiKey.END_TXN: {"transactional_id": "t", "producer_id": 7, "producer_epoch": 0, "committed": True},
    ApiKey.DESCRIBE_TRANSACTIONS: {"transactional_ids": ["t", "u"]},
    ApiKey.LIST_TRANSACTIONS: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
}


def error_codes(api_key: int, version: int, response) -> list[int]:
    if api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        if version >= 4:
            return [response.error_code]
        return [p.partition_error_code for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition]
    if api_key == ApiKey.DESCRIBE_TRANSACTIONS:
        return [s.error_code for s in response.transaction_states]
    return [response.error_code]


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2), transaction_state_log_num_partitions="4",
                transaction_state_log_replication_factor="1")
    yield h
    h.close()


CASES = [(key, v) for key in REQUESTS for v in range(SERVED_API_VERSIONS[key][0], SERVED_API_VERSIONS[key][1] + 1)]


def test_advertised_versions():
    """Kafka 4.1 advertises AddPartitionsToTxn 0-5, AddOffsetsToTxn 0-4, EndTxn 0-5,
    DescribeTransactions 0, ListTransactions 0-2 (its message JSON); pylog leaves out
    ListTransactions v2 (id pattern filter)."""
    assert {k: SUPPORTED_API_VERSIONS[k] for k in REQUESTS} == {
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.END_TXN: (0, 5),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0), ApiKey.LIST_TRANSACTIONS: (0, 1)}


@pytest.mark.parametrize("api_key,version", CASES)
def test_without_a_coordinator_every_version_answers_coordinator_not_available(harness, api_key, version):
    response = run(harness.call(api_key, version, REQUESTS[api_key]))
    codes = error_codes(api_key, version, response)
    assert codes and set(codes) == {NOT_AVAILABLE}
    if api_key == ApiKey.ADD_PARTITIONS_TO_TXN and version < 4:
        assert [(t.name, [p.partition_index for p in t.results_by_partition])
                for t in response.results_by_topic_v3_and_below] == [("events", [0, 1])]


class _Header:
    def __init__(self, api_version: int) -> None:
        self.api_version = api_version


class FakeTxn:
    def __init__(self, coordinated=("t",)) -> None:
        self.seen: list = []
        self.coordinated = set(coordinated)

    def coordinates(self, transactional_id: str) -> bool:
        return transactional_id in self.coordinated

    async def handle(self, api_key, api_version, request):
        self.seen.append((api_key, api_version, request))
        return HANDLERS[api_key].error_response(_Header(api_version), request, ErrorCode.CONCURRENT_TRANSACTIONS)


@pytest.mark.parametrize("api_key", list(REQUESTS))
def test_requests_reach_the_coordinator(harness, api_key):
    harness.context.txn = txn = FakeTxn()
    version = SERVED_API_VERSIONS[api_key][1]
    response = run(harness.call(api_key, version, REQUESTS[api_key]))
    assert set(error_codes(api_key, version, response)) == {ErrorCode.CONCURRENT_TRANSACTIONS}
    ((key, seen_version, request),) = txn.seen
    assert (key, seen_version) == (api_key, version)


def init_pid(h, transactional_id, version=4):
    return run(h.call(ApiKey.INIT_PRODUCER_ID, version, {
        "transactional_id": transactional_id, "transaction_timeout_ms": 60000,
        "producer_id": -1, "producer_epoch": -1}))


def test_init_producer_id_with_a_transactional_id_goes_to_its_coordinator(harness):
    assert init_pid(harness, "t").error_code == NOT_AVAILABLE  # no coordinator in this context
    harness.context.txn = txn = FakeTxn(coordinated=("t",))
    assert init_pid(harness, "t").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert [(k, r.transactional_id) for k, _, r in txn.seen] == [(ApiKey.INIT_PRODUCER_ID, "t")]
    assert init_pid(harness, "other").error_code == ErrorCode.NOT_COORDINATOR
    # Idempotent producers: unchanged, ids from the broker's block, the coordinator not asked.
    plain = init_pid(harness, None)
    assert (plain.error_code, plain.producer_epoch) == (ErrorCode.NONE, 0) and plain.producer_id >= 0
    assert len(txn.seen) == 1


def find_txn_coordinator(h, keys, version=4):
    request = {"key": keys[0], "key_type": 1, "coordinator_keys": list(keys)}
    response = run(h.call(ApiKey.FIND_COORDINATOR, version, request))
    found = response.coordinators if version >= 4 else [response]
    return [(c.node_id, c.host, c.port, c.error_code) for c in found]


@pytest.mark.parametrize("version", range(1, 5))  # v0 has no key type (groups only)
def test_find_coordinator_key_type_1_names_the_leader_of_the_ids_partition(harness, version):
    ids = ["a", "b", "c", "d"]  # Java hashCode 97..100: partitions 1, 2, 3, 0
    keys = ids if version >= 4 else ids[:1]
    assert {e for *_, e in find_txn_coordinator(harness, keys, version)} == {NOT_AVAILABLE}  # creates it
    assert harness.controller.created == [TXN]
    # The controller elected nothing yet in this harness: give the partitions leaders 1 and 2.
    harness.add_topic(TXN, {0: [1], 1: [2], 2: [1], 3: [2]}, leaders={2: 3})  # broker 3 is not live
    answers = find_txn_coordinator(harness, keys, version)
    expected = []
    for key in keys:
        index = partition_for(key, 4)
        leader = {0: 1, 1: 2, 2: 3, 3: 2}[index]
        expected.append((-1, "", -1, NOT_AVAILABLE) if leader == 3 else
                        (leader, f"host{leader}", 9090 + leader, ErrorCode.NONE))
    assert answers == expected
    assert sorted(partition_for(k, 4) for k in ids) == [0, 1, 2, 3]
