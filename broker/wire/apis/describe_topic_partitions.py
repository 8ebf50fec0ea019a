"""DescribeTopicPartitions (key 75, v0, flexible): topics and their partitions, paged (KIP-966).

Kafka 4's Java admin client describes topics by name with this API when the broker offers it
(kafka-topics --describe), and reads each partition's eligible leader replicas (ELR) from it;
through the Metadata fallback it knows no ELR and prints "N/A". An empty topic list means all
topics. Paging: at most ``response_partition_limit`` partitions per response; ``cursor`` (request)
and ``next_cursor`` (response) name the topic and partition to continue from. Both are nullable
structs: an INT8 marker (-1 null, 1 present) precedes the fields on the wire.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, STRING, UUID, array, field, struct

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
RESPONSE_PARTITION_LIMIT_DEFAULT = 2000

DESCRIBE_TOPIC_PARTITIONS = api(
    75,
    "DescribeTopicPartitions",
    valid="0",
    flexible="0+",
    request=[
        field("topics", array(struct(
            "TopicRequest",
            field("name", STRING, "0+"),
        )), "0+"),
        field("response_partition_limit", INT32, "0+", default=RESPONSE_PARTITION_LIMIT_DEFAULT),
        field("cursor", struct(
            "Cursor",
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
        ), "0+", nullable="0+", default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct(
            "DescribeTopicPartitionsResponseTopic",
            field("error_code", INT16, "0+"),
            field("name", STRING, "0+", nullable="0+"),
            field("topic_id", UUID, "0+"),
            field("is_internal", BOOL, "0+", default=False),
            field("partitions", array(struct(
                "DescribeTopicPartitionsResponsePartition",
                field("error_code", INT16, "0+"),
                field("partition_index", INT32, "0+"),
                field("leader_id", INT32, "0+"),
                field("leader_epoch", INT32, "0+", default=-1),
                field("replica_nodes", array(INT32), "0+"),
                field("isr_nodes", array(INT32), "0+"),
                field("eligible_leader_replicas", array(INT32), "0+", nullable="0+", default=None),
                field("last_known_elr", array(INT32), "0+", nullable="0+", default=None),
                field("offline_replicas", array(INT32), "0+"),
            )), "0+"),
            field("topic_authorized_operations", INT32, "0+", default=AUTHORIZED_OPERATIONS_UNKNOWN),
        )), "0+"),
        field("next_cursor", struct(
            "Cursor",
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
        ), "0+", nullable="0+", default=None),
    ],
)

DescribeTopicPartitionsRequest = DESCRIBE_TOPIC_PARTITIONS.request_class
DescribeTopicPartitionsResponse = DESCRIBE_TOPIC_PARTITIONS.response_class
