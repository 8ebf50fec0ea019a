"""LeaveGroup (key 13): members leave a classic group so it rebalances without waiting for
their session to time out.

v1 ThrottleTimeMs, v3 batched: a Members array replaces the single MemberId and the response
answers per member (KIP-345, so an admin can remove static members), v4 flexible, v5 Reason
(KIP-800).
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, array, field, struct

LEAVE_GROUP = api(
    13,
    "LeaveGroup",
    valid="0-5",
    flexible="4+",
    request=[
        field("group_id", STRING, "0+"),
        field("member_id", STRING, "0-2"),
        field("members", array(struct(
            "MemberIdentity",
            field("member_id", STRING, "3+"),
            field("group_instance_id", STRING, "3+", nullable="3+", default=None),
            field("reason", STRING, "5+", nullable="5+", default=None),
        )), "3+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "0+"),
        field("members", array(struct(
            "MemberResponse",
            field("member_id", STRING, "3+"),
            field("group_instance_id", STRING, "3+", nullable="3+"),
            field("error_code", INT16, "3+"),
        )), "3+"),
    ],
)

LeaveGroupRequest = LEAVE_GROUP.request_class
LeaveGroupResponse = LEAVE_GROUP.response_class
