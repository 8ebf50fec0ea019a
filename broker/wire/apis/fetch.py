"""Fetch (key 1). The spec covers v0-12; the server advertises 4-12 (v13+ needs topic ids,
reference pitfall 8.5). The hot path: ``records`` is a zero-copy view on decode and is appended
as-is on encode, never copied or parsed here.

v3 MaxBytes (KIP-74), v4 IsolationLevel + LastStableOffset/AbortedTransactions (KIP-98),
v5 LogStartOffset, v7 fetch sessions (KIP-227), v9 CurrentLeaderEpoch (KIP-320),
v11 RackId/PreferredReadReplica (KIP-392), v12 flexible + LastFetchedEpoch and the tagged
DivergingEpoch/CurrentLeader/SnapshotId (KIP-595).
"""

from broker.wire.api import api
from broker.wire.schema import INT8, INT16, INT32, INT64, RECORDS, STRING, array, field, struct

FETCH = api(
    1,
    "Fetch",
    valid="0-12",
    flexible="12+",
    request=[
        field("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
        field("replica_id", INT32, "0-14", default=-1),
        field("max_wait_ms", INT32, "0+"),
        field("min_bytes", INT32, "0+"),
        field("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        field("isolation_level", INT8, "4+", default=0),
        field("session_id", INT32, "7+", default=0),
        field("session_epoch", INT32, "7+", default=-1),
        field("topics", array(struct(
            "FetchTopic",
            field("topic", STRING, "0-12"),
            field("partitions", array(struct(
                "FetchPartition",
                field("partition", INT32, "0+"),
                field("current_leader_epoch", INT32, "9+", default=-1),
                field("fetch_offset", INT64, "0+"),
                field("last_fetched_epoch", INT32, "12+", default=-1),
                field("log_start_offset", INT64, "5+", default=-1),
                field("partition_max_bytes", INT32, "0+"),
            )), "0+"),
        )), "0+"),
        field("forgotten_topics_data", array(struct(
            "ForgottenTopic",
            field("topic", STRING, "7-12"),
            field("partitions", array(INT32), "7+"),
        )), "7+"),
        field("rack_id", STRING, "11+", default=""),
    ],
    response=[
        field("throttle_time_ms", INT32, "1+"),
        field("error_code", INT16, "7+"),
        field("session_id", INT32, "7+", default=0),
        field("responses", array(struct(
            "FetchableTopicResponse",
            field("topic", STRING, "0-12"),
            field("partitions", array(struct(
                "PartitionData",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("high_watermark", INT64, "0+"),
                field("last_stable_offset", INT64, "4+", default=-1),
                field("log_start_offset", INT64, "5+", default=-1),
                field("diverging_epoch", struct(
                    "EpochEndOffset",
                    field("epoch", INT32, "12+", default=-1),
                    field("end_offset", INT64, "12+", default=-1),
                ), "12+", tag=0),
                field("current_leader", struct(
                    "LeaderIdAndEpoch",
                    field("leader_id", INT32, "12+", default=-1),
                    field("leader_epoch", INT32, "12+", default=-1),
                ), "12+", tag=1),
                field("snapshot_id", struct(
                    "SnapshotId",
                    field("end_offset", INT64, "0+", default=-1),
                    field("epoch", INT32, "0+", default=-1),
                ), "12+", tag=2),
                field("aborted_transactions", array(struct(
                    "AbortedTransaction",
                    field("producer_id", INT64, "4+"),
                    field("first_offset", INT64, "4+"),
                )), "4+", nullable="4+"),
                field("preferred_read_replica", INT32, "11+", default=-1),
                field("records", RECORDS, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
    ],
)

FetchRequest = FETCH.request_class
FetchResponse = FETCH.response_class
