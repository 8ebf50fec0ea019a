"""DeleteTopics (key 20), sent to the controller. v1 ThrottleTimeMs, v4 flexible,
v5 ErrorMessage, v6 topics by name or id (KIP-516): ``topic_names`` (v0-5) becomes ``topics``.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, UUID, array, field, struct

DELETE_TOPICS = api(
    20,
    "DeleteTopics",
    valid="0-6",
    flexible="4+",
    request=[
        field("topics", array(struct(
            "DeleteTopicState",
            field("name", STRING, "6+", nullable="6+", default=None),
            field("topic_id", UUID, "6+"),
        )), "6+"),
        field("topic_names", array(STRING), "0-5"),
        field("timeout_ms", INT32, "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("responses", array(struct(
            "DeletableTopicResult",
            field("name", STRING, "0+", nullable="6+"),
            field("topic_id", UUID, "6+"),
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "5+", nullable="5+", default=None),
        )), "0+"),
    ],
)

DeleteTopicsRequest = DELETE_TOPICS.request_class
DeleteTopicsResponse = DELETE_TOPICS.response_class
