"""OffsetFetch (key 9): read a group's committed offsets.

v1 reads Kafka-stored offsets (v0 read ZooKeeper's), v2 a null Topics means "all topics" and a
top-level ErrorCode, v3 ThrottleTimeMs, v5 CommittedLeaderEpoch (KIP-320), v6 flexible,
v7 RequireStable (KIP-447), v8 batched: a Groups array replaces GroupId/Topics in both
directions (KIP-709), v9 MemberId/MemberEpoch for KIP-848 members. Kafka 4.0 dropped v0
(KIP-896) and 4.1 adds v10 with topic ids; this spec is v0-9.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct

OFFSET_FETCH = api(
    9,
    "OffsetFetch",
    valid="0-9",
    flexible="6+",
    request=[
        field("group_id", STRING, "0-7"),
        field("topics", array(struct(
            "OffsetFetchRequestTopic",
            field("name", STRING, "0-7"),
            field("partition_indexes", array(INT32), "0-7"),
        )), "0-7", nullable="2-7"),
        field("groups", array(struct(
            "OffsetFetchRequestGroup",
            field("group_id", STRING, "8+"),
            field("member_id", STRING, "9+", nullable="9+", default=None),
            field("member_epoch", INT32, "9+", default=-1),
            field("topics", array(struct(
                "OffsetFetchRequestTopics",
                field("name", STRING, "8+"),
                field("partition_indexes", array(INT32), "8+"),
            )), "8+", nullable="8+"),
        )), "8+"),
        field("require_stable", BOOL, "7+", default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, "3+"),
        field("topics", array(struct(
            "OffsetFetchResponseTopic",
            field("name", STRING, "0-7"),
            field("partitions", array(struct(
                "OffsetFetchResponsePartition",
                field("partition_index", INT32, "0-7"),
                field("committed_offset", INT64, "0-7"),
                field("committed_leader_epoch", INT32, "5-7", default=-1),
                field("metadata", STRING, "0-7", nullable="0-7"),
                field("error_code", INT16, "0-7"),
            )), "0-7"),
        )), "0-7"),
        field("error_code", INT16, "2-7", default=0),
        field("groups", array(struct(
            "OffsetFetchResponseGroup",
            field("group_id", STRING, "8+"),
            field("topics", array(struct(
                "OffsetFetchResponseTopics",
                field("name", STRING, "8+"),
                field("partitions", array(struct(
                    "OffsetFetchResponsePartitions",
                    field("partition_index", INT32, "8+"),
                    field("committed_offset", INT64, "8+"),
                    field("committed_leader_epoch", INT32, "8+", default=-1),
                    field("metadata", STRING, "8+", nullable="8+"),
                    field("error_code", INT16, "8+"),
                )), "8+"),
            )), "8+"),
            field("error_code", INT16, "8+", default=0),
        )), "8+"),
    ],
)

OffsetFetchRequest = OFFSET_FETCH.request_class
OffsetFetchResponse = OFFSET_FETCH.response_class
