"""DescribeLogDirs (key 35, v1-4, v2 flexible): each log directory of the broker asked, its
partitions and their sizes (KIP-113); v3 adds a top-level error code, v4 the directory's total
and usable bytes (KIP-827). v0 parses too; Kafka 4 no longer serves it (KIP-896)."""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT16, INT32, INT64, STRING, array, field, struct

DESCRIBE_LOG_DIRS = api(
    35,
    "DescribeLogDirs",
    valid="0-4",
    flexible="2+",
    request=[
        field("topics", array(struct(
            "DescribableLogDirTopic",
            field("topic", STRING, "0+"),
            field("partitions", array(INT32), "0+"),
        )), "0+", nullable="0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "3+", default=0),
        field("results", array(struct(
            "DescribeLogDirsResult",
            field("error_code", INT16, "0+"),
            field("log_dir", STRING, "0+"),
            field("topics", array(struct(
                "DescribeLogDirsTopic",
                field("name", STRING, "0+"),
                field("partitions", array(struct(
                    "DescribeLogDirsPartition",
                    field("partition_index", INT32, "0+"),
                    field("partition_size", INT64, "0+"),
                    field("offset_lag", INT64, "0+"),
                    field("is_future_key", BOOL, "0+"),
                )), "0+"),
            )), "0+"),
            field("total_bytes", INT64, "4+", default=-1),
            field("usable_bytes", INT64, "4+", default=-1),
        )), "0+"),
    ],
)

DescribeLogDirsRequest = DESCRIBE_LOG_DIRS.request_class
DescribeLogDirsResponse = DESCRIBE_LOG_DIRS.response_class
