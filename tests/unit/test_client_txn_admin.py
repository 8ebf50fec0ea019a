"""``TxnAdmin.list_transactions`` asks every broker at once (the exactly-once sink lists its open
transactions in every driver commit: one round trip, not one per broker), and a broker that
joined is found by the broker-list refresh sent while the others answer."""

from __future__ import annotations

import threading

from fake_kafka import InMemoryKafka

from broker.client import Cluster
from broker.client.txn_admin import TransactionListing, TxnAdmin
from broker.wire import ApiKey
from broker.wire.apis.list_transactions import ListTransactionsResponse

WAIT_S = 5  # a broker asked alone waits this long for the others before the test fails


def _answer_listing(kafka: InMemoryKafka, barrier: threading.Barrier | None) -> None:
    """Each broker lists one open transaction, ``t<node>``; with ``barrier``, none answers
    before every broker has been asked."""
    for broker in kafka.brokers:
        def handle(header, request, inner=broker.handler, node=broker.node_id):
            if header.api_key != ApiKey.LIST_TRANSACTIONS:
                return inner(header, request)
            if barrier is not None:
                barrier.wait(WAIT_S)  # BrokenBarrierError (the test fails) if asked one by one
            assert list(request.state_filters) == ["Ongoing"]
            return ListTransactionsResponse(error_code=0, unknown_state_filters=[], transaction_states=[
                ListTransactionsResponse.TransactionState(transactional_id=f"t{node}", producer_id=node,
                                                          transaction_state="Ongoing")])
        broker.handler = handle


def _expected(nodes) -> dict[int, list[TransactionListing]]:
    return {n: [TransactionListing(f"t{n}", n, "Ongoing")] for n in nodes}


def test_every_broker_is_asked_before_any_answer_is_read():
    with InMemoryKafka(brokers=3) as kafka:
        _answer_listing(kafka, threading.Barrier(3))
        cluster = Cluster(kafka.bootstrap)
        try:
            admin = TxnAdmin(cluster)
            assert admin.list_transactions(states=["Ongoing"], refresh_brokers=True) == _expected(range(3))
            # The connections are clean afterwards: a second listing answers the same.
            _answer_listing(kafka, None)
            assert admin.list_transactions(states=["Ongoing"]) == _expected(range(3))
        finally:
            cluster.close()
        assert kafka.handler_errors == []


def test_a_broker_that_joined_is_found_by_the_refresh_sent_meanwhile():
    with InMemoryKafka(brokers=3) as kafka:
        _answer_listing(kafka, None)
        cluster = Cluster(kafka.bootstrap)
        try:
            joining = kafka.brokers.pop()  # the cached broker list has nodes 0 and 1 only
            cluster.refresh_brokers()
            kafka.brokers.append(joining)
            assert sorted(cluster.brokers) == [0, 1]
            assert TxnAdmin(cluster).list_transactions(states=["Ongoing"], refresh_brokers=True) == _expected(range(3))
            metadata_requests = sum(len(b.requests_for(ApiKey.METADATA)) for b in kafka.brokers)
            assert metadata_requests == 2  # the first refresh and the one sent while 0 and 1 answered
        finally:
            cluster.close()
        assert kafka.handler_errors == []
