"""WriteTxnMarkers (key 27): the transaction coordinator asks partition leaders to append the
COMMIT or ABORT control batch of a transaction (KIP-98); broker to broker only.

v1 flexible. Kafka 4.0 removed v0 (KIP-896) and 4.1 advertises v1 only; we parse v0 for
older coordinators. (kafka-python's newer JSON has a v2 with a per-marker TransactionVersion,
KIP-1228, not in Kafka 4.1; not covered.)
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct

WRITE_TXN_MARKERS = api(
    27,
    "WriteTxnMarkers",
    valid="0-1",
    flexible="1+",
    request=[
        field("markers", array(struct(
            "WritableTxnMarker",
            field("producer_id", INT64, "0+"),
            field("producer_epoch", INT16, "0+"),
            field("transaction_result", BOOL, "0+"),  # False = ABORT, True = COMMIT
            field("topics", array(struct(
                "WritableTxnMarkerTopic",
                field("name", STRING, "0+"),
                field("partition_indexes", array(INT32), "0+"),
            )), "0+"),
            field("coordinator_epoch", INT32, "0+"),
        )), "0+"),
    ],
    response=[
        field("markers", array(struct(
            "WritableTxnMarkerResult",
            field("producer_id", INT64, "0+"),
            field("topics", array(struct(
                "WritableTxnMarkerTopicResult",
                field("name", STRING, "0+"),
                field("partitions", array(struct(
                    "WritableTxnMarkerPartitionResult",
                    field("partition_index", INT32, "0+"),
                    field("error_code", INT16, "0+"),
                )), "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

WriteTxnMarkersRequest = WRITE_TXN_MARKERS.request_class
WriteTxnMarkersResponse = WRITE_TXN_MARKERS.response_class
