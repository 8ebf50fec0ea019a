"""Raw transaction requests for the peer tier's error tests: InitProducerId with a transactional
id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, a transactional Produce,
DescribeTransactions, ListTransactions and DescribeProducers, the same bytes to Apache Kafka and to
pylog on a plain socket (``wire_probe.connect``), answers reduced to error code names and the
fields a producer acts on.

A one-broker peer coordinates every transactional id and group and leads every partition, so all
requests go to ``peer.ports[0]``. Bodies are dicts in Kafka's JSON field names (snake_case).
"""

from __future__ import annotations

import time

from txn_clients import unique_txn_id, wait_for_txn_coordinator, wait_until
from wire_probe import connect

from broker.records import Record, encode_batch
from broker.wire import ApiKey, ErrorCode

__all__ = ["VERSIONS", "TxnWire", "error_name"]

# The versions a producer of Kafka 3.x/4.x sends with transaction version 1 (EndTxn v5 and
# InitProducerId v5+ are KIP-890 part 2's and KIP-939's; AddPartitionsToTxn v4+ is broker to
# broker): the ones compared unless a test names another.
VERSIONS = {
    ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 3, ApiKey.PRODUCE: 9, ApiKey.DESCRIBE_TRANSACTIONS: 0,
    ApiKey.LIST_TRANSACTIONS: 1, ApiKey.DESCRIBE_PRODUCERS: 0,
}
CLIENT_ID = "peer-tier"
_RETRIABLE = {"COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
              "CONCURRENT_TRANSACTIONS"}
RETRY_TIMEOUT_S = 20.0


def error_name(code: int) -> str:
    return ErrorCode(code).name


class TxnWire:
    """One connection to a peer and one transactional id (``transactional_id``), with the
    producer id and epoch its last InitProducerId gave (``producer_id``, ``epoch``). Each call
    may override them, for a wrong id or a stale epoch."""

    def __init__(self, peer, prefix: str = "wire-txn") -> None:
        self.peer = peer
        self.transactional_id = unique_txn_id(prefix)
        self.producer_id, self.epoch = -1, -1
        self.sequences: dict[tuple[str, int], int] = {}
        wait_for_txn_coordinator(peer, self.transactional_id)
        self.raw = connect(peer)
        self.raw.client_id = CLIENT_ID
        self.ready()

    def __enter__(self) -> "TxnWire":
        return self

    def __exit__(self, *exc) -> None:
        self.raw.close()

    def call(self, api_key: int, body: dict, version: int | None = None):
        return self.raw.call(api_key, VERSIONS[api_key] if version is None else version, body)

    def retried(self, request, what: str):
        """``request()``'s (error name, answer), sent again while the error is retriable (a
        coordinator still loading; CONCURRENT_TRANSACTIONS while the previous transaction's
        markers are written). For a per-partition answer the error is a retriable one if any
        partition has one."""
        seen = {}

        def attempt():
            seen["answer"] = request()
            return seen["answer"][0] not in _RETRIABLE

        wait_until(attempt, what, RETRY_TIMEOUT_S)
        return seen["answer"]

    def ready(self) -> None:
        """Until the id's coordinator has loaded its ``__transaction_state`` partition: FindCoordinator
        answers as soon as the partition has a leader, requests get NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS until it is loaded; no scenario should start inside that window."""
        wait_until(lambda: error_name(self.describe()[0].error_code) not in _RETRIABLE,
                   f"{self.transactional_id}'s coordinator loaded on {self.peer}", RETRY_TIMEOUT_S)

    # --------------------------------------------------------------------- the producer's calls

    def init(self, transaction_timeout_ms: int = 60_000, version: int | None = None, *,
             producer_id: int = -1, epoch: int = -1, retry: bool = True) -> str:
        """InitProducerId for ``transactional_id``; on NONE the id and epoch become current."""
        def request():
            answer = self.call(ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": self.transactional_id, "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": producer_id, "producer_epoch": epoch}, version)
            return error_name(answer.error_code), answer

        error, answer = self.retried(request, "InitProducerId") if retry else request()
        if error == "NONE":
            self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
            self.sequences.clear()
        return error

    def _ids(self, producer_id: int | None, epoch: int | None) -> tuple[int, int]:
        return (self.producer_id if producer_id is None else producer_id,
                self.epoch if epoch is None else epoch)

    def add_partitions(self, partitions: list[tuple[str, int]], version: int | None = None, *,
                       producer_id: int | None = None, epoch: int | None = None,
                       retry: bool = True) -> dict[tuple[str, int], str]:
        """AddPartitionsToTxn (v3 and below: one transaction per request): {(topic, p): error}."""
        producer_id, epoch = self._ids(producer_id, epoch)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)

        def request():
            answer = self.call(ApiKey.ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": self.transactional_id, "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}, version)
            errors = {(t.name, r.partition_index): error_name(r.partition_error_code)
                      for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition}
            retriable = sorted(set(errors.values()) & _RETRIABLE)
            return (retriable[0] if retriable else "NONE"), errors

        return (self.retried(request, "AddPartitionsToTxn") if retry else request())[1]

    def add_offsets(self, group: str, version: int | None = None, *, producer_id: int | None = None,
                    epoch: int | None = None) -> str:
        """AddOffsetsToTxn (retried like EndTxn): its error."""
        producer_id, epoch = self._ids(producer_id, epoch)

        def request():
            answer = self.call(ApiKey.ADD_OFFSETS_TO_TXN, {
                "transactional_id": self.transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
                "group_id": group}, version)
            return error_name(answer.error_code), answer

        return self.retried(request, "AddOffsetsToTxn")[0]

    def txn_offset_commit(self, group: str, offsets: dict[tuple[str, int], int], version: int | None = None, *,
                          producer_id: int | None = None, epoch: int | None = None) -> dict[tuple[str, int], str]:
        producer_id, epoch = self._ids(producer_id, epoch)
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                   "committed_metadata": ""})
        answer = self.call(ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": self.transactional_id, "group_id": group, "producer_id": producer_id,
            "producer_epoch": epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}, version)
        return {(t.name, p.partition_index): error_name(p.error_code) for t in answer.topics for p in t.partitions}

    def end(self, committed: bool, version: int | None = None, *, producer_id: int | None = None,
            epoch: int | None = None, retry: bool = True) -> str:
        """EndTxn; retried while CONCURRENT_TRANSACTIONS (unless ``retry`` is False)."""
        producer_id, epoch = self._ids(producer_id, epoch)

        def request():
            answer = self.call(ApiKey.END_TXN, {
                "transactional_id": self.transactional_id, "producer_id": producer_id, "producer_epoch": epoch,
                "committed": committed}, version)
            return error_name(answer.error_code), answer

        return (self.retried(request, "EndTxn") if retry else request())[0]

    def produce(self, topic: str, partition: int, values: list[bytes], *, producer_id: int | None = None,
                epoch: int | None = None, version: int | None = None) -> tuple[str, int]:
        """One transactional batch (sequence numbers continue per partition): (error, base offset)."""
        producer_id, epoch = self._ids(producer_id, epoch)
        sequence = self.sequences.get((topic, partition), 0)
        now = int(time.time() * 1000)
        batch = encode_batch([Record(i, now, None, v) for i, v in enumerate(values)], producer_id=producer_id,
                             producer_epoch=epoch, base_sequence=sequence, transactional=True)
        answer = self.call(ApiKey.PRODUCE, {
            "transactional_id": self.transactional_id, "acks": -1, "timeout_ms": 10_000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}, version)
        [topic_answer] = answer.responses
        [partition_answer] = topic_answer.partition_responses
        error = error_name(partition_answer.error_code)
        if error == "NONE":
            self.sequences[(topic, partition)] = sequence + len(values)
        return error, partition_answer.base_offset

    # ------------------------------------------------------------------------ the admin's calls

    def describe(self, transactional_ids: list[str] | None = None) -> list:
        answer = self.call(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": transactional_ids or [
            self.transactional_id]})
        return answer.transaction_states

    def state(self) -> str:
        [state] = self.describe()
        return state.transaction_state

    def wait_for_state(self, state: str) -> None:
        wait_until(lambda: self.state() == state, f"{self.transactional_id} {state}", RETRY_TIMEOUT_S)

    def list(self, states: list[str] | None = None, producer_ids: list[int] | None = None) -> dict[str, tuple]:
        answer = self.call(ApiKey.LIST_TRANSACTIONS, {"state_filters": states or [],
                                                      "producer_id_filters": producer_ids or [],
                                                      "duration_filter": -1})
        assert answer.error_code == ErrorCode.NONE, error_name(answer.error_code)
        return {t.transactional_id: (t.producer_id, t.transaction_state) for t in answer.transaction_states}

    def producers(self, topic: str, partition: int = 0) -> tuple[str, list]:
        answer = self.call(ApiKey.DESCRIBE_PRODUCERS, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        [topic_answer] = answer.topics
        [partition_answer] = topic_answer.partitions
        return error_name(partition_answer.error_code), list(partition_answer.active_producers)
