"""LeaderAndIsr (key 4): the controller tells a broker which partitions it leads or follows.

Inter-broker only (ZooKeeper mode). The spec covers v0-4, Kafka 2.4-2.7's range; v5 (2.8,
topic ids, KIP-516) is not covered. v1 IsNew, v2 BrokerEpoch (KIP-380) and the partitions
grouped by topic (``ungrouped_partition_states`` v0-1 becomes ``topic_states`` v2+), v3
AddingReplicas/RemovingReplicas (KIP-455), v4 flexible. Response: v0-4 ``partition_errors``.

Kafka's JSON uses one common struct ``LeaderAndIsrPartitionState`` for both the v0-1 and v2+
lists; our message classes need distinct struct names, so the v0-1 list's element is
``LeaderAndIsrUngroupedPartitionState`` with the same fields.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct


def _partition_state(name: str):
    return struct(
        name,
        field("topic_name", STRING, "0-1"),
        field("partition_index", INT32, "0+"),
        field("controller_epoch", INT32, "0+"),
        field("leader", INT32, "0+"),
        field("leader_epoch", INT32, "0+"),
        field("isr", array(INT32), "0+"),
        field("zk_version", INT32, "0+"),
        field("replicas", array(INT32), "0+"),
        field("adding_replicas", array(INT32), "3+"),
        field("removing_replicas", array(INT32), "3+"),
        field("is_new", BOOL, "1+", default=False),
    )


LEADER_AND_ISR = api(
    4,
    "LeaderAndIsr",
    valid="0-4",
    flexible="4+",
    request=[
        field("controller_id", INT32, "0+"),
        field("controller_epoch", INT32, "0+"),
        field("broker_epoch", INT64, "2+", default=-1),
        field("ungrouped_partition_states", array(_partition_state("LeaderAndIsrUngroupedPartitionState")), "0-1"),
        field("topic_states", array(struct(
            "LeaderAndIsrTopicState",
            field("topic_name", STRING, "2+"),
            field("partition_states", array(_partition_state("LeaderAndIsrPartitionState")), "2+"),
        )), "2+"),
        field("live_leaders", array(struct(
            "LeaderAndIsrLiveLeader",
            field("broker_id", INT32, "0+"),
            field("host_name", STRING, "0+"),
            field("port", INT32, "0+"),
        )), "0+"),
    ],
    response=[
        field("error_code", INT16, "0+"),
        field("partition_errors", array(struct(
            "LeaderAndIsrPartitionError",
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
            field("error_code", INT16, "0+"),
        )), "0+"),
    ],
)

LeaderAndIsrRequest = LEADER_AND_ISR.request_class
LeaderAndIsrResponse = LEADER_AND_ISR.response_class
