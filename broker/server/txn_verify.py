"""``RemoteTxnVerifier``: KIP-890 part 1 verification of a transactional produce whose
transactional id another broker coordinates (Kafka's ``AddPartitionsToTxnManager``).

The partition leader sends a verify-only AddPartitionsToTxn (v4, the broker form) for the
producer's id, epoch and partition to the leader of the id's ``__transaction_state`` partition,
whose handler hands it to its transaction coordinator's core (read-only there). One connection
per coordinator broker, one request at a time on it (``InterBrokerConnection``); concurrent
verifications to the same broker queue on its lock. A verification is needed only for a
producer's first batch of a transaction on a partition, so this is off the hot path.

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

__all__ = ["RemoteTxnVerifier", "VERIFY_VERSION"]

VERIFY_VERSION = 4  # v5 only adds TRANSACTION_ABORTABLE answers
_Transaction = AddPartitionsToTxnRequest._nested["transactions"][0]
_Topic = _Transaction._nested["topics"][0]


class RemoteTxnVerifier:
    def __init__(self, broker_id: int, snapshot: Callable, listener_name: str, num_partitions: int,
                 timeout_s: float) -> None:
        self._client_id = f"broker-{broker_id}-txn-verify"
        self._snapshot = snapshot
        self._listener = listener_name
        self._num_partitions = num_partitions
        self._timeout_s = timeout_s
        self._connections: dict[tuple[str, int], tuple[InterBrokerConnection, asyncio.Lock]] = {}
        self.requests = 0

    async def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       topic: str, partition: int) -> int:
        snapshot = self._snapshot()
        state_topic = snapshot.topics.get(TRANSACTION_STATE_TOPIC_NAME)
        view = None if state_topic is None else state_topic.partitions.get(
            partition_for(transactional_id, self._num_partitions))
        leader = -1 if view is None or view.state is None else view.state.leader
        endpoint = snapshot.endpoint(leader, self._listener) if leader >= 0 else None
        if endpoint is None:
            return ErrorCode.NOT_COORDINATOR
        key = (endpoint.host, endpoint.port)
        if key not in self._connections:
            self._connections[key] = (InterBrokerConnection(endpoint.host, endpoint.port, self._client_id,
                                                            self._timeout_s), asyncio.Lock())
        connection, lock = self._connections[key]
        request = AddPartitionsToTxnRequest(transactions=[_Transaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[_Topic(name=topic, partitions=[partition])])])
        async with lock:
            self.requests += 1
            response = await connection.request(ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request)
        if response.error_code != ErrorCode.NONE:
            return response.error_code
        for result in response.results_by_transaction:
            for topic_result in result.topic_results:
                for p in topic_result.results_by_partition:
                    if topic_result.name == topic and p.partition_index == partition:
                        return p.partition_error_code
        return ErrorCode.INVALID_TXN_STATE

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection, _ in connections.values():
            await connection.close()
