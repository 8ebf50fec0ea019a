"""``RemoteTxnVerifier``: KIP-890 part 1 verification of a transactional produce whose
transactional id another broker coordinates (Kafka's ``AddPartitionsToTxnManager``).

The partition leader sends a verify-only AddPartitionsToTxn (v4, the broker form) for the
producer's id, epoch and partition to the leader of the id's ``__transaction_state`` partition,
whose handler hands it to its transaction coordinator's core (read-only there). One connection
per coordinator broker, one request at a time on it (``InterBrokerConnection``); verifications
that come while a request is in flight go together in the next one (a Produce verifies all its
partitions at once: one round trip, not one per partition). A verification is needed for a
producer's first batch of each transaction on each partition.

Transaction version 2 (KIP-890 part 2): with ``add`` the request is not verify-only, at v5 --
the coordinator adds the partition to the producer's transaction (a Produce v12 or TxnOffsetCommit
v5 sent no AddPartitionsToTxn), waiting there for the previous transaction to complete; adds and
verifications never share a request (nor a connection).

Answers: the partition's error code (NONE when it is in the producer's ongoing transaction), or
the response's top-level error. No coordinator known (topic or leader missing):
NOT_COORDINATOR. A connection failure raises ``InterBrokerError``: the Produce handler answers
NOT_ENOUGH_REPLICAS (retriable), as Kafka maps a coordinator it could not reach.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from broker.cluster.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.txn.core import partition_for
from broker.server.inter_broker import InterBrokerConnection
from broker.wire import AddPartitionsToTxnRequest, ApiKey, ErrorCode

__all__ = ["RemoteTxnVerifier", "VERIFY_VERSION", "ADD_VERSION", "add_request", "partition_codes"]

VERIFY_VERSION = 4  # v5 only adds TRANSACTION_ABORTABLE answers
ADD_VERSION = 5     # the implicit add of transaction version 2 (Kafka's AddPartitionsToTxnManager sends v5)
_Transaction = AddPartitionsToTxnRequest._nested["transactions"][0]
_Topic = _Transaction._nested["topics"][0]


def add_request(transactional_id: str, producer_id: int, producer_epoch: int,
                partitions: list) -> AddPartitionsToTxnRequest:
    """The broker form adding ``partitions`` [(topic, partition)] to a producer's transaction
    (not verify-only)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return AddPartitionsToTxnRequest(transactions=[_Transaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
        verify_only=False, topics=[_Topic(name=t, partitions=ps) for t, ps in topics.items()])])


def partition_codes(response, partitions: list) -> dict:
    """{(topic, partition): error} of an AddPartitionsToTxn v4+ answer for one transaction
    (the top-level error for all when there is one; INVALID_TXN_STATE for one not answered)."""
    if response.error_code != ErrorCode.NONE:
        return {tp: response.error_code for tp in partitions}
    codes = {(t.name, p.partition_index): p.partition_error_code
             for result in response.results_by_transaction for t in result.topic_results
             for p in t.results_by_partition}
    return {tp: codes.get(tp, ErrorCode.INVALID_TXN_STATE) for tp in partitions}


class RemoteTxnVerifier:
    def __init__(self, broker_id: int, snapshot: Callable, listener_name: str, num_partitions: int,
                 timeout_s: float) -> None:
        self._client_id = f"broker-{broker_id}-txn-verify"
        self._snapshot = snapshot
        self._listener = listener_name
        self._num_partitions = num_partitions
        self._timeout_s = timeout_s
        self._connections: dict[tuple[str, int], _Destination] = {}
        self.requests = 0

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       topic: str, partition: int, add: bool = False) -> int:
        """The coordinator's answer for (topic, partition): verify-only, or with ``add`` the
        implicit add of transaction version 2 (a request of its own at ``ADD_VERSION``)."""
        snapshot = self._snapshot()
        state_topic = snapshot.topics.get(TRANSACTION_STATE_TOPIC_NAME)
        view = None if state_topic is None else state_topic.partitions.get(
            partition_for(transactional_id, self._num_partitions))
        leader = -1 if view is None or view.state is None else view.state.leader
        endpoint = snapshot.endpoint(leader, self._listener) if leader >= 0 else None
        if endpoint is None:
            return ErrorCode.NOT_COORDINATOR
        # adds on a connection of their own: one waits at the coordinator for the previous
        # transaction of its id to complete, which must not hold up verifications
        key = (endpoint.host, endpoint.port, add)
        destination = self._connections.get(key)
        if destination is None:
            destination = self._connections[key] = _Destination(InterBrokerConnection(
                endpoint.host, endpoint.port, self._client_id, self._timeout_s))
        future = asyncio.get_running_loop().create_future()
        destination.pending.append(((transactional_id, producer_id, producer_epoch, add), (topic, partition), future))
        await asyncio.sleep(0)  # the other partitions of the same Produce join this request
        while not future.done():
            async with destination.lock:
                if not future.done():
                    await self._send(destination)
        return future.result()

    async def _send(self, destination: "_Destination") -> None:
        """One request for every verification waiting for this destination (those that came
        while the previous one was in flight), at most one producer per transactional id."""
        batch, rest, ids = [], [], {}
        add = destination.pending[0][0][3]  # one kind per request: verify-only or add
        for item in destination.pending:
            (tid, pid, epoch, item_add), _, _ = item
            if item_add == add and ids.setdefault(tid, (pid, epoch)) == (pid, epoch):
                batch.append(item)
            else:
                rest.append(item)
        destination.pending = rest
        by_producer: dict[tuple, dict[str, list[int]]] = {}
        for producer, (topic, partition), _ in batch:
            by_producer.setdefault(producer, {}).setdefault(topic, []).append(partition)
        request = AddPartitionsToTxnRequest(transactions=[
            _Transaction(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=not add,
                         topics=[_Topic(name=t, partitions=ps) for t, ps in topics.items()])
            for (tid, pid, epoch, _), topics in by_producer.items()])
        self.requests += 1
        try:
            response = await destination.connection.request(ApiKey.ADD_PARTITIONS_TO_TXN,
                                                             ADD_VERSION if add else VERIFY_VERSION, request)
        except Exception as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        answers = {}
        for result in response.results_by_transaction:
            for topic_result in result.topic_results:
                for p in topic_result.results_by_partition:
                    answers[(result.transactional_id, topic_result.name, p.partition_index)] = p.partition_error_code
        for (tid, _, _, _), (topic, partition), future in batch:
            if not future.done():
                future.set_result(response.error_code if response.error_code != ErrorCode.NONE
                                  else answers.get((tid, topic, partition), ErrorCode.INVALID_TXN_STATE))

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for destination in connections.values():
            await destination.connection.close()


class _Destination:
    """One coordinator broker: its connection, the lock of its one request in flight, and the
    verifications waiting for the next request."""

    __slots__ = ("connection", "lock", "pending")

    def __init__(self, connection: InterBrokerConnection) -> None:
        self.connection = connection
        self.lock = asyncio.Lock()
        self.pending: list = []
