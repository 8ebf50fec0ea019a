"""EndTxn (key 26): a transactional producer asks its coordinator to commit or abort the
ongoing transaction (KIP-98); the coordinator then writes the markers.

v2 PRODUCER_FENCED, v3 flexible, v4 TRANSACTION_ABORTABLE (KIP-890), v5 the epoch is bumped on
every transaction (KIP-890 part 2, "transaction version 2"), so the response carries the producer
id and epoch the producer must use next.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, field

END_TXN = api(
    26,
    "EndTxn",
    valid="0-5",
    flexible="3+",
    request=[
        field("transactional_id", STRING, "0+"),
        field("producer_id", INT64, "0+"),
        field("producer_epoch", INT16, "0+"),
        field("committed", BOOL, "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("producer_id", INT64, "5+", default=-1),
        field("producer_epoch", INT16, "5+", default=-1),
    ],
)

EndTxnRequest = END_TXN.request_class
EndTxnResponse = END_TXN.response_class
