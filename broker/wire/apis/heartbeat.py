"""Heartbeat (key 12): a classic group member's "still here"; the error code is how it learns
of a rebalance (REBALANCE_IN_PROGRESS) or that it was fenced.

v1 ThrottleTimeMs, v3 GroupInstanceId (KIP-345), v4 flexible.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, STRING, field

HEARTBEAT = api(
    12,
    "Heartbeat",
    valid="0-4",
    flexible="4+",
    request=[
        field("group_id", STRING, "0+"),
        field("generation_id", INT32, "0+"),
        field("member_id", STRING, "0+"),
        field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "0+"),
    ],
)

HeartbeatRequest = HEARTBEAT.request_class
HeartbeatResponse = HEARTBEAT.response_class
