"""StopReplica (key 5): the controller tells a broker to stop fetching (and maybe delete)
partitions. Inter-broker only (ZooKeeper mode).

v0-3, Kafka 2.6-2.8's range: v1 BrokerEpoch (KIP-380) and partitions grouped by topic, v2
flexible, v3 (KIP-570) per-partition ``leader_epoch`` and ``delete_partition`` replace the
request-wide ``delete_partitions`` flag (``topic_states`` replaces ``topics``).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct

STOP_REPLICA = api(
    5,
    "StopReplica",
    valid="0-3",
    flexible="2+",
    request=[
        field("controller_id", INT32, "0+"),
        field("controller_epoch", INT32, "0+"),
        field("broker_epoch", INT64, "1+", default=-1),
        field("delete_partitions", BOOL, "0-2"),
        field("ungrouped_partitions", array(struct(
            "StopReplicaPartitionV0",
            field("topic_name", STRING, "0"),
            field("partition_index", INT32, "0"),
        )), "0"),
        field("topics", array(struct(
            "StopReplicaTopicV1",
            field("name", STRING, "1-2"),
            field("partition_indexes", array(INT32), "1-2"),
        )), "1-2"),
        field("topic_states", array(struct(
            "StopReplicaTopicState",
            field("topic_name", STRING, "3+"),
            field("partition_states", array(struct(
                "StopReplicaPartitionState",
                field("partition_index", INT32, "3+"),
                field("leader_epoch", INT32, "3+", default=-1),
                field("delete_partition", BOOL, "3+"),
            )), "3+"),
        )), "3+"),
    ],
    response=[
        field("error_code", INT16, "0+"),
        field("partition_errors", array(struct(
            "StopReplicaPartitionError",
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
            field("error_code", INT16, "0+"),
        )), "0+"),
    ],
)

StopReplicaRequest = STOP_REPLICA.request_class
StopReplicaResponse = STOP_REPLICA.response_class
