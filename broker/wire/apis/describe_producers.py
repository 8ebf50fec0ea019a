"""DescribeProducers (key 61): a partition leader lists the producers active on a partition,
with each one's open transaction start offset (KIP-664: find hanging transactions).

Flexible from v0. Note ``producer_epoch`` is an int32 here, unlike everywhere else (Kafka's JSON).
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

DESCRIBE_PRODUCERS = api(
    61,
    "DescribeProducers",
    valid="0",
    flexible="0+",
    request=[
        field("topics", array(struct(
            "TopicRequest",
            field("name", STRING, "0+"),
            field("partition_indexes", array(INT32), "0+"),
        )), "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("topics", array(struct(
            "TopicResponse",
            field("name", STRING, "0+"),
            field("partitions", array(struct(
                "PartitionResponse",
                field("partition_index", INT32, "0+"),
                field("error_code", INT16, "0+"),
                field("error_message", STRING, "0+", nullable="0+", default=None),
                field("active_producers", array(struct(
                    "ProducerState",
                    field("producer_id", INT64, "0+"),
                    field("producer_epoch", INT32, "0+"),
                    field("last_sequence", INT32, "0+", default=-1),
                    field("last_timestamp", INT64, "0+", default=-1),
                    field("coordinator_epoch", INT32, "0+"),
                    field("current_txn_start_offset", INT64, "0+", default=-1),
                )), "0+"),
            )), "0+"),
        )), "0+"),
    ],
)

DescribeProducersRequest = DESCRIBE_PRODUCERS.request_class
DescribeProducersResponse = DESCRIBE_PRODUCERS.response_class
