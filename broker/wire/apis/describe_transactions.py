"""DescribeTransactions (key 65): a transaction coordinator reports the state, timeout, start
time, producer id/epoch and partitions of transactional ids it owns (KIP-664).

Flexible from v0. ``transaction_state`` is the coordinator state's display name ("Ongoing",
"PrepareCommit", "CompleteAbort", ..., Kafka's ``TransactionState.stateName``).
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

DESCRIBE_TRANSACTIONS = api(
    65,
    "DescribeTransactions",
    valid="0",
    flexible="0+",
    request=[
        field("transactional_ids", array(STRING), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("transaction_states", array(struct(
            "TransactionState",
            field("error_code", INT16, "0+"),
            field("transactional_id", STRING, "0+"),
            field("transaction_state", STRING, "0+"),
            field("transaction_timeout_ms", INT32, "0+"),
            field("transaction_start_time_ms", INT64, "0+"),
            field("producer_id", INT64, "0+"),
            field("producer_epoch", INT16, "0+"),
            field("topics", array(struct(
                "TopicData",
                field("topic", STRING, "0+"),
                field("partitions", array(INT32), "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

DescribeTransactionsRequest = DESCRIBE_TRANSACTIONS.request_class
DescribeTransactionsResponse = DESCRIBE_TRANSACTIONS.response_class
