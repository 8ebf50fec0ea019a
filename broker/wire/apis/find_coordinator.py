"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.
v1 KeyType (0 group, 1 transaction) + ErrorMessage, v3 flexible, v4 batched CoordinatorKeys and
a Coordinators array replace the single key/answer (KIP-699). librdkafka gates LZ4 on this key
being advertised (reference pitfall 8.2).
"""

from broker.wire.api import api
from broker.wire.schema import INT8, INT16, INT32, STRING, array, field, struct

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

FIND_COORDINATOR = api(
    10,
    "FindCoordinator",
    valid="0-4",
    flexible="3+",
    request=[
        field("key", STRING, "0-3"),
        field("key_type", INT8, "1+", default=KEY_TYPE_GROUP),
        field("coordinator_keys", array(STRING), "4+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "0-3"),
        field("error_message", STRING, "1-3", nullable="1-3"),
        field("node_id", INT32, "0-3"),
        field("host", STRING, "0-3"),
        field("port", INT32, "0-3"),
        field("coordinators", array(struct(
            "Coordinator",
            field("key", STRING, "4+"),
            field("node_id", INT32, "4+"),
            field("host", STRING, "4+"),
            field("port", INT32, "4+"),
            field("error_code", INT16, "4+"),
            field("error_message", STRING, "4+", nullable="4+"),
        )), "4+"),
    ],
)

FindCoordinatorRequest = FIND_COORDINATOR.request_class
FindCoordinatorResponse = FIND_COORDINATOR.response_class
