"""Admin operations on transactions (``pylog transactions``), as Kafka's ``Admin`` does them:

* ``list_transactions``: ListTransactions to every broker at once (each lists the transactional
  ids it coordinates), by broker id;
* ``describe_transactions``: DescribeTransactions to each id's coordinator (FindCoordinator key
  type 1);
* ``describe_producers``: DescribeProducers to the partition's leader (or a given replica);
* ``abort_transaction``: WriteTxnMarkers v1 (an ABORT marker) straight to the partition's leader,
  with the producer id and epoch and a coordinator epoch the caller got from DescribeProducers --
  Kafka's ``Admin.abortTransaction``, the way out of a *hanging* transaction (one open on a
  partition that its coordinator no longer knows of). The coordinator is not told.

Every call raises ``KafkaError`` with the broker's code for a failed key; retriable errors of
the coordinator (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR...) are retried until
``timeout_ms`` (default ``request_timeout_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.client.coordinator import KEY_TYPE_TRANSACTION, RETRY_BACKOFF_MAX_MS, find_coordinator
from broker.client.errors import KafkaError
from broker.client.metadata import Cluster
from broker.wire import ApiKey, ErrorCode

__all__ = ["TxnAdmin", "TransactionListing", "TransactionDescription", "ProducerState"]

WRITE_TXN_MARKERS_VERSION = 1  # the one version Kafka 4.1 advertises (v0 is gone)
_RETRIED = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                      ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None  # None: no open transaction
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None  # None: no marker written by a coordinator yet
    current_txn_start_offset: int | None  # None: no open transaction on the partition


class TxnAdmin:
    """Blocking; not thread-safe (one ``Cluster``)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def list_transactions(self, *, states=(), producer_ids=(), duration_filter_ms: int = -1,
                          transactional_id_pattern: str | None = None,
                          refresh_brokers: bool = False) -> dict[int, list[TransactionListing]]:
        """Every broker's transactions: {broker id: listings}. A duration filter needs
        ListTransactions v1, an id pattern (a Java regular expression, matched by the broker) v2:
        a broker without it raises UNSUPPORTED_VERSION, as Kafka's Admin does.

        Every broker is asked at once (each request goes out on its broker's connection before
        any answer is read): the call takes the slowest broker's answer, not the sum of all of
        them (the exactly-once sink lists its open transactions in every driver commit).
        ``refresh_brokers``: the broker list is asked for again meanwhile (on a spare
        connection) and any broker it adds is asked too: a broker that joined is not missed,
        and the refresh costs no round trip of its own."""
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": duration_filter_ms, "transactional_id_pattern": transactional_id_pattern}
        min_version = 2 if transactional_id_pattern is not None else 1 if duration_filter_ms >= 0 else 0
        asked = sorted(self.cluster.brokers)
        out = self._list_on(asked, body, min_version, self.cluster.refresh_brokers if refresh_brokers else None)
        joined = sorted(set(self.cluster.brokers) - set(asked))
        if joined:
            out.update(self._list_on(joined, body, min_version, None))
        return out

    def _list_on(self, nodes: list[int], body: dict, min_version: int,
                 meanwhile) -> dict[int, list[TransactionListing]]:
        """ListTransactions to ``nodes``: all sent, then ``meanwhile()`` (if any), then all read."""
        sent = []
        try:
            for node in nodes:
                conn = self.cluster.request_connection(node)
                conn.send(ApiKey.LIST_TRANSACTIONS, body, conn.version_for(ApiKey.LIST_TRANSACTIONS, min_version))
                sent.append((node, conn))
            if meanwhile is not None:
                meanwhile()
            out = {}
            for node, conn in sent:
                response = conn.receive()
                if response.error_code != ErrorCode.NONE:
                    raise KafkaError(response.error_code, f"ListTransactions on broker {node}")
                out[node] = [TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                             for t in response.transaction_states]
            return out
        except BaseException:
            for _, conn in sent:  # an answer left unread would be taken for the next request's
                if conn.in_flight_count:
                    conn.close()
            raise

    def describe_transaction(self, transactional_id: str, timeout_ms: float | None = None) -> TransactionDescription:
        """DescribeTransactions at the id's coordinator; TRANSACTIONAL_ID_NOT_FOUND raises."""
        def ask():
            node = find_coordinator(self.cluster, transactional_id, KEY_TYPE_TRANSACTION, timeout_ms=timeout_ms)
            conn = self.cluster.request_connection(node.node_id)
            response = conn.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]},
                                    conn.version_for(ApiKey.DESCRIBE_TRANSACTIONS))
            state = next(s for s in response.transaction_states if s.transactional_id == transactional_id)
            if state.error_code != ErrorCode.NONE:
                raise KafkaError(state.error_code, f"transactional id {transactional_id!r}: "
                                 f"{KafkaError(state.error_code).message}")
            partitions = tuple((t.topic, p) for t in state.topics for p in t.partitions)
            start = state.transaction_start_time_ms
            return TransactionDescription(node.node_id, transactional_id, state.producer_id, state.producer_epoch,
                                          state.transaction_state, state.transaction_timeout_ms,
                                          None if start < 0 else start, partitions)
        return self._retried(ask, timeout_ms)

    def describe_producers(self, tps, broker_id: int | None = None,
                           timeout_ms: float | None = None) -> dict[tuple[str, int], list[ProducerState]]:
        """Active producers per partition, from each partition's leader (or ``broker_id``)."""
        out = {}
        for topic, partition in tps:
            def ask(topic=topic, partition=partition):
                node = broker_id if broker_id is not None else self.cluster.leader_for(topic, partition)
                if node < 0:
                    raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
                conn = self.cluster.request_connection(node)
                response = conn.request(ApiKey.DESCRIBE_PRODUCERS,
                                        {"topics": [{"name": topic, "partition_indexes": [partition]}]},
                                        conn.version_for(ApiKey.DESCRIBE_PRODUCERS))
                answer = next(p for t in response.topics if t.name == topic for p in t.partitions
                              if p.partition_index == partition)
                if answer.error_code != ErrorCode.NONE:
                    if answer.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER,):
                        self.cluster.invalidate(topic)
                    raise KafkaError(answer.error_code, answer.error_message or f"{topic}-{partition}: "
                                     f"{KafkaError(answer.error_code).message}")
                return [ProducerState(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                      None if s.coordinator_epoch < 0 else s.coordinator_epoch,
                                      None if s.current_txn_start_offset < 0 else s.current_txn_start_offset)
                        for s in answer.active_producers]
            out[(topic, partition)] = self._retried(ask, timeout_ms)
        return out

    def abort_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                          coordinator_epoch: int, timeout_ms: float | None = None) -> None:
        """An ABORT marker for ``producer_id``'s open transaction on one partition, written by
        its leader (WriteTxnMarkers)."""
        body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                             "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                             "topics": [{"name": topic, "partition_indexes": [partition]}]}]}

        def ask():
            node = self.cluster.leader_for(topic, partition)
            conn = self.cluster.request_connection(node)
            response = conn.request(ApiKey.WRITE_TXN_MARKERS, body, WRITE_TXN_MARKERS_VERSION)
            codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
            code = next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
            if code != ErrorCode.NONE:
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    self.cluster.invalidate(topic)
                raise KafkaError(code, f"WriteTxnMarkers for {topic}-{partition}: {KafkaError(code).message}")
        self._retried(ask, timeout_ms)

    def _retried(self, ask, timeout_ms: float | None):
        clock = self.cluster.clock
        deadline = clock.monotonic_ms() + (self.cluster.config.request_timeout_ms if timeout_ms is None else timeout_ms)
        backoff = max(self.cluster.config.retry_backoff_ms, 1)
        while True:
            try:
                return ask()
            except KafkaError as exc:
                if exc.code not in _RETRIED and not exc.retriable:
                    raise
                if clock.monotonic_ms() + backoff >= deadline:
                    raise
            clock.sleep_ms(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_MS)
