"""ListGroups (key 16): the groups a broker coordinates (each broker answers for its own
__consumer_offsets partitions; admin clients ask every broker).

v1 ThrottleTimeMs, v3 flexible, v4 StatesFilter + GroupState (KIP-518), v5 TypesFilter +
GroupType (KIP-848: "classic" or "consumer").
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, array, field, struct

LIST_GROUPS = api(
    16,
    "ListGroups",
    valid="0-5",
    flexible="3+",
    request=[
        field("states_filter", array(STRING), "4+"),
        field("types_filter", array(STRING), "5+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "0+"),
        field("groups", array(struct(
            "ListedGroup",
            field("group_id", STRING, "0+"),
            field("protocol_type", STRING, "0+"),
            field("group_state", STRING, "4+"),
            field("group_type", STRING, "5+"),
        )), "0+"),
    ],
)

ListGroupsRequest = LIST_GROUPS.request_class
ListGroupsResponse = LIST_GROUPS.response_class
