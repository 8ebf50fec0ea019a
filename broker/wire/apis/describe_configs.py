"""DescribeConfigs (key 32): topic and broker configs (KIP-133). v1 IncludeSynonyms/ConfigSource
(KIP-226), v3 IncludeDocumentation/ConfigType (KIP-569), v4 flexible. v0 had IsDefault instead
of ConfigSource.
"""

from broker.wire.api import api
from broker.wire.schema import BOOL, INT8, INT16, INT32, STRING, array, field, struct

RESOURCE_TYPE_TOPIC = 2
RESOURCE_TYPE_BROKER = 4

DESCRIBE_CONFIGS = api(
    32,
    "DescribeConfigs",
    valid="0-4",
    flexible="4+",
    request=[
        field("resources", array(struct(
            "DescribeConfigsResource",
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configuration_keys", array(STRING), "0+", nullable="0+"),
        )), "0+"),
        field("include_synonyms", BOOL, "1+", default=False),
        field("include_documentation", BOOL, "3+", default=False),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("results", array(struct(
            "DescribeConfigsResult",
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+"),
            field("resource_type", INT8, "0+"),
            field("resource_name", STRING, "0+"),
            field("configs", array(struct(
                "DescribeConfigsResourceResult",
                field("name", STRING, "0+"),
                field("value", STRING, "0+", nullable="0+"),
                field("read_only", BOOL, "0+"),
                field("config_source", INT8, "1+", default=-1),
                field("is_default", BOOL, "0"),
                field("is_sensitive", BOOL, "0+"),
                field("synonyms", array(struct(
                    "DescribeConfigsSynonym",
                    field("name", STRING, "1+"),
                    field("value", STRING, "1+", nullable="1+"),
                    field("source", INT8, "1+"),
                )), "1+"),
                field("config_type", INT8, "3+", default=0),
                field("documentation", STRING, "3+", nullable="3+"),
            )), "0+"),
        )), "0+"),
    ],
)

DescribeConfigsRequest = DESCRIBE_CONFIGS.request_class
DescribeConfigsResponse = DESCRIBE_CONFIGS.response_class
