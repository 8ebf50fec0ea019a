"""ListPartitionReassignments (key 46, v0, flexible): the partition reassignments in progress
(KIP-455). Kafka's Java admin client asks it for every partition kafka-topics --describe prints
(its "Adding Replicas"/"Removing Replicas" columns). A null topic list means every reassignment.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, array, field, struct

LIST_PARTITION_REASSIGNMENTS = api(
    46,
    "ListPartitionReassignments",
    valid="0",
    flexible="0+",
    request=[
        field("timeout_ms", INT32, "0+", default=60_000),
        field("topics", array(struct(
            "ListPartitionReassignmentsTopics",
            field("name", STRING, "0+"),
            field("partition_indexes", array(INT32), "0+"),
        )), "0+", nullable="0+", default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+"),
        field("topics", array(struct(
            "OngoingTopicReassignment",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "OngoingPartitionReassignment",
                field("partition_index", INT32, "0+"),
                field("replicas", array(INT32), "0+"),
                field("adding_replicas", array(INT32), "0+"),
                field("removing_replicas", array(INT32), "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

ListPartitionReassignmentsRequest = LIST_PARTITION_REASSIGNMENTS.request_class
ListPartitionReassignmentsResponse = LIST_PARTITION_REASSIGNMENTS.response_class
