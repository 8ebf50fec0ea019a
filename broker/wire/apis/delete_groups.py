"""DeleteGroups (key 42): delete empty groups and their offsets (KIP-229).
v1 no field change (throttle-before-response, KIP-219), v2 flexible. Note ``groups_names``:
Kafka's JSON really says "GroupsNames".
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, array, field, struct

DELETE_GROUPS = api(
    42,
    "DeleteGroups",
    valid="0-2",
    flexible="2+",
    request=[
        field("groups_names", array(STRING), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct(
            "DeletableGroupResult",
            field("group_id", STRING, "0+"),
            field("error_code", INT16, "0+"),
        )), "0+"),
    ],
)

DeleteGroupsRequest = DELETE_GROUPS.request_class
DeleteGroupsResponse = DELETE_GROUPS.response_class
