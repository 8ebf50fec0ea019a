"""Produce, Fetch, ListOffsets and WriteTxnMarkers with transactions, over real logs
(``broker.server.handlers``; the partition side of issue 15)."""

from __future__ import annotations

import pytest
from test_server_harness import NOW_MS, Harness, run

from broker.records import Record, encode_batch, iter_batches
from broker.replica.transactions import AcceptingTxnVerifier
from broker.server.handlers import write_txn_markers
from broker.wire import ErrorCode, WriteTxnMarkersRequest

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2
PID = 1000


class ScriptedVerifier:
    """Answers a fixed error per partition (NONE when not named)."""

    def __init__(self, errors: dict) -> None:
        self.errors = errors
        self.asked = []

    async def verify(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.asked.append((transactional_id, producer_id, producer_epoch, topic, partition))
        error = self.errors.get((topic, partition), ErrorCode.NONE)
        if isinstance(error, BaseException):
            raise error
        return error


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2))
    h.add_topic("events", {0: [1], 1: [1], 2: [2]})
    yield h
    h.close()


def txn_batch(values, sequence=0, epoch=0, pid=PID) -> bytes:
    return encode_batch([Record(i, NOW_MS, b"k", v.encode()) for i, v in enumerate(values)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=True)


def produce(h, partitions: dict, transactional_id="tx"):
    request = {"transactional_id": transactional_id, "acks": -1, "timeout_ms": 1000,
               "topic_data": [{"name": "events", "partition_data": [
                   {"index": p, "records": r} for p, r in partitions.items()]}]}
    response = run(h.call(PRODUCE, 9, request))
    return {p.index: p for p in response.responses[0].partition_responses}


def markers(h, committed: bool, partitions=(0,), pid=PID, epoch=0, coordinator_epoch=0):
    request = WriteTxnMarkersRequest.from_dict({"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": committed,
        "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": "events", "partition_indexes": list(partitions)}]}]})
    response = run(write_txn_markers.handle(h.context, None, request))
    return {p.partition_index: p.error_code for p in response.markers[0].topics[0].partitions}


def fetch(h, offset=0, isolation=1, partition=0):
    request = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
               "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
               "topics": [{"topic": "events", "partitions": [{"partition": partition, "fetch_offset": offset,
                                                              "current_leader_epoch": -1,
                                                              "partition_max_bytes": 1 << 20}]}]}
    return run(h.call(FETCH, 12, request)).responses[0].partitions[0]


def latest(h, isolation: int, partition=0) -> int:
    request = {"replica_id": -1, "isolation_level": isolation, "topics": [{"name": "events", "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]}
    return run(h.call(LIST_OFFSETS, 7, request)).topics[0].partitions[0].offset


def test_without_a_verifier_a_transactional_produce_is_refused_as_before(harness):
    answer = produce(harness, {0: txn_batch(["a"])})[0]
    assert answer.error_code == ErrorCode.INVALID_TXN_STATE
    assert harness.replicas.get("events", 0).log.log_end_offset == 0


def test_verified_transactions_commit_and_abort_through_markers(harness):
    verifier = harness.context.txn_verifier = AcceptingTxnVerifier()
    answers = produce(harness, {0: txn_batch(["a", "b"]), 1: txn_batch(["x"])})
    assert [a.error_code for a in answers.values()] == [0, 0]
    assert sorted(verifier.asked) == [("tx", PID, 0, "events", 0), ("tx", PID, 0, "events", 1)]
    assert produce(harness, {0: txn_batch(["c"], sequence=2)})[0].error_code == 0
    assert len(verifier.asked) == 2  # the transaction is open here: no second verification
    assert latest(harness, 1) == 0 and latest(harness, 0) == 3
    view = fetch(harness)
    assert view.last_stable_offset == 0 and view.high_watermark == 3 and not view.records
    assert markers(harness, committed=True, partitions=(0,)) == {0: ErrorCode.NONE}
    assert markers(harness, committed=False, partitions=(1,)) == {1: ErrorCode.NONE}
    committed = fetch(harness)
    assert committed.last_stable_offset == 4 and committed.aborted_transactions == []
    assert [h.base_offset for _, h in iter_batches(committed.records)] == [0, 2, 3]  # 3 = marker
    aborted = fetch(harness, partition=1)
    assert [(a.producer_id, a.first_offset) for a in aborted.aborted_transactions] == [(PID, 0)]
    assert fetch(harness, isolation=0, partition=1).aborted_transactions is None
    assert latest(harness, 1, partition=1) == 2


def test_verification_errors_reach_the_producer_as_kafka_maps_them(harness):
    harness.context.txn_verifier = ScriptedVerifier({
        ("events", 0): ErrorCode.INVALID_TXN_STATE, ("events", 1): ErrorCode.NOT_COORDINATOR})
    answers = produce(harness, {0: txn_batch(["a"]), 1: txn_batch(["b"])})
    assert answers[0].error_code == ErrorCode.INVALID_TXN_STATE
    assert answers[1].error_code == ErrorCode.NOT_ENOUGH_REPLICAS  # retriable for every client
    harness.context.txn_verifier = ScriptedVerifier({("events", 0): ErrorCode.PRODUCER_FENCED})
    # a zombie's produce: Kafka 4.1 answers INVALID_PRODUCER_EPOCH (tests/peer/test_peer_txn_errors.py)
    assert produce(harness, {0: txn_batch(["a"])})[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    harness.context.txn_verifier = ScriptedVerifier({("events", 0): ConnectionError("gone")})
    assert produce(harness, {0: txn_batch(["a"])})[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert harness.replicas.get("events", 0).log.log_end_offset == 0


def test_markers_answer_per_partition_errors(harness):
    harness.context.txn_verifier = AcceptingTxnVerifier()
    produce(harness, {0: txn_batch(["a"], epoch=2)})
    assert markers(harness, True, partitions=(0, 2, 9), epoch=1) == {
        0: ErrorCode.INVALID_PRODUCER_EPOCH, 2: ErrorCode.NOT_LEADER_OR_FOLLOWER,
        9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert markers(harness, False, epoch=2, coordinator_epoch=4) == {0: ErrorCode.NONE}
    produce(harness, {0: txn_batch(["b"], epoch=2, sequence=1)})
    assert markers(harness, True, epoch=2, coordinator_epoch=3) == {0: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert fetch(harness).last_stable_offset == 2  # still open


def test_a_marker_waits_for_replication_like_acks_all(harness, tmp_path):
    h = Harness(tmp_path / "rf2", broker_id=1, brokers=(1, 2))
    try:
        h.add_topic("events", {0: [1, 2]})
        h.context.txn_verifier = AcceptingTxnVerifier()
        partition = h.replicas.get("events", 0)
        partition.append_as_leader(memoryview(txn_batch(["a"])), 1, h.replicas.settings.limits,
                                   txn_verified=True)
        write_txn_markers.MARKER_REPLICATION_TIMEOUT_MS, saved = 50, write_txn_markers.MARKER_REPLICATION_TIMEOUT_MS
        try:
            assert markers(h, True) == {0: ErrorCode.REQUEST_TIMED_OUT}  # follower 2 never fetched
        finally:
            write_txn_markers.MARKER_REPLICATION_TIMEOUT_MS = saved
        assert partition.log.log_end_offset == 2  # appended, not yet replicated
    finally:
        h.close()


def test_describe_producers_shows_the_open_transaction(harness):
    harness.context.txn_verifier = AcceptingTxnVerifier()
    produce(harness, {0: txn_batch(["a", "b"], epoch=3)})
    request = {"topics": [{"name": "events", "partition_indexes": [0, 1, 2]}]}
    response = run(harness.call(61, 0, request))
    by_index = {p.partition_index: p for p in response.topics[0].partitions}
    assert [p.error_code for p in by_index.values()] == [0, 0, ErrorCode.NOT_LEADER_OR_FOLLOWER]
    (producer,) = by_index[0].active_producers
    assert (producer.producer_id, producer.producer_epoch, producer.last_sequence,
            producer.current_txn_start_offset, producer.coordinator_epoch) == (PID, 3, 1, 0, -1)
    assert producer.last_timestamp == NOW_MS
    markers(harness, True, epoch=3, coordinator_epoch=2)
    (producer,) = run(harness.call(61, 0, request)).topics[0].partitions[0].active_producers
    assert (producer.current_txn_start_offset, producer.coordinator_epoch) == (-1, 2)
    assert by_index[1].active_producers == []


class EndingVerifier:
    """Says yes, but the transaction ends (its marker is written) while the answer travels."""

    def __init__(self, harness) -> None:
        self.harness = harness

    async def verify(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.harness.replicas.get(topic, partition).append_txn_marker(producer_id, producer_epoch, 0, False)
        return ErrorCode.NONE


def test_a_marker_during_verification_voids_it(harness):
    """Kafka's VerificationGuard: a produce verified just before its transaction ended must not
    open a transaction no coordinator knows (it would hold the LSO forever)."""
    harness.context.txn_verifier = EndingVerifier(harness)
    answer = produce(harness, {0: txn_batch(["late"])})[0]
    assert answer.error_code == ErrorCode.INVALID_TXN_STATE
    partition = harness.replicas.get("events", 0)
    assert partition.producer_state.ongoing() == {} and partition.last_stable_offset == partition.high_watermark


def test_markers_on_consumer_offsets_tell_the_group_coordinator(tmp_path):
    h = Harness(tmp_path / "groups", broker_id=1, brokers=(1,))
    try:
        h.add_topic("__consumer_offsets", {0: [1]})
        told = []

        class Groups:
            def on_transaction_completed(self, *args):
                told.append(args)

        h.context.groups = Groups()
        request = WriteTxnMarkersRequest.from_dict({"markers": [{
            "producer_id": PID, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
            "topics": [{"name": "__consumer_offsets", "partition_indexes": [0]}]}]})
        response = run(write_txn_markers.handle(h.context, None, request))
        assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE
        assert told == [("__consumer_offsets", 0, PID, 0, True)]
        assert h.replicas.get("__consumer_offsets", 0).log.log_end_offset == 1
    finally:
        h.close()


class AddingCoordinator:
    """``ctx.txn`` for Produce v12: answers each implicit add from a script (then NONE) and
    writes a marker of the producer between the first two asks, as the previous transaction's
    marker lands while the coordinator still answers CONCURRENT_TRANSACTIONS."""

    def __init__(self, harness, answers) -> None:
        self.harness, self.answers, self.asked = harness, list(answers), []

    async def add_partitions(self, transactional_id, producer_id, producer_epoch, partitions):
        self.asked.append(list(partitions))
        if len(self.asked) == 1:
            await write_txn_markers.handle(self.harness.context, None, WriteTxnMarkersRequest.from_dict({
                "markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": True, "coordinator_epoch": 0,
                             "topics": [{"name": t, "partition_indexes": [p]} for t, p in partitions]}]}))
        code = self.answers.pop(0) if self.answers else ErrorCode.NONE
        return {tp: code for tp in partitions}


def test_produce_v12_adds_the_partition_and_retries_concurrent_transactions(harness):
    """Transaction version 2: Produce v12 asks ``ctx.txn`` to add its partitions, all in one
    call (not the verifier, which a disabled verification would make accept anything);
    CONCURRENT_TRANSACTIONS is asked again (Kafka's add.partitions.to.txn.retry.backoff.ms), and
    the guard is taken after the add (the marker written in between would drop an earlier one).
    Produce v9 and v11 still only verify."""
    harness.context.txn_verifier = ScriptedVerifier({("events", 0): ErrorCode.INVALID_TXN_STATE})
    harness.context.txn = coordinator = AddingCoordinator(harness, [ErrorCode.CONCURRENT_TRANSACTIONS])
    request = {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
               "topic_data": [{"name": "events", "partition_data": [
                   {"index": p, "records": txn_batch(["a"])} for p in (0, 1)]}]}
    answers = run(harness.call(PRODUCE, 12, request)).responses[0].partition_responses
    assert [a.error_code for a in answers] == [ErrorCode.NONE] * 2
    assert coordinator.asked == [[("events", 0), ("events", 1)]] * 2
    assert harness.context.txn_verifier.asked == []
    request["topic_data"][0]["partition_data"] = [{"index": 0, "records": txn_batch(["b"], epoch=1)}]
    assert run(harness.call(PRODUCE, 9, request)).responses[0].partition_responses[0].error_code \
        == ErrorCode.INVALID_TXN_STATE
    # Produce v11+ may carry TRANSACTION_ABORTABLE, which Kafka 4.1 answers for a partition not
    # in the transaction
    assert run(harness.call(PRODUCE, 11, request)).responses[0].partition_responses[0].error_code \
        == ErrorCode.TRANSACTION_ABORTABLE


def test_api_versions_finalizes_transaction_version_2():
    """Java clients take transaction version 2 from the finalized feature (with an epoch >= 0);
    v3 answers leave out a supported feature whose minimum is 0 (KAFKA-17011)."""
    from broker.server.handlers.api_versions import supported_response
    from broker.wire import ApiVersionsResponse
    from broker.wire.frame import decode_response, encode_response
    for version, supported in ((4, [("transaction.version", 0, 2)]), (3, [])):
        _, decoded = decode_response(18, version, encode_response(18, version, 1, supported_response(version)))
        assert [(f.name, f.max_version_level, f.min_version_level) for f in decoded.finalized_features] == \
            [("transaction.version", 2, 2)]
        assert decoded.finalized_features_epoch >= 0 and isinstance(decoded, ApiVersionsResponse)
        assert [(f.name, f.min_version, f.max_version) for f in decoded.supported_features] == supported
