"""The transactional producer against ``InMemoryKafka`` with a scripted transaction coordinator
on broker 1: the retry rules of Java's TransactionManager (CONCURRENT_TRANSACTIONS and
COORDINATOR_LOAD_IN_PROGRESS retried, NOT_COORDINATOR looked up again), AddPartitionsToTxn for
every new partition in one request before their first Produce, transactional Produce requests and
batches, EndTxn only after every batch is acknowledged, fencing as a fatal error, a failed batch
as an abortable one (abort, then a new epoch), and an empty transaction ended without EndTxn.
"""

from __future__ import annotations

import pytest
from client_helpers import FAST, in_memory_cluster, wait_until
from fake_kafka import Fault

import fake_kafka
from broker.client import Cluster, Producer, ProducerFencedError, TransactionAbortableError
from broker.client.txn_requests import TxnCoordinatorClient
from broker.records import decode_batch
from broker.wire import (
    SUPPORTED_API_VERSIONS,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    ApiKey,
    EndTxnResponse,
    ErrorCode,
    FindCoordinatorResponse,
    InitProducerIdResponse,
)

COORDINATOR = 1
VERSIONS = {**SUPPORTED_API_VERSIONS, ApiKey.FIND_COORDINATOR: (0, 3), ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
            ApiKey.END_TXN: (0, 5), ApiKey.ADD_OFFSETS_TO_TXN: (0, 4), ApiKey.INIT_PRODUCER_ID: (0, 5)}


class Coordinator:
    """Per test: the transactional id's epoch, the partitions added, and error codes to answer
    next, per API (popped one per request)."""

    def __init__(self) -> None:
        self.epoch = -1
        self.errors: dict[int, list[int]] = {}
        self.added: list[list[tuple[str, int]]] = []
        self.ended: list[bool] = []

    def next_error(self, api_key: int) -> int:
        queue = self.errors.get(api_key)
        return queue.pop(0) if queue else ErrorCode.NONE


@pytest.fixture
def kafka(monkeypatch):
    coordinator = Coordinator()

    def find_coordinator(self, node_id, header, request, fault):
        broker = self.brokers[COORDINATOR]
        return FindCoordinatorResponse(error_code=coordinator.next_error(ApiKey.FIND_COORDINATOR),
                                       node_id=COORDINATOR, host="127.0.0.1", port=broker.port)

    def init_producer_id(self, node_id, header, request, fault):
        if request.transactional_id is None:
            return InitProducerIdResponse(error_code=0, producer_id=1, producer_epoch=0)
        code = ErrorCode.NOT_COORDINATOR if node_id != COORDINATOR else coordinator.next_error(ApiKey.INIT_PRODUCER_ID)
        if code:
            return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
        coordinator.epoch += 1
        return InitProducerIdResponse(error_code=0, producer_id=4242, producer_epoch=coordinator.epoch)

    def add_partitions(self, node_id, header, request, fault):
        code = coordinator.next_error(ApiKey.ADD_PARTITIONS_TO_TXN)
        if not code:
            coordinator.added.append(sorted((t.name, p) for t in request.v3_and_below_topics for p in t.partitions))
        topic_cls = AddPartitionsToTxnResponse._nested["results_by_topic_v3_and_below"][0]
        part_cls = topic_cls._nested["results_by_partition"][0]
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
            topic_cls(name=t.name, results_by_partition=[part_cls(partition_index=p, partition_error_code=code)
                                                         for p in t.partitions])
            for t in request.v3_and_below_topics])

    def end_txn(self, node_id, header, request, fault):
        code = ErrorCode.NOT_COORDINATOR if node_id != COORDINATOR else coordinator.next_error(ApiKey.END_TXN)
        if not code:
            coordinator.ended.append(request.committed)
        return EndTxnResponse(error_code=code)

    def add_offsets(self, node_id, header, request, fault):
        return AddOffsetsToTxnResponse(error_code=coordinator.next_error(ApiKey.ADD_OFFSETS_TO_TXN))

    for key, handler in ((ApiKey.FIND_COORDINATOR, find_coordinator), (ApiKey.INIT_PRODUCER_ID, init_producer_id),
                         (ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions), (ApiKey.END_TXN, end_txn),
                         (ApiKey.ADD_OFFSETS_TO_TXN, add_offsets)):
        monkeypatch.setitem(fake_kafka._HANDLERS, key, handler)
    with in_memory_cluster(4, api_versions=VERSIONS) as cluster:
        cluster.coordinator = coordinator
        yield cluster


def txn_producer(kafka, **options) -> Producer:
    options.setdefault("linger_ms", 0)
    return Producer(kafka.bootstrap, config=FAST, transactional_id="tx-unit", **options)


def requests(kafka, api_key):
    return [(h, r) for b in kafka.brokers for h, r in b.requests_for(api_key)]


def test_init_retries_concurrent_transactions_and_looks_up_a_moved_coordinator(kafka):
    kafka.coordinator.errors = {ApiKey.INIT_PRODUCER_ID: [ErrorCode.CONCURRENT_TRANSACTIONS,
                                                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                                          ErrorCode.NOT_COORDINATOR]}
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        assert (producer.producer_id, producer.producer_epoch) == (4242, 0)
        assert producer.transaction_state == "Ready"
    inits = [r for _, r in requests(kafka, ApiKey.INIT_PRODUCER_ID)]
    assert len(inits) == 4 and all(r.transactional_id == "tx-unit" for r in inits)
    assert len(requests(kafka, ApiKey.FIND_COORDINATOR)) == 2  # once more after NOT_COORDINATOR
    assert all(h.api_version <= 4 for h, _ in requests(kafka, ApiKey.INIT_PRODUCER_ID))


def test_partitions_are_added_in_one_request_before_their_first_produce(kafka):
    with txn_producer(kafka, linger_ms=200) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        for partition in range(3):
            producer.send("t", b"v%d" % partition, partition=partition)
        producer.commit_transaction(5_000)
        producer.begin_transaction()
        producer.send("t", b"again", partition=0)  # already added once, but a new transaction
        producer.commit_transaction(5_000)
    assert kafka.coordinator.added == [[("t", 0), ("t", 1), ("t", 2)], [("t", 0)]]
    assert all(h.api_version <= 3 for h, _ in requests(kafka, ApiKey.ADD_PARTITIONS_TO_TXN))
    assert all(h.api_version == 5 for h, _ in requests(kafka, ApiKey.END_TXN))  # offered: v5
    assert kafka.coordinator.ended == [True, True]
    produces = [r for _, r in requests(kafka, ApiKey.PRODUCE)]
    assert produces and all(r.transactional_id == "tx-unit" for r in produces)
    headers = [decode_batch(bytes(p.records)).header for r in produces for t in r.topic_data for p in t.partition_data]
    assert all(h.is_transactional and h.producer_id == 4242 for h in headers)


def test_retriable_add_partitions_errors_are_retried(kafka):
    kafka.coordinator.errors = {ApiKey.ADD_PARTITIONS_TO_TXN: [ErrorCode.CONCURRENT_TRANSACTIONS]}
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        delivery = producer.send("t", b"x", partition=1)
        producer.commit_transaction(5_000)
        assert delivery.get(1_000) is not None
    assert kafka.coordinator.added == [[("t", 1)]]


def test_a_fenced_produce_is_fatal(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.INVALID_PRODUCER_EPOCH))
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"zombie", partition=0)
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction(5_000)
        assert producer.transaction_state == "FatalError"
        with pytest.raises(ProducerFencedError):
            producer.abort_transaction(5_000)
    assert kafka.coordinator.ended == []


def test_a_fenced_end_txn_is_fatal(kafka):
    kafka.coordinator.errors = {ApiKey.END_TXN: [ErrorCode.PRODUCER_FENCED]}
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"x", partition=0)
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction(5_000)
        assert producer.transaction_state == "FatalError"


def test_a_failed_batch_dooms_the_transaction_then_abort_bumps_the_epoch(kafka):
    kafka.inject(Fault(ApiKey.PRODUCE, code=ErrorCode.CORRUPT_MESSAGE))
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"lost", partition=0)
        with pytest.raises(TransactionAbortableError):
            producer.commit_transaction(5_000)
        assert producer.transaction_state == "AbortableError"
        with pytest.raises(TransactionAbortableError):
            producer.send("t", b"more", partition=0)
        producer.abort_transaction(5_000)
        assert producer.transaction_state == "Ready" and producer.producer_epoch == 1  # sequences restart
        producer.begin_transaction()
        producer.send("t", b"kept", partition=0)
        producer.commit_transaction(5_000)
    assert kafka.coordinator.ended == [False, True]
    assert wait_until(lambda: [r.value for r in kafka.records("t", 0)] == [b"kept"])


def test_an_empty_transaction_ends_without_end_txn_and_offsets_start_one(kafka):
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.commit_transaction(5_000)
        producer.begin_transaction()
        producer.abort_transaction(5_000)
        assert kafka.coordinator.ended == []
        kafka.coordinator.errors = {ApiKey.ADD_OFFSETS_TO_TXN: [ErrorCode.ILLEGAL_GENERATION]}
        producer.begin_transaction()
        with pytest.raises(TransactionAbortableError):
            producer.send_offsets_to_transaction({("t", 0): 5}, "group-a", 5_000)
        producer.abort_transaction(5_000)
        assert kafka.coordinator.ended == []  # AddOffsetsToTxn failed: the coordinator has nothing


def test_prepare_then_complete_from_another_producer(kafka):
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"a", partition=2)
        producer.send("t", b"b", partition=3)
        prepared = producer.prepare_transaction(5_000)
        assert producer.transaction_state == "PreparedTransaction"
        assert kafka.coordinator.ended == []
    assert (prepared.transactional_id, prepared.producer_id, prepared.producer_epoch) == ("tx-unit", 4242, 0)
    assert prepared.partitions == (("t", 2), ("t", 3))
    with Producer(kafka.bootstrap, config=FAST) as driver:  # no transactional id, never sends
        driver.complete_transaction(prepared, commit=True, timeout_ms=5_000)
    (_, end), = requests(kafka, ApiKey.END_TXN)
    assert (end.transactional_id, end.producer_id, end.producer_epoch, end.committed) == ("tx-unit", 4242, 0, True)
    assert len(requests(kafka, ApiKey.INIT_PRODUCER_ID)) == 1  # the driver did not bump the epoch


def test_end_txn_goes_to_the_coordinator_the_preparing_producer_found(kafka):
    """The Spark sink's driver completes a task's prepared transaction at the coordinator that
    task found (``transaction_coordinator``, carried in its commit message): no FindCoordinator.
    A stale hint (another broker, which answers NOT_COORDINATOR) costs one lookup, no error."""
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"a", partition=0)
        prepared = producer.prepare_transaction(5_000)
        node = producer.transaction_coordinator
    assert node == COORDINATOR
    cluster = Cluster(kafka.bootstrap, FAST)
    try:
        finds = len(requests(kafka, ApiKey.FIND_COORDINATOR))
        for hint, lookups in ((node, 0), (1 - COORDINATOR, 1)):
            client = TxnCoordinatorClient(cluster, prepared.transactional_id, coordinator=hint)
            client.end_txn(prepared.producer_id, prepared.producer_epoch, True, cluster.clock.monotonic_ms() + 5_000)
            assert len(requests(kafka, ApiKey.FIND_COORDINATOR)) == finds + lookups
            assert client.coordinator == COORDINATOR
            finds += lookups
    finally:
        cluster.close()
    assert kafka.coordinator.ended == [True, True]


def test_close_aborts_an_open_transaction_but_not_a_prepared_one(kafka):
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"open", partition=0)
        producer.flush()  # on the log: the coordinator has the partition in the transaction
    assert kafka.coordinator.ended == [False]  # Java's graceful close: "Aborting incomplete transaction"
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        producer.send("t", b"prepared", partition=1)
        producer.prepare_transaction(5_000)
    assert kafka.coordinator.ended == [False]  # the prepared one is left to complete_transaction


def test_an_empty_prepared_transaction_completes_without_end_txn(kafka):
    """A Spark task that wrote no row: its PreparedTransaction is empty and completing it is a
    no-op (EndTxn would be INVALID_TXN_STATE: the coordinator never heard of it)."""
    with txn_producer(kafka) as producer:
        producer.init_transactions(5_000)
        producer.begin_transaction()
        prepared = producer.prepare_transaction(5_000)
    assert prepared.empty and prepared.partitions == () and not prepared.has_offsets
    with Producer(kafka.bootstrap, config=FAST) as driver:
        driver.complete_transaction(prepared, commit=True, timeout_ms=5_000)
    assert requests(kafka, ApiKey.END_TXN) == []
