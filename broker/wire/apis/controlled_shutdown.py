"""ControlledShutdown (key 7): a stopping broker asks the controller to move its leaderships
away first. Inter-broker only (ZooKeeper mode).

Kafka's range is v0-3: v2 BrokerEpoch (KIP-380), v3 flexible. The spec covers v1-3: v0 uses a
request header without a client id (header v0), which ``broker.wire.frame`` does not parse, so
v0 is neither parsed nor advertised (no broker of Kafka 0.9+ sends it).
"""

from broker.wire.api import api
from broker.wire.schema import INT16, INT32, INT64, STRING, array, field, struct

CONTROLLED_SHUTDOWN = api(
    7,
    "ControlledShutdown",
    valid="1-3",
    flexible="3+",
    request=[
        field("broker_id", INT32, "0+"),
        field("broker_epoch", INT64, "2+", default=-1),
    ],
    response=[
        field("error_code", INT16, "0+"),
        field("remaining_partitions", array(struct(
            "RemainingPartition",
            field("topic_name", STRING, "0+"),
            field("partition_index", INT32, "0+"),
        )), "0+"),
    ],
)

ControlledShutdownRequest = CONTROLLED_SHUTDOWN.request_class
ControlledShutdownResponse = CONTROLLED_SHUTDOWN.response_class
