"""InitProducerId (key 22): a producer id and epoch for idempotence and transactions (KIP-98).

v2 flexible; v3 ProducerId/ProducerEpoch let a producer bump its epoch (KIP-360, -1/-1 when
fresh); v4 may answer PRODUCER_FENCED. v5/v6 (KIP-890, KIP-939) are deliberately not covered
(reference section 7: do not advertise them).
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, field

INIT_PRODUCER_ID = api(
    22,
    "InitProducerId",
    valid="0-4",
    flexible="2+",
    request=[
        field("transactional_id", STRING, "0+", nullable="0+"),
        field("transaction_timeout_ms", INT32, "0+"),
        field("producer_id", INT64, "3+", default=-1),
        field("producer_epoch", INT16, "3+", default=-1),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("producer_id", INT64, "0+", default=-1),
        field("producer_epoch", INT16, "0+"),
    ],
)

InitProducerIdRequest = INIT_PRODUCER_ID.request_class
InitProducerIdResponse = INIT_PRODUCER_ID.response_class
