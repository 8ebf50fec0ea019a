"""SyncGroup (key 14): after JoinGroup, the leader sends every member's assignment and each
member receives its own.

v1 ThrottleTimeMs, v3 GroupInstanceId (KIP-345), v4 flexible, v5 ProtocolType/ProtocolName in
both directions so the coordinator can check them (KIP-559).
"""

from broker.wire.api import api
from broker.wire.schema import BYTES, INT16, INT32, STRING, array, field, struct

SYNC_GROUP = api(
    14,
    "SyncGroup",
    valid="0-5",
    flexible="4+",
    request=[
        field("group_id", STRING, "0+"),
        field("generation_id", INT32, "0+"),
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        field("protocol_type", STRING, "5+", nullable="5+", default=None),
        field("protocol_name", STRING, "5+", nullable="5+", default=None),
        field("assignments", array(struct(
            "SyncGroupRequestAssignment",
            field("member_id", STRING, "0+"),
            field("assignment", BYTES, "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "0+"),
        field("protocol_type", STRING, "5+", nullable="5+", default=None),
        field("protocol_name", STRING, "5+", nullable="5+", default=None),
        field("assignment", BYTES, "0+"),
    ],
)

SyncGroupRequest = SYNC_GROUP.request_class
SyncGroupResponse = SYNC_GROUP.response_class
