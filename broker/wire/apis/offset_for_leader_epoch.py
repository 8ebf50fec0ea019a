"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, used by consumers to detect
log truncation (KIP-320) and by followers to truncate (KIP-101). The spec covers v0-4; the
server advertises 2-4 (librdkafka sends exactly v2, reference pitfall 8.19).
v1 response LeaderEpoch, v2 CurrentLeaderEpoch + ThrottleTimeMs, v3 ReplicaId, v4 flexible.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2  # the spec's default: "not a follower"

OFFSET_FOR_LEADER_EPOCH = api(
    23,
    "OffsetForLeaderEpoch",
    valid="0-4",
    flexible="4+",
    request=[
        field("replica_id", INT32, "3+", default=DEBUGGING_REPLICA_ID),
        field("topics", array(struct(
            "OffsetForLeaderTopic",
            field("topic", STRING, "0+"),
            field("partitions", array(struct(
                "OffsetForLeaderPartition",
                field("partition", INT32, "0+"),
                field("current_leader_epoch", INT32, "2+", default=-1),
                field("leader_epoch", INT32, "0+"),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "2+"),
        field("topics", array(struct(
            "OffsetForLeaderTopicResult",
            field("topic", STRING, "0+"),
            field("partitions", array(struct(
                "EpochEndOffset",
                field("error_code", INT16, "0+"),
                field("partition", INT32, "0+"),
                field("leader_epoch", INT32, "1+", default=-1),
                field("end_offset", INT64, "0+", default=-1),
            )), "0+"),
        )), "0+"),
    ],
)

OffsetForLeaderEpochRequest = OFFSET_FOR_LEADER_EPOCH.request_class
OffsetForLeaderEpochResponse = OFFSET_FOR_LEADER_EPOCH.response_class
