"""The transaction wire specs (issue 15) against Apache Kafka 4.1: for every version of every
transaction API that Kafka advertises and our codec speaks, Kafka parses the request we encode
(it closes the connection otherwise) and we parse its answer.

One transaction is left open on a topic of its own (InitProducerId, AddPartitionsToTxn v3, one
transactional batch) so DescribeTransactions, ListTransactions, DescribeProducers and the
broker-side AddPartitionsToTxn v4+ (verify only) have something to describe; it is aborted at the
end. Every other request names an unknown transactional id, an unknown producer or a topic that
does not exist.
"""

from __future__ import annotations

import itertools
import time

from peer_support import unique_topic
from test_peer_group_wire import wait_for_group_coordinator
from txn_clients import wait_for_leaders
from wire_probe import api_version_ranges, connect, produce_partition, produce_request

from broker.client.config import ClientConfig
from broker.client.coordinator import KEY_TYPE_TRANSACTION, find_coordinator
from broker.client.metadata import Cluster
from broker.records import Record, encode_batch
from broker.wire import API_SPECS, ApiKey, ErrorCode

TXN_KEYS = [ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
            ApiKey.WRITE_TXN_MARKERS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_PRODUCERS,
            ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS, ApiKey.INIT_PRODUCER_ID]
UNKNOWN_PRODUCER = 7_100_000_000  # never allocated in a test session
TRANSACTION_TIMEOUT_MS = 60_000  # under Kafka's transaction.max.timeout.ms (15 min)
COORDINATOR_WAIT_S = 60.0
_ids = itertools.count()


def retry_while_retriable(call, deadline_s: float = COORDINATOR_WAIT_S):
    """``call()`` until its answer's error is not retriable (the coordinator loading, a previous
    transaction still completing): polling a condition with a deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        response = call()
        error = ErrorCode(response.error_code)
        if not error.retriable:
            return response
        assert time.monotonic() < deadline, f"still {error.name}"
        time.sleep(0.1)


def wait_for_transaction_coordinator(peer) -> None:
    """The first FindCoordinator for a transactional id creates __transaction_state; its
    partitions then load before the coordinator answers."""
    cluster = Cluster(peer.bootstrap, ClientConfig(request_timeout_ms=int(COORDINATOR_WAIT_S * 1000),
                                                   retry_backoff_ms=50))
    try:
        find_coordinator(cluster, "peer-txn-warmup", KEY_TYPE_TRANSACTION)
    finally:
        cluster.close()
    with connect(peer) as raw:
        retry_while_retriable(lambda: raw.call(ApiKey.LIST_TRANSACTIONS, 0, {}))


def open_transaction(peer, transactional_id: str, topic: str) -> tuple[int, int]:
    """A transaction with one batch on ``topic``-0, left open: (producer id, epoch)."""
    with connect(peer) as raw:
        init = retry_while_retriable(lambda: raw.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS}))
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        added = raw.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": transactional_id, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
        [[result]] = [t.results_by_partition for t in added.results_by_topic_v3_and_below]
        assert (result.partition_index, result.partition_error_code) == (0, ErrorCode.NONE)
        batch = encode_batch([Record(0, int(time.time() * 1000), None, b"in a transaction")],
                             producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        request = produce_request(topic, batch)
        request.transactional_id = transactional_id  # Kafka refuses a transactional batch without it
        answer = produce_partition(raw, 9, request)
        assert answer.error_code == ErrorCode.NONE
    return pid, epoch


def request_for(api_key: int, version: int, open_txn: dict) -> dict:
    nobody = f"peer-txn-wire-nobody-{next(_ids)}"
    missing = [{"name": "no-such-topic", "partitions": [0]}]
    return {
        ApiKey.ADD_PARTITIONS_TO_TXN: {
            "v3_and_below_transactional_id": nobody, "v3_and_below_producer_id": UNKNOWN_PRODUCER,
            "v3_and_below_producer_epoch": 0, "v3_and_below_topics": missing,
            # v4+, broker to broker: is the open transaction's partition in it?
            "transactions": [{"transactional_id": open_txn["id"], "producer_id": open_txn["pid"],
                              "producer_epoch": open_txn["epoch"], "verify_only": True,
                              "topics": [{"name": open_txn["topic"], "partitions": [0]}]}]},
        ApiKey.ADD_OFFSETS_TO_TXN: {"transactional_id": nobody, "producer_id": UNKNOWN_PRODUCER,
                                    "producer_epoch": 0, "group_id": nobody},
        ApiKey.END_TXN: {"transactional_id": nobody, "producer_id": UNKNOWN_PRODUCER,
                         "producer_epoch": 0, "committed": False},
        ApiKey.WRITE_TXN_MARKERS: {"markers": [{
            "producer_id": UNKNOWN_PRODUCER, "producer_epoch": 0, "transaction_result": False,
            "coordinator_epoch": 0, "topics": [{"name": "no-such-topic", "partition_indexes": [0]}]}]},
        ApiKey.TXN_OFFSET_COMMIT: {
            "transactional_id": nobody, "group_id": nobody, "producer_id": UNKNOWN_PRODUCER,
            "producer_epoch": 0, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "no-such-topic", "partitions": [
                {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"}]}]},
        ApiKey.DESCRIBE_PRODUCERS: {"topics": [{"name": open_txn["topic"], "partition_indexes": [0]}]},
        ApiKey.DESCRIBE_TRANSACTIONS: {"transactional_ids": [open_txn["id"], nobody]},
        ApiKey.LIST_TRANSACTIONS: {"state_filters": ["Ongoing"], "duration_filter": -1,
                                   "transactional_id_pattern": "peer-txn-wire-open.*"},
        # non-transactional: a fresh producer id, nothing else touched
        ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS},
    }[api_key]


def test_kafka_parses_every_shared_version_of_every_transaction_api(kafka_peer):
    wait_for_transaction_coordinator(kafka_peer)
    wait_for_group_coordinator(kafka_peer)
    # Produce right after CreateTopics can meet NOT_LEADER_OR_FOLLOWER until the leader is known.
    topic = wait_for_leaders(kafka_peer, kafka_peer.create_topic(unique_topic("txn-wire")), 1)
    open_txn = {"id": "peer-txn-wire-open", "topic": topic}
    open_txn["pid"], open_txn["epoch"] = open_transaction(kafka_peer, open_txn["id"], topic)
    offered = api_version_ranges(kafka_peer)
    seen = {}
    try:
        for api_key in TXN_KEYS:
            spec = API_SPECS[api_key]
            assert api_key in offered, f"Kafka does not advertise {spec.name}"
            low, high = max(offered[api_key][0], spec.valid.low), min(offered[api_key][1], spec.valid.high)
            assert low <= high, f"{spec.name}: Kafka offers {offered[api_key]}"
            for version in range(low, high + 1):
                with connect(kafka_peer) as raw:  # a parse failure on Kafka's side closes it: call raises
                    seen[(spec.name, version)] = raw.call(api_key, version, request_for(api_key, version, open_txn))
    finally:
        with connect(kafka_peer) as raw:
            aborted = retry_while_retriable(lambda: raw.call(ApiKey.END_TXN, 3, {
                "transactional_id": open_txn["id"], "producer_id": open_txn["pid"],
                "producer_epoch": open_txn["epoch"], "committed": False}))
    assert aborted.error_code == ErrorCode.NONE
    print("Kafka offers:", {API_SPECS[k].name: offered[k] for k in TXN_KEYS})
    check_answers(seen, offered, open_txn)


def check_answers(seen: dict, offered: dict, open_txn: dict) -> None:
    """A few answers checked for meaning, not only for parsing."""
    described = seen[("DescribeTransactions", 0)].transaction_states
    assert [(s.transactional_id, ErrorCode(s.error_code).name) for s in described] == [
        (open_txn["id"], "NONE"), (described[1].transactional_id, "TRANSACTIONAL_ID_NOT_FOUND")]
    ongoing = described[0]
    assert (ongoing.transaction_state, ongoing.producer_id, ongoing.transaction_timeout_ms) == (
        "Ongoing", open_txn["pid"], TRANSACTION_TIMEOUT_MS)
    assert [(t.topic, t.partitions) for t in ongoing.topics] == [(open_txn["topic"], [0])]
    for version in range(0, min(offered[ApiKey.LIST_TRANSACTIONS][1], 2) + 1):
        listed = seen[("ListTransactions", version)]
        assert listed.error_code == ErrorCode.NONE
        assert (open_txn["id"], open_txn["pid"], "Ongoing") in {
            (s.transactional_id, s.producer_id, s.transaction_state) for s in listed.transaction_states}
    [producer] = seen[("DescribeProducers", 0)].topics[0].partitions[0].active_producers
    assert (producer.producer_id, producer.producer_epoch, producer.last_sequence,
            producer.current_txn_start_offset) == (open_txn["pid"], open_txn["epoch"], 0, 0)
    for version in range(4, offered[ApiKey.ADD_PARTITIONS_TO_TXN][1] + 1):
        verified = seen[("AddPartitionsToTxn", version)]
        [result] = verified.results_by_transaction
        [topic] = result.topic_results
        assert [(p.partition_index, p.partition_error_code) for p in topic.results_by_partition] == [(0, 0)]
    # The client form checks the topic before the transactional id.
    [topic] = seen[("AddPartitionsToTxn", 0)].results_by_topic_v3_and_below
    assert topic.results_by_partition[0].partition_error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    unknown = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert seen[("EndTxn", 0)].error_code == unknown
    assert seen[("AddOffsetsToTxn", 0)].error_code == unknown
    [marker] = seen[("WriteTxnMarkers", offered[ApiKey.WRITE_TXN_MARKERS][1])].markers
    assert marker.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
