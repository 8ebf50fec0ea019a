"""UpdateMetadata (key 6): the controller pushes live brokers and partition states to every
broker's metadata cache. Inter-broker only (ZooKeeper mode).

The spec covers v0-6, Kafka 2.4-2.7's range (v7, 2.8, adds topic ids): v1 endpoints per broker,
v2 rack, v3 listener name, v4 offline replicas, v5 BrokerEpoch (KIP-380) and partitions grouped
by topic (``ungrouped_partition_states`` v0-4 becomes ``topic_states`` v5+), v6 flexible.
As for LeaderAndIsr, the v0-4 element struct has its own name.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct


def _partition_state(name: str):
    return struct(
        name,
        field("topic_name", STRING, "0-4"),
        field("partition_index", INT32, "0+"),
        field("controller_epoch", INT32, "0+"),
        field("leader", INT32, "0+"),
        field("leader_epoch", INT32, "0+"),
        field("isr", array(INT32), "0+"),
        field("zk_version", INT32, "0+"),
        field("replicas", array(INT32), "0+"),
        field("offline_replicas", array(INT32), "4+"),
    )


UPDATE_METADATA = api(
    6,
    "UpdateMetadata",
    valid="0-6",
    flexible="6+",
    request=[
        field("controller_id", INT32, "0+"),
        field("controller_epoch", INT32, "0+"),
        field("broker_epoch", INT64, "5+", default=-1),
        field("ungrouped_partition_states",
              array(_partition_state("UpdateMetadataUngroupedPartitionState")), "0-4"),
        field("topic_states", array(struct(
            "UpdateMetadataTopicState",
            field("topic_name", STRING, "5+"),
            field("partition_states", array(_partition_state("UpdateMetadataPartitionState")), "5+"),
        )), "5+"),
        field("live_brokers", array(struct(
            "UpdateMetadataBroker",
            field("id", INT32, "0+"),
            field("v0_host", STRING, "0"),
            field("v0_port", INT32, "0"),
            field("endpoints", array(struct(
                "UpdateMetadataEndpoint",
                field("port", INT32, "1+"),
                field("host", STRING, "1+"),
                field("listener", STRING, "3+"),
                field("security_protocol", INT16, "1+"),
            )), "1+"),
            field("rack", STRING, "2+", nullable="2+", default=None),  # JSON: nullableVersions "0+"
        )), "0+"),
    ],
    response=[
        field("error_code", INT16, "0+"),
    ],
)

UpdateMetadataRequest = UPDATE_METADATA.request_class
UpdateMetadataResponse = UPDATE_METADATA.response_class
