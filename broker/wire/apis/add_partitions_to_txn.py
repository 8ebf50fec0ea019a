"""AddPartitionsToTxn (key 24): a transactional producer registers the partitions it is about to
write with its transaction coordinator, before the first Produce to each (KIP-98).

v0-3 are the client form: one transaction, its fields prefixed ``V3AndBelow`` in Kafka's JSON.
v4+ are the broker-to-broker form (KIP-890): a batch of ``transactions``, each with
``verify_only`` (the partition leader asks whether a partition is already in the transaction
instead of adding it), and a top-level error code in the response; only brokers send v4+.
v2 PRODUCER_FENCED, v3 flexible, v5 TRANSACTION_ABORTABLE (no field change).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct

# Kafka's "commonStructs": one struct shared by the v0-3 and the v4+ request layouts.
_TOPIC = struct(
    "AddPartitionsToTxnTopic",
    field("name", STRING, "0+"),
    field("partitions", array(INT32), "0+"),
)

_TOPIC_RESULT = struct(
    "AddPartitionsToTxnTopicResult",
    field("name", STRING, "0+"),
    field("results_by_partition", array(struct(
        "AddPartitionsToTxnPartitionResult",
        field("partition_index", INT32, "0+"),
        field("partition_error_code", INT16, "0+"),
    )), "0+"),
)

ADD_PARTITIONS_TO_TXN = api(
    24,
    "AddPartitionsToTxn",
    valid="0-5",
    flexible="3+",
    request=[
        field("transactions", array(struct(
            "AddPartitionsToTxnTransaction",
            field("transactional_id", STRING, "4+"),
            field("producer_id", INT64, "4+"),
            field("producer_epoch", INT16, "4+"),
            field("verify_only", BOOL, "4+", default=False),
            field("topics", array(_TOPIC), "4+"),
        )), "4+"),
        field("v3_and_below_transactional_id", STRING, "0-3"),
        field("v3_and_below_producer_id", INT64, "0-3"),
        field("v3_and_below_producer_epoch", INT16, "0-3"),
        field("v3_and_below_topics", array(_TOPIC), "0-3"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "4+"),
        field("results_by_transaction", array(struct(
            "AddPartitionsToTxnResult",
            field("transactional_id", STRING, "4+"),
            field("topic_results", array(_TOPIC_RESULT), "4+"),
        )), "4+"),
        field("results_by_topic_v3_and_below", array(_TOPIC_RESULT), "0-3"),
    ],
)

AddPartitionsToTxnRequest = ADD_PARTITIONS_TO_TXN.request_class
AddPartitionsToTxnResponse = ADD_PARTITIONS_TO_TXN.response_class
