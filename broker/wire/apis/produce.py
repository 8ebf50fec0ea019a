"""Produce (key 0). The spec covers v0-12; the server advertises from v0 (librdkafka gates
compression on it, reference pitfall 8.1) but answers v0-2 with UNSUPPORTED_VERSION, since
those carry the old MessageSet formats.

v3 TransactionalId (KIP-98), v5 LogStartOffset, v8 RecordErrors/ErrorMessage (KIP-467),
v9 flexible, v10 tagged CurrentLeader/NodeEndpoints (KIP-951), v11 (TRANSACTION_ABORTABLE may be
answered) and v12 (transaction version 2: the leader adds the partition to the producer's
transaction itself, KIP-890 part 2) the same bytes as v10. ``records`` stays raw bytes.
acks=0 requests get no response at all (the server's job, not the codec's).
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, RECORDS, STRING, array, field, struct

PRODUCE = api(
    0,
    "Produce",
    valid="0-12",
    flexible="9+",
    request=[
        field("transactional_id", STRING, "3+", nullable="3+", default=None),
        field("acks", INT16, "0+"),
        field("timeout_ms", INT32, "0+"),
        field("topic_data", array(struct(
            "TopicProduceData",
            field("name", STRING, "0-12"),
            field("partition_data", array(struct(
                "PartitionProduceData",
                field("index", INT32, "0+"),
                field("records", RECORDS, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
    ],
    response=[
        field("responses", array(struct(
            "TopicProduceResponse",
            field("name", STRING, "0-12"),
            field("partition_responses", array(struct(
                "PartitionProduceResponse",
                field("index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("base_offset", INT64, "0+"),
                field("log_append_time_ms", INT64, "2+", default=-1),
                field("log_start_offset", INT64, "5+", default=-1),
                field("record_errors", array(struct(
                    "BatchIndexAndErrorMessage",
                    field("batch_index", INT32, "8+"),
                    field("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
                )), "8+"),
                field("error_message", STRING, "8+", nullable="8+", default=None),
                field("current_leader", struct(
                    "LeaderIdAndEpoch",
                    field("leader_id", INT32, "10+", default=-1),
                    field("leader_epoch", INT32, "10+", default=-1),
                ), "10+", tag=0),
            )), "0+"),
        )), "0+"),
        field("throttle_time_ms", INT32, "1+", default=0),
        field("node_endpoints", array(struct(
            "NodeEndpoint",
            field("node_id", INT32, "10+"),
            field("host", STRING, "10+"),
            field("port", INT32, "10+"),
            field("rack", STRING, "10+", nullable="10+", default=None),
        )), "10+", tag=0),
    ],
)

ProduceRequest = PRODUCE.request_class
ProduceResponse = PRODUCE.response_class
