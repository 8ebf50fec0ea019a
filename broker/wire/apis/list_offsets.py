"""ListOffsets (key 2). The spec covers v0-7, all served (v0 for Burrow 1.2.1).

Timestamp -1 = latest, -2 = earliest, -3 = max timestamp (v7+, KIP-734). v0 returned a list of
offsets per partition (OldStyleOffsets); v1+ one offset and its timestamp. v2 IsolationLevel
(read_committed "latest" is the LSO), v4 CurrentLeaderEpoch/LeaderEpoch (KIP-320), v6 flexible.
"""

from broker.wire.api import api
from broker.wire.schema import INT8, INT16, INT32, INT64, STRING, array, field, struct

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

LIST_OFFSETS = api(
    2,
    "ListOffsets",
    valid="0-7",
    flexible="6+",
    request=[
        # The JSON has no default (0); -1 ("a consumer") is the safe one for our client,
        # as kafka-python also patches it: 0 would claim to be broker 0's follower.
        field("replica_id", INT32, "0+", default=-1),
        field("isolation_level", INT8, "2+"),
        field("topics", array(struct(
            "ListOffsetsTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "ListOffsetsPartition",
                field("partition_index", INT32, "0+"),
                field("current_leader_epoch", INT32, "4+", default=-1),
                field("timestamp", INT64, "0+"),
                field("max_num_offsets", INT32, "0", default=1),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "2+"),
        field("topics", array(struct(
            "ListOffsetsTopicResponse",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "ListOffsetsPartitionResponse",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("old_style_offsets", array(INT64), "0"),
                field("timestamp", INT64, "1+", default=-1),
                field("offset", INT64, "1+", default=-1),
                field("leader_epoch", INT32, "4+", default=-1),
            )), "0+"),
        )), "0+"),
    ],
)

ListOffsetsRequest = LIST_OFFSETS.request_class
ListOffsetsResponse = LIST_OFFSETS.response_class
