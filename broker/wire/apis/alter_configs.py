"""AlterConfigs (key 33, v0-2, v2 flexible) and IncrementalAlterConfigs (key 44, v0-1, v1
flexible): change topic and broker configs (KIP-133, KIP-339). AlterConfigs replaces a
resource's whole set of dynamic configs; IncrementalAlterConfigs names an operation per key
(0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT; the last two for LIST configs). Both answer one
(error_code, error_message) per resource.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT8, INT16, INT32, STRING, array, field, struct

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _response(name: str) -> list:
    return [
        field("throttle_time_ms", INT32, "0+"),
        field("responses", array(struct(
            name,
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+"),
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
        )), "0+"),
    ]


ALTER_CONFIGS = api(
    33,
    "AlterConfigs",
    valid="0-2",
    flexible="2+",
    request=[
        field("resources", array(struct(
            "AlterConfigsResource",
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configs", array(struct(
                "AlterableConfig",
                field("name", STRING, "0+"),
                field("value", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
        field("validate_only", BOOL, "0+", default=False),
    ],
    response=_response("AlterConfigsResourceResponse"),
)

INCREMENTAL_ALTER_CONFIGS = api(
    44,
    "IncrementalAlterConfigs",
    valid="0-1",
    flexible="1+",
    request=[
        field("resources", array(struct(
            "IncrementalAlterConfigsResource",
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configs", array(struct(
                "IncrementalAlterableConfig",
                field("name", STRING, "0+"),
                field("config_operation", INT8, "0+"),
                field("value", STRING, "0+", nullable="0+"),
            )), "0+"),
        )), "0+"),
        field("validate_only", BOOL, "0+", default=False),
    ],
    response=_response("IncrementalAlterConfigsResourceResponse"),
)

AlterConfigsRequest = ALTER_CONFIGS.request_class
AlterConfigsResponse = ALTER_CONFIGS.response_class
IncrementalAlterConfigsRequest = INCREMENTAL_ALTER_CONFIGS.request_class
IncrementalAlterConfigsResponse = INCREMENTAL_ALTER_CONFIGS.response_class
