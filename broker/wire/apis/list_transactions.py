"""ListTransactions (key 66): a transaction coordinator lists the transactional ids it owns,
filtered by state and producer id (KIP-664).

Flexible from v0. v1 DurationFilter: only transactions running longer than that many ms (KIP-994,
-1 = all); v2 TransactionalIdPattern, a regular expression on the id (KIP-1152, Kafka 4.1; null
or empty = all; a bad pattern answers INVALID_REGULAR_EXPRESSION). The response is the same in
every version.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

LIST_TRANSACTIONS = api(
    66,
    "ListTransactions",
    valid="0-2",
    flexible="0+",
    request=[
        field("state_filters", array(STRING), "0+"),
        field("producer_id_filters", array(INT64), "0+"),
        field("duration_filter", INT64, "1+", default=-1),
        field("transactional_id_pattern", STRING, "2+", nullable="2+", default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("unknown_state_filters", array(STRING), "0+"),
        field("transaction_states", array(struct(
            "TransactionState",
            field("transactional_id", STRING, "0+"),
            field("producer_id", INT64, "0+"),
            field("transaction_state", STRING, "0+"),
        )), "0+"),
    ],
)

ListTransactionsRequest = LIST_TRANSACTIONS.request_class
ListTransactionsResponse = LIST_TRANSACTIONS.response_class
