"""ElectLeaders (key 43, v0-2, v2 flexible): preferred (0) or unclean (1, v1+) leader election
per partition (KIP-183, KIP-460); a null list means every partition. Sent to the controller."""

from broker.wire.api import api
from broker.wire.schema import INT8, INT16, INT32, STRING, array, field, struct

ELECT_LEADERS = api(
    43,
    "ElectLeaders",
    valid="0-2",
    flexible="2+",
    request=[
        field("election_type", INT8, "1+", default=0),
        field("topic_partitions", array(struct(
            "TopicPartitions",
            field("topic", STRING, "0+"),
            field("partitions", array(INT32), "0+"),
        )), "0+", nullable="0+"),
        field("timeout_ms", INT32, "0+", default=60_000),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "1+", default=0),
        field("replica_election_results", array(struct(
            "ReplicaElectionResult",
            field("topic", STRING, "0+"),
            field("partition_result", array(struct(
                "PartitionResult",
                field("partition_id", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
    ],
)

ElectLeadersRequest = ELECT_LEADERS.request_class
ElectLeadersResponse = ELECT_LEADERS.response_class
