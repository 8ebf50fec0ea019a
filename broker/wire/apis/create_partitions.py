"""CreatePartitions (key 37, v0-3, v2 flexible): add partitions to existing topics (KIP-195),
optionally naming each new partition's replicas. Sent to the controller."""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, STRING, array, field, struct

CREATE_PARTITIONS = api(
    37,
    "CreatePartitions",
    valid="0-3",
    flexible="2+",
    request=[
        field("topics", array(struct(
            "CreatePartitionsTopic",
            field("name", STRING, "0+"),
            field("count", INT32, "0+"),
            field("assignments", array(struct(
                "CreatePartitionsAssignment",
                field("broker_ids", array(INT32), "0+"),
            )), "0+", nullable="0+"),
        )), "0+"),
        field("timeout_ms", INT32, "0+"),
        field("validate_only", BOOL, "0+", default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct(
            "CreatePartitionsTopicResult",
            field("name", STRING, "0+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+"),
        )), "0+"),
    ],
)

CreatePartitionsRequest = CREATE_PARTITIONS.request_class
CreatePartitionsResponse = CREATE_PARTITIONS.response_class
