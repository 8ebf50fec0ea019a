"""Building the transaction APIs' responses (``broker.wire`` classes), and Kafka's error codes.

Nested classes are reached through the field that holds them (``_nested``), so this does not
depend on the struct names a spec gives. The wire modules are imported on first use.
"""

from __future__ import annotations

import importlib

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
KAFKA_STORAGE_ERROR = 56
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

# The API version from which PRODUCER_FENCED is understood; older clients get
# INVALID_PRODUCER_EPOCH (KafkaApis.handleInitProducerIdRequest / EndTxn / AddPartitionsToTxn /
# AddOffsetsToTxn).
_FENCED_FROM = {INIT_PRODUCER_ID: 4, END_TXN: 2, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2}


def for_version(api_key: int, api_version: int, error_code: int) -> int:
    if error_code == PRODUCER_FENCED and api_version < _FENCED_FROM.get(api_key, 0):
        return INVALID_PRODUCER_EPOCH
    return error_code


def append_error(produce_error: int) -> int:
    """A failed ``__transaction_state`` append as the coordinator answers it
    (TransactionStateManager.appendTransactionToLog)."""
    if produce_error in (UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
                         NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT):
        return COORDINATOR_NOT_AVAILABLE
    if produce_error in (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR):
        return NOT_COORDINATOR
    if produce_error in (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE):
        return UNKNOWN_SERVER_ERROR
    return produce_error


_MODULES = {
    INIT_PRODUCER_ID: ("init_producer_id", "InitProducerIdResponse"),
    ADD_PARTITIONS_TO_TXN: ("add_partitions_to_txn", "AddPartitionsToTxnResponse"),
    ADD_OFFSETS_TO_TXN: ("add_offsets_to_txn", "AddOffsetsToTxnResponse"),
    END_TXN: ("end_txn", "EndTxnResponse"),
    DESCRIBE_TRANSACTIONS: ("describe_transactions", "DescribeTransactionsResponse"),
    LIST_TRANSACTIONS: ("list_transactions", "ListTransactionsResponse"),
}


def response_class(api_key: int):
    module, name = _MODULES[api_key]
    return getattr(importlib.import_module(f"broker.wire.apis.{module}"), name)


def _sub(cls, field_name: str):
    return cls._nested[field_name][0]


def init_producer_id(api_version: int, error_code: int, producer_id: int = -1, producer_epoch: int = -1):
    return response_class(INIT_PRODUCER_ID)(
        error_code=for_version(INIT_PRODUCER_ID, api_version, error_code),
        producer_id=producer_id, producer_epoch=producer_epoch)


def error_only(api_key: int, api_version: int, error_code: int, **fields):
    """AddOffsetsToTxn and EndTxn: one error code (EndTxn v5+: and the producer id/epoch)."""
    return response_class(api_key)(error_code=for_version(api_key, api_version, error_code), **fields)


def _topic_results(cls, field_name: str, errors: dict):
    """[topic result] of {(topic, partition): error} under ``cls.field_name``."""
    topic_cls = _sub(cls, field_name)
    part_cls = _sub(topic_cls, "results_by_partition")
    by_topic: dict[str, list] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(part_cls(partition_index=partition, partition_error_code=code))
    return [topic_cls(name=t, results_by_partition=parts) for t, parts in by_topic.items()]


def add_partitions_v3(api_version: int, errors: dict):
    cls = response_class(ADD_PARTITIONS_TO_TXN)
    errors = {tp: for_version(ADD_PARTITIONS_TO_TXN, api_version, c) for tp, c in errors.items()}
    return cls(results_by_topic_v3_and_below=_topic_results(cls, "results_by_topic_v3_and_below", errors))


def add_partitions_v4(results: list):
    """``results``: [(transactional id, {(topic, partition): error})] in request order."""
    cls = response_class(ADD_PARTITIONS_TO_TXN)
    txn_cls = _sub(cls, "results_by_transaction")
    return cls(error_code=NONE, results_by_transaction=[
        txn_cls(transactional_id=tid, topic_results=_topic_results(txn_cls, "topic_results", errors))
        for tid, errors in results])


def describe(states: list):
    cls = response_class(DESCRIBE_TRANSACTIONS)
    return cls(transaction_states=states)


def describe_state(transactional_id: str, error_code: int, meta=None):
    cls = _sub(response_class(DESCRIBE_TRANSACTIONS), "transaction_states")
    if meta is None:
        return cls(error_code=error_code, transactional_id=transactional_id, transaction_state="",
                   transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                   producer_epoch=-1, topics=[])
    topic_cls = _sub(cls, "topics")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return cls(error_code=NONE, transactional_id=transactional_id,
               transaction_state=meta.state.name, transaction_timeout_ms=meta.timeout_ms,
               transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
               producer_epoch=meta.producer_epoch,
               topics=[topic_cls(topic=t, partitions=ps) for t, ps in by_topic.items()])


def list_transactions(error_code: int, unknown_state_filters: list, states: list):
    """``states``: [(transactional id, producer id, state name)]."""
    cls = response_class(LIST_TRANSACTIONS)
    state_cls = _sub(cls, "transaction_states")
    return cls(error_code=error_code, unknown_state_filters=unknown_state_filters,
               transaction_states=[state_cls(transactional_id=t, producer_id=p, transaction_state=s)
                                   for t, p, s in states])
