"""AlterPartitionReassignments (key 45, v0, flexible): start or cancel (null replicas) partition
reassignments (KIP-455). Sent to the controller."""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, array, field, struct

ALTER_PARTITION_REASSIGNMENTS = api(
    45,
    "AlterPartitionReassignments",
    valid="0",
    flexible="0+",
    request=[
        field("timeout_ms", INT32, "0+", default=60_000),
        field("topics", array(struct(
            "ReassignableTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "ReassignablePartition",
                field("partition_index", INT32, "0+"),
                field("replicas", array(INT32), "0+", nullable="0+", default=None),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+"),
        field("responses", array(struct(
            "ReassignableTopicResponse",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "ReassignablePartitionResponse",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
    ],
)

AlterPartitionReassignmentsRequest = ALTER_PARTITION_REASSIGNMENTS.request_class
AlterPartitionReassignmentsResponse = ALTER_PARTITION_REASSIGNMENTS.response_class
