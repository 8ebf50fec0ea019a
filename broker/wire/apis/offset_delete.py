"""OffsetDelete (key 47): delete a group's committed offsets for some partitions
(KIP-496, ``kafka-consumer-groups --delete-offsets``). Only v0, never flexible. Note the
response puts ErrorCode before ThrottleTimeMs, unlike most APIs.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, array, field, struct

OFFSET_DELETE = api(
    47,
    "OffsetDelete",
    valid="0",
    flexible="none",
    request=[
        field("group_id", STRING, "0+"),
        field("topics", array(struct(
            "OffsetDeleteRequestTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "OffsetDeleteRequestPartition",
                field("partition_index", INT32, "0+"),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("error_code", INT16, "0+"),
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct(
            "OffsetDeleteResponseTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "OffsetDeleteResponsePartition",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

OffsetDeleteRequest = OFFSET_DELETE.request_class
OffsetDeleteResponse = OFFSET_DELETE.response_class
