"""AddOffsetsToTxn (key 25): a transactional producer tells its transaction coordinator that the
transaction will commit offsets for a group, so the coordinator adds that group's
__consumer_offsets partition to the transaction (KIP-98); TxnOffsetCommit to the group
coordinator follows.

v2 PRODUCER_FENCED, v3 flexible, v4 TRANSACTION_ABORTABLE (KIP-890); no field changes.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, field

ADD_OFFSETS_TO_TXN = api(
    25,
    "AddOffsetsToTxn",
    valid="0-4",
    flexible="3+",
    request=[
        field("transactional_id", STRING, "0+"),
        field("producer_id", INT64, "0+"),
        field("producer_epoch", INT16, "0+"),
        field("group_id", STRING, "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
    ],
)

AddOffsetsToTxnRequest = ADD_OFFSETS_TO_TXN.request_class
AddOffsetsToTxnResponse = ADD_OFFSETS_TO_TXN.response_class
