"""DescribeGroups (key 15): state, protocol and members (with their metadata and assignment
bytes) of classic groups.

v1 ThrottleTimeMs, v3 IncludeAuthorizedOperations/AuthorizedOperations (KIP-430), v4
GroupInstanceId per member (KIP-345), v5 flexible, v6 an ErrorMessage per group, and an unknown
group is GROUP_ID_NOT_FOUND instead of a Dead group without error (KIP-1043; what Kafka 4.1
advertises).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, BYTES, INT16, INT32, STRING, array, field, struct

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # Kafka's "not computed" (INT32_MIN)

DESCRIBE_GROUPS = api(
    15,
    "DescribeGroups",
    valid="0-6",
    flexible="5+",
    request=[
        field("groups", array(STRING), "0+"),
        field("include_authorized_operations", BOOL, "3+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("groups", array(struct(
            "DescribedGroup",
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "6+", nullable="6+", default=None),
            field("group_id", STRING, "0+"),
            field("group_state", STRING, "0+"),
            field("protocol_type", STRING, "0+"),
            field("protocol_data", STRING, "0+"),
            field("members", array(struct(
                "DescribedGroupMember",
                field("member_id", STRING, "0+"),
                field("group_instance_id", STRING, "4+", nullable="4+", default=None),
                field("client_id", STRING, "0+"),
                field("client_host", STRING, "0+"),
                field("member_metadata", BYTES, "0+"),
                field("member_assignment", BYTES, "0+"),
            )), "0+"),
            field("authorized_operations", INT32, "3+", default=AUTHORIZED_OPERATIONS_OMITTED),
        )), "0+"),
    ],
)

DescribeGroupsRequest = DESCRIBE_GROUPS.request_class
DescribeGroupsResponse = DESCRIBE_GROUPS.response_class
