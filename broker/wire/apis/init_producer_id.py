"""InitProducerId (key 22): a producer id and epoch for idempotence and transactions (KIP-98).

v2 flexible; v3 ProducerId/ProducerEpoch let a producer bump its epoch (KIP-360, -1/-1 when
fresh); v4 may answer PRODUCER_FENCED; v5 TRANSACTION_ABORTABLE (KIP-890, no field change);
v6 Enable2Pc / KeepPreparedTxn and the ongoing transaction's producer id and epoch in the answer
(KIP-939, two-phase commit). v5-6 are parsed, not advertised (reference section 7: no target
client sends v6).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, field

INIT_PRODUCER_ID = api(
    22,
    "InitProducerId",
    valid="0-6",
    flexible="2+",
    request=[
        field("transactional_id", STRING, "0+", nullable="0+"),
        field("transaction_timeout_ms", INT32, "0+"),
        field("producer_id", INT64, "3+", default=-1),
        field("producer_epoch", INT16, "3+", default=-1),
        field("enable2_pc", BOOL, "6+", default=False),  # kafka-python's snake_case of Enable2Pc
        field("keep_prepared_txn", BOOL, "6+", default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("producer_id", INT64, "0+", default=-1),
        field("producer_epoch", INT16, "0+"),
        field("ongoing_txn_producer_id", INT64, "6+", default=-1),
        field("ongoing_txn_producer_epoch", INT16, "6+", default=-1),
    ],
)

InitProducerIdRequest = INIT_PRODUCER_ID.request_class
InitProducerIdResponse = INIT_PRODUCER_ID.response_class
