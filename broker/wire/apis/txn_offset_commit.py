"""TxnOffsetCommit (key 28): a transactional producer commits a group's offsets inside its
transaction, to the group coordinator; they become visible when the COMMIT marker lands in
__consumer_offsets (KIP-98).

v2 CommittedLeaderEpoch (KIP-320), v3 flexible plus GenerationId, MemberId and GroupInstanceId
so the group coordinator can fence zombie members (KIP-447), v4 TRANSACTION_ABORTABLE, v5 under
transaction version 2 also does AddOffsetsToTxn's job (KIP-890 part 2); no field change in v4-5.
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

TXN_OFFSET_COMMIT = api(
    28,
    "TxnOffsetCommit",
    valid="0-5",
    flexible="3+",
    request=[
        field("transactional_id", STRING, "0+"),
        field("group_id", STRING, "0+"),
        field("producer_id", INT64, "0+"),
        field("producer_epoch", INT16, "0+"),
        field("generation_id", INT32, "3+", default=-1),
        field("member_id", STRING, "3+", default=""),
        field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        field("topics", array(struct(
            "TxnOffsetCommitRequestTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "TxnOffsetCommitRequestPartition",
                field("partition_index", INT32, "0+"),
                field("committed_offset", INT64, "0+"),
                field("committed_leader_epoch", INT32, "2+", default=-1),
                field("committed_metadata", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct(
            "TxnOffsetCommitResponseTopic",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "TxnOffsetCommitResponsePartition",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

TxnOffsetCommitRequest = TXN_OFFSET_COMMIT.request_class
TxnOffsetCommitResponse = TXN_OFFSET_COMMIT.response_class
