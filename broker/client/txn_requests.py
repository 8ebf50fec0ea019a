"""The transactional producer's requests to its transaction coordinator (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and to a group coordinator (TxnOffsetCommit), each
a blocking round trip retried as Kafka's Java ``TransactionManager`` retries it:

* CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, a timeout or a lost connection: the
  same request again after a backoff (``retry_backoff_ms`` doubling up to 1 s; 20 ms for
  CONCURRENT_TRANSACTIONS, the previous transaction's markers being written, as Java);
* NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE: FindCoordinator again (key type 1 for the
  transaction coordinator, 0 for the group's), then the same request;
* anything else ends the call: ``ProducerFencedError`` (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH),
  ``TransactionAbortableError``, or ``KafkaError`` (``txn_state.fatal_or_abortable``).

Every call is bounded by ``deadline_ms`` (on the cluster's monotonic clock): past it, the last
error is raised as ``KafkaTimeoutError``, and the caller may call again (Java's "retry the same
commitTransaction" rule).

Versions (caps in ``connection._client_versions``): EndTxn v5 where the coordinator offers it
(transaction version 2's epoch bump at every EndTxn, KIP-890 part 2: ``end_txn`` returns the
producer id and epoch to go on with). Where the coordinator finalizes transaction version 2
(``transaction_version``) the producer sends no AddPartitionsToTxn/AddOffsetsToTxn: Produce v12
and TxnOffsetCommit v5 have their partitions added implicitly; otherwise AddPartitionsToTxn
<= 3 (v4+ are brokers' requests), TxnOffsetCommit <= 4. AddOffsetsToTxn <= 4, InitProducerId <= 4.
"""

from __future__ import annotations

from collections import defaultdict

from broker.client.coordinator import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, RETRY_BACKOFF_MAX_MS, find_coordinator
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster
from broker.client.txn_state import ErrorKind, classify, fatal_or_abortable
from broker.wire import ApiKey, ErrorCode

__all__ = ["TxnCoordinatorClient", "CONCURRENT_TRANSACTIONS_BACKOFF_MS"]

CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20


class TxnCoordinatorClient:
    """Requests of one transactional id. Not thread-safe: the caller holds the producer's I/O lock
    (the ``Cluster`` and its sockets belong to whoever holds it)."""

    def __init__(self, cluster: Cluster, transactional_id: str, coordinator: int | None = None) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self._coordinators: dict[tuple[int, str], int] = {}  # (key type, key) -> node id
        if coordinator is not None:
            # The node another client of this id found (e.g. the Spark sink's task, for the
            # driver's EndTxn): no FindCoordinator. A stale one answers NOT_COORDINATOR or fails
            # to connect, and the usual lookup follows; one missing from the cluster's metadata
            # raises BROKER_NOT_AVAILABLE (spark_log.transactions connects first, drops it then).
            self._coordinators[(KEY_TYPE_TRANSACTION, transactional_id)] = coordinator

    @property
    def coordinator(self) -> int | None:
        """The transaction coordinator's node id as last found (None: not looked up yet, or
        dropped after an error)."""
        return self._coordinators.get((KEY_TYPE_TRANSACTION, self.transactional_id))

    # ------------------------------------------------------------------ the requests

    def init_producer_id(self, transaction_timeout_ms: int, deadline_ms: float) -> tuple[int, int]:
        body = {"transactional_id": self.transactional_id, "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        response = self._call(ApiKey.INIT_PRODUCER_ID, body, lambda r: r.error_code, deadline_ms,
                              "InitProducerId")
        return response.producer_id, response.producer_epoch

    def add_partitions(self, producer_id: int, producer_epoch: int, tps, deadline_ms: float) -> None:
        """AddPartitionsToTxn v0-3 with every partition in ``tps`` at once. A partition's
        OPERATION_NOT_ATTEMPTED (another one of the request failed) is not its own error."""
        topics = defaultdict(list)
        for topic, partition in sorted(tps):
            topics[topic].append(partition)
        body = {"v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        def error_of(response) -> int:
            codes = [p.partition_error_code for t in response.results_by_topic_v3_and_below
                     for p in t.results_by_partition if p.partition_error_code != ErrorCode.NONE]
            real = [c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED]
            return (real or codes or [ErrorCode.NONE])[0]

        self._call(ApiKey.ADD_PARTITIONS_TO_TXN, body, error_of, deadline_ms, "AddPartitionsToTxn",
                   max_version=3)

    def add_offsets(self, producer_id: int, producer_epoch: int, group_id: str, deadline_ms: float) -> None:
        body = {"transactional_id": self.transactional_id, "producer_id": producer_id,
                "producer_epoch": producer_epoch, "group_id": group_id}
        self._call(ApiKey.ADD_OFFSETS_TO_TXN, body, lambda r: r.error_code, deadline_ms, "AddOffsetsToTxn",
                   max_version=4)

    def transaction_version(self, deadline_ms: float) -> int:
        """2 when the coordinator finalizes ``transaction.version`` 2 (KIP-584 features in its
        ApiVersions) and offers Produce v12, EndTxn v5 and TxnOffsetCommit v5 (Java's
        ``TransactionManager.isTransactionV2Enabled``); else 1."""
        conn = self._coordinator((KEY_TYPE_TRANSACTION, self.transactional_id), deadline_ms)
        conn.connect()
        offered = conn.broker_api_versions
        if (conn.finalized_features.get("transaction.version", 0) >= 2
                and offered.get(ApiKey.PRODUCE, (0, -1))[1] >= 12 and offered.get(ApiKey.END_TXN, (0, -1))[1] >= 5
                and offered.get(ApiKey.TXN_OFFSET_COMMIT, (0, -1))[1] >= 5):
            return 2
        return 1

    def txn_offset_commit(self, producer_id: int, producer_epoch: int, offsets: dict, group: dict,
                          deadline_ms: float, transaction_version: int = 1) -> None:
        """TxnOffsetCommit to the group's coordinator; ``offsets`` maps (topic, partition) to an
        offset, (offset, metadata) or an ``OffsetAndMetadata``; ``group`` is ``Consumer.group_metadata()`` (or just
        ``{"group_id": ...}``: generation -1 and no member id, which the coordinator does not
        fence, as Java's deprecated String overload)."""
        topics = defaultdict(list)
        for (topic, partition), value in sorted(offsets.items()):
            if hasattr(value, "offset"):  # an OffsetAndMetadata
                offset, metadata = value.offset, getattr(value, "metadata", "") or ""
            else:
                offset, metadata = value if isinstance(value, tuple) else (value, "")
            topics[topic].append({"partition_index": partition, "committed_offset": offset,
                                  "committed_leader_epoch": -1, "committed_metadata": metadata})
        body = {"transactional_id": self.transactional_id, "group_id": group["group_id"],
                "producer_id": producer_id, "producer_epoch": producer_epoch,
                "generation_id": group.get("generation_id", -1), "member_id": group.get("member_id") or "",
                "group_instance_id": group.get("group_instance_id"),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        def error_of(response) -> int:
            codes = [p.error_code for t in response.topics for p in t.partitions if p.error_code]
            return codes[0] if codes else ErrorCode.NONE

        # v5 (transaction version 2): the group coordinator adds the offsets partition itself
        self._call(ApiKey.TXN_OFFSET_COMMIT, body, error_of, deadline_ms, "TxnOffsetCommit",
                   key=(KEY_TYPE_GROUP, group["group_id"]), max_version=5 if transaction_version >= 2 else 4)

    def end_txn(self, producer_id: int, producer_epoch: int, committed: bool,
                deadline_ms: float) -> tuple[int, int] | None:
        """EndTxn; the (producer id, epoch) the coordinator bumped to when it speaks v5
        (transaction version 2: the next transaction must use them), else None (same epoch)."""
        body = {"transactional_id": self.transactional_id, "producer_id": producer_id,
                "producer_epoch": producer_epoch, "committed": committed}
        response = self._call(ApiKey.END_TXN, body, lambda r: r.error_code, deadline_ms, "EndTxn",
                              max_version=5)
        if getattr(response, "producer_epoch", -1) < 0 or getattr(response, "producer_id", -1) < 0:
            return None
        return response.producer_id, response.producer_epoch

    # ------------------------------------------------------------------ one call, retried

    def _call(self, api_key: int, body: dict, error_of, deadline_ms: float, what: str, *,
              key: tuple[int, str] | None = None, max_version: int = 0x7FFF):
        """The answer once its error (``error_of``) is NONE (see the module docstring)."""
        key = key or (KEY_TYPE_TRANSACTION, self.transactional_id)
        clock = self.cluster.clock
        backoff_ms = max(self.cluster.config.retry_backoff_ms, 1)
        concurrent_backoff_ms = min(backoff_ms, CONCURRENT_TRANSACTIONS_BACKOFF_MS)
        while True:
            try:
                conn = self._coordinator(key, deadline_ms)
                version = conn.version_for(api_key, max_version=max_version)
                response = conn.request(api_key, body, version)
            except KafkaError as exc:
                if not isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)) and not exc.retriable:
                    raise
                error = exc
                self._coordinators.pop(key, None)
                self.cluster.invalidate()
                response = None
            if response is not None:
                code = error_of(response)
                kind = classify(code)
                if kind is ErrorKind.NONE:
                    return response
                error = KafkaError(code, f"{what} for {self.transactional_id!r}: {KafkaError(code).message}")
                if kind is ErrorKind.FIND_COORDINATOR:
                    self._coordinators.pop(key, None)
                elif kind is not ErrorKind.RETRY:
                    raise fatal_or_abortable(code, error.message)
            remaining_ms = deadline_ms - clock.monotonic_ms()
            if remaining_ms <= 0:
                raise KafkaTimeoutError(f"{what} for {self.transactional_id!r} did not succeed in time; "
                                        f"last error: {error}")
            if error.code == ErrorCode.CONCURRENT_TRANSACTIONS:
                # The previous transaction's markers are being written (milliseconds): Java
                # retries these after 20 ms, not retry.backoff.ms (its ADD_PARTITIONS_RETRY_BACKOFF_MS).
                clock.sleep_ms(min(concurrent_backoff_ms, remaining_ms))
                continue
            clock.sleep_ms(min(backoff_ms, remaining_ms))
            backoff_ms = min(backoff_ms * 2, RETRY_BACKOFF_MAX_MS)

    def _coordinator(self, key: tuple[int, str], deadline_ms: float):
        node = self._coordinators.get(key)
        if node is None:
            remaining_ms = max(deadline_ms - self.cluster.clock.monotonic_ms(), 1)
            node = find_coordinator(self.cluster, key[1], key[0], timeout_ms=remaining_ms).node_id
            self._coordinators[key] = node
        return self.cluster.request_connection(node)
