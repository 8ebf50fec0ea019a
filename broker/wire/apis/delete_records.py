"""DeleteRecords (key 21, v0-2, v2 flexible): move partitions' log start offsets forward
(KIP-107); -1 means the high watermark. Sent to each partition's leader."""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

DELETE_RECORDS = api(
    21,
    "DeleteRecords",
    valid="0-2",
    flexible="2+",
    request=[
        field("topics", array(struct(
            "DeleteRecordsTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "DeleteRecordsPartition",
                field("partition_index", INT32, "0+"),
                field("offset", INT64, "0+"),
            )), "0+"),
        )), "0+"),
        field("timeout_ms", INT32, "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct(
            "DeleteRecordsTopicResult",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "DeleteRecordsPartitionResult",
                field("partition_index", INT32, "0+"),
                field("low_watermark", INT64, "0+"),
                field("error_code", INT16, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

DeleteRecordsRequest = DELETE_RECORDS.request_class
DeleteRecordsResponse = DELETE_RECORDS.response_class
