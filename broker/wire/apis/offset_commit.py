"""OffsetCommit (key 8): a consumer stores its positions in the group's offsets.

v1 GenerationId + MemberId (Kafka-stored offsets, checked against the group) and a
per-partition CommitTimestamp that exists in v1 only, v2-4 a group-wide RetentionTimeMs
instead (KIP-211 removed it in v5), v3 ThrottleTimeMs, v6 CommittedLeaderEpoch (KIP-320),
v7 GroupInstanceId (KIP-345), v8 flexible, v9 the generation field carries a KIP-848 member
epoch too (renamed GenerationIdOrMemberEpoch, no wire change). Kafka 4.0 dropped v0-1
(KIP-896) and 4.1 adds v10 with topic ids; this spec is v0-9.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

OFFSET_COMMIT = api(
    8,
    "OffsetCommit",
    valid="0-9",
    flexible="8+",
    request=[
        field("group_id", STRING, "0+"),
        field("generation_id_or_member_epoch", INT32, "1+", default=-1),
        field("member_id", STRING, "1+"),
        field("group_instance_id", STRING, "7+", nullable="7+", default=None),
        field("retention_time_ms", INT64, "2-4", default=-1),
        field("topics", array(struct(
            "OffsetCommitRequestTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "OffsetCommitRequestPartition",
                field("partition_index", INT32, "0+"),
                field("committed_offset", INT64, "0+"),
                field("committed_leader_epoch", INT32, "6+", default=-1),
                field("commit_timestamp", INT64, "1", default=-1),
                field("committed_metadata", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "3+"),
        field("topics", array(struct(
            "OffsetCommitResponseTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "OffsetCommitResponsePartition",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

OffsetCommitRequest = OFFSET_COMMIT.request_class
OffsetCommitResponse = OFFSET_COMMIT.response_class
