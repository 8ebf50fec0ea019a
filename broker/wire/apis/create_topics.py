"""CreateTopics (key 19), sent to the controller. v1 ValidateOnly, v4 accepts -1 partitions /
replication factor meaning "broker default" (KIP-464; kafka-python's admin depends on it),
v5 flexible + the created topic's config in the response (KIP-525), v7 TopicId (KIP-516).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT8, INT16, INT32, STRING, UUID, array, field, struct

CREATE_TOPICS = api(
    19,
    "CreateTopics",
    valid="0-7",
    flexible="5+",
    request=[
        field("topics", array(struct(
            "CreatableTopic",
            field("name", STRING, "0+"),
            field("num_partitions", INT32, "0+"),
            field("replication_factor", INT16, "0+"),
            field("assignments", array(struct(
                "CreatableReplicaAssignment",
                field("partition_index", INT32, "0+"),
                field("broker_ids", array(INT32), "0+"),
            )), "0+"),
            field("configs", array(struct(
                "CreatableTopicConfig",
                field("name", STRING, "0+"),
                field("value", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
        field("timeout_ms", INT32, "0+", default=60000),
        field("validate_only", BOOL, "1+", default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, "2+"),
        field("topics", array(struct(
            "CreatableTopicResult",
            field("name", STRING, "0+"),
            field("topic_id", UUID, "7+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "1+", nullable="1+"),
            field("topic_config_error_code", INT16, "5+", tag=0),
            field("num_partitions", INT32, "5+", default=-1),
            field("replication_factor", INT16, "5+", default=-1),
            field("configs", array(struct(
                "CreatableTopicConfigs",
                field("name", STRING, "5+"),
                field("value", STRING, "5+", nullable="5+"),
                field("read_only", BOOL, "5+"),
                field("config_source", INT8, "5+", default=-1),
                field("is_sensitive", BOOL, "5+"),
            )), "5+", nullable="5+"),
        )), "0+"),
    ],
)

CreateTopicsRequest = CREATE_TOPICS.request_class
CreateTopicsResponse = CREATE_TOPICS.response_class
