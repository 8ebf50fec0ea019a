"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), KIP-546: client quotas by entity
(``user`` and/or ``client-id``; a null name is the default entity). v1 is flexible; Kafka 4.1
serves v0-1 of both."""

from broker.wire.api import api
from broker.wire.schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, array, field, struct


def _entity(name: str):
    return array(struct(name, field("entity_type", STRING, "0+"),
                        field("entity_name", STRING, "0+", nullable="0+", default=None)))


DESCRIBE_CLIENT_QUOTAS = api(
    48,
    "DescribeClientQuotas",
    valid="0-1",
    flexible="1+",
    request=[
        field("components", array(struct(
            "ComponentData",
            field("entity_type", STRING, "0+"),
            field("match_type", INT8, "0+"),
            field("match", STRING, "0+", nullable="0+", default=None),
        )), "0+"),
        field("strict", BOOL, "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+", default=None),
        field("entries", array(struct(
            "EntryData",
            field("entity", _entity("EntityData"), "0+"),
            field("values", array(struct("ValueData", field("key", STRING, "0+"),
                                         field("value", FLOAT64, "0+"))), "0+"),
        )), "0+", nullable="0+", default=None),
    ],
)

ALTER_CLIENT_QUOTAS = api(
    49,
    "AlterClientQuotas",
    valid="0-1",
    flexible="1+",
    request=[
        field("entries", array(struct(
            "EntryData",
            field("entity", _entity("EntityData"), "0+"),
            field("ops", array(struct("OpData", field("key", STRING, "0+"), field("value", FLOAT64, "0+"),
                                      field("remove", BOOL, "0+"))), "0+"),
        )), "0+"),
        field("validate_only", BOOL, "0+"),
    ],
    response=[
        field("throttle_time_ms", INT32, "0+"),
        field("entries", array(struct(
            "EntryData",
            field("error_code", INT16, "0+"),
            field("error_message", STRING, "0+", nullable="0+", default=None),
            field("entity", _entity("EntityData"), "0+"),
        )), "0+"),
    ],
)

DescribeClientQuotasRequest = DESCRIBE_CLIENT_QUOTAS.request_class
DescribeClientQuotasResponse = DESCRIBE_CLIENT_QUOTAS.response_class
AlterClientQuotasRequest = ALTER_CLIENT_QUOTAS.request_class
AlterClientQuotasResponse = ALTER_CLIENT_QUOTAS.response_class
