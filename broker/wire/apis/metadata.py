"""Metadata (key 3): brokers, controller and partition leaders (reference 1.4 for the versions).

v0 has no null topic list (empty means all topics); v1+ null means all. v8-10 carry cluster
authorized operations, v8+ topic authorized operations (send INT32_MIN = "not computed").
v10 adds topic ids, v12 lets a request name topics by id only (nullable names).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, STRING, UUID, array, field, struct

AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)  # Kafka's default for the *_authorized_operations ints

METADATA = api(
    3,
    "Metadata",
    valid="0-12",
    flexible="9+",
    request=[
        field("topics", array(struct(
            "MetadataRequestTopic",
            field("topic_id", UUID, "10+"),
            field("name", STRING, "0+", nullable="10+"),
        )), "0+", nullable="1+"),
        field("allow_auto_topic_creation", BOOL, "4+", default=True),
        field("include_cluster_authorized_operations", BOOL, "8-10"),
        field("include_topic_authorized_operations", BOOL, "8+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "3+"),
        field("brokers", array(struct(
            "MetadataResponseBroker",
            field("node_id", INT32, "0+"),
            field("host", STRING, "0+"),
            field("port", INT32, "0+"),
            field("rack", STRING, "1+", nullable="1+", default=None),
        )), "0+"),
        field("cluster_id", STRING, "2+", nullable="2+", default=None),
        field("controller_id", INT32, "1+", default=-1),
        field("topics", array(struct(
            "MetadataResponseTopic",
            field("error_code", INT16, "0+"),
            field("name", STRING, "0+", nullable="12+"),
            field("topic_id", UUID, "10+"),
            field("is_internal", BOOL, "1+", default=False),
            field("partitions", array(struct(
                "MetadataResponsePartition",
                field("error_code", INT16, "0+"),
                field("partition_index", INT32, "0+"),
                field("leader_id", INT32, "0+"),
                field("leader_epoch", INT32, "7+", default=-1),
                field("replica_nodes", array(INT32), "0+"),
                field("isr_nodes", array(INT32), "0+"),
                field("offline_replicas", array(INT32), "5+"),
            )), "0+"),
            field("topic_authorized_operations", INT32, "8+", default=AUTHORIZED_OPERATIONS_UNKNOWN),
        )), "0+"),
        field("cluster_authorized_operations", INT32, "8-10", default=AUTHORIZED_OPERATIONS_UNKNOWN),
    ],
)

MetadataRequest = METADATA.request_class
MetadataResponse = METADATA.response_class
