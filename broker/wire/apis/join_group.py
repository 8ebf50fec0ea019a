"""JoinGroup (key 11): a member joins a classic group and, once everyone has, learns the
generation, the chosen protocol, the leader and (the leader only) every member's metadata.

v1 RebalanceTimeoutMs (KIP-62), v2 ThrottleTimeMs, v4 MEMBER_ID_REQUIRED on a first join
(KIP-394, no field change), v5 GroupInstanceId (static membership, KIP-345), v6 flexible,
v7 ProtocolType in the response and a nullable ProtocolName (KIP-559), v8 Reason (KIP-800),
v9 SkipAssignment (KIP-814). Kafka 4.0 dropped v0-1 (KIP-896); we still parse them.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, BYTES, INT16, INT32, STRING, array, field, struct

JOIN_GROUP = api(
    11,
    "JoinGroup",
    valid="0-9",
    flexible="6+",
    request=[
        field("group_id", STRING, "0+"),
        field("session_timeout_ms", INT32, "0+"),
        field("rebalance_timeout_ms", INT32, "1+", default=-1),
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "5+", nullable="5+", default=None),
        field("protocol_type", STRING, "0+"),
        field("protocols", array(struct(
            "JoinGroupRequestProtocol",
            field("name", STRING, "0+"),
            field("metadata", BYTES, "0+"),
        )), "0+"),
        field("reason", STRING, "8+", nullable="8+", default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, "2+"),
        field("error_code", INT16, "0+"),
        field("generation_id", INT32, "0+", default=-1),
        field("protocol_type", STRING, "7+", nullable="7+", default=None),
        field("protocol_name", STRING, "0+", nullable="7+"),
        field("leader", STRING, "0+"),
        field("skip_assignment", BOOL, "9+", default=False),
        field("member_id", STRING, "0+"),
        field("members", array(struct(
            "JoinGroupResponseMember",
            field("member_id", STRING, "0+"),
            field("group_instance_id", STRING, "5+", nullable="5+", default=None),
            field("metadata", BYTES, "0+"),
        )), "0+"),
    ],
)

JoinGroupRequest = JOIN_GROUP.request_class
JoinGroupResponse = JOIN_GROUP.response_class
