"""DescribeCluster (key 60): the cluster id, the controller and every live broker (KIP-700),
what Kafka's Java admin client asks first for ``describeCluster()`` (kafka-topics --describe,
kafka-configs --entity-type brokers). Flexible from v0. v1 adds EndpointType (KIP-919: 1 =
brokers, 2 = controllers), v2 IncludeFencedBrokers and each broker's IsFenced (KIP-1073).
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT8, INT16, INT32, STRING, array, field, struct

ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)

DESCRIBE_CLUSTER = api(
    60,
    "DescribeCluster",
    valid="0-2",
    flexible="0+",
    request=[
        field("include_cluster_authorized_operations", BOOL, "0+"),
        field("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKER),
        field("include_fenced_brokers", BOOL, "2+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+", default=None),
        field("endpoint_type", INT8, "1+", default=ENDPOINT_TYPE_BROKER),
        field("cluster_id", STRING, "0+"),
        field("controller_id", INT32, "0+", default=-1),
        field("brokers", array(struct(
            "DescribeClusterBroker",
            field("broker_id", INT32, "0+"),
            field("host", STRING, "0+"),
            field("port", INT32, "0+"),
            field("rack", STRING, "0+", nullable="0+", default=None),
            field("is_fenced", BOOL, "2+"),
        )), "0+"),
        field("cluster_authorized_operations", INT32, "0+", default=AUTHORIZED_OPERATIONS_UNKNOWN),
    ],
)

DescribeClusterRequest = DESCRIBE_CLUSTER.request_class
DescribeClusterResponse = DESCRIBE_CLUSTER.response_class
