"""Dynamic configs from the client side: DescribeConfigs with sources and synonyms, and
IncrementalAlterConfigs, routed as Kafka's admin client routes them (a broker's own configs to
that broker, topics and the cluster default ``""`` to any broker). ``pylog configs`` uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from broker.client.admin import AdminClient
from broker.client.errors import KafkaError
from broker.wire import ApiKey, ErrorCode

__all__ = ["RESOURCE_TOPIC", "RESOURCE_BROKER", "RESOURCE_BROKER_LOGGER", "SOURCE_NAMES", "OP_SET", "OP_DELETE", "OP_APPEND",
           "OP_SUBTRACT", "DescribedConfig", "describe_configs", "incremental_alter_configs"]

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER = 2, 4, 8
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
# DescribeConfigsResponse.ConfigSource, as Kafka's ConfigEntry.ConfigSource names them
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}


@dataclass(frozen=True)
class DescribedConfig:
    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    synonyms: tuple[tuple[str, str | None, int], ...]


def _connection(admin: AdminClient, resource_type: int, name: str):
    if resource_type in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER) and name.isdigit():  # the broker it names
        return admin.cluster.connection(int(name))
    return admin.cluster.any_connection()


def describe_configs(admin: AdminClient, resource_type: int, name: str,
                     keys: Sequence[str] | None = None) -> list[DescribedConfig]:
    """One resource's configs with their sources and synonyms (KIP-226)."""
    conn = _connection(admin, resource_type, name)
    version = conn.version_for(ApiKey.DESCRIBE_CONFIGS, min_version=1)
    response = conn.request(ApiKey.DESCRIBE_CONFIGS, {
        "resources": [{"resource_type": resource_type, "resource_name": name,
                       "configuration_keys": list(keys) if keys is not None else None}],
        "include_synonyms": True,
    }, version)
    result = response.results[0]
    if result.error_code != ErrorCode.NONE:
        raise KafkaError(result.error_code, result.error_message or "")
    return [DescribedConfig(c.name, c.value, c.config_source, c.is_sensitive, c.read_only,
                            tuple((s.name, s.value, s.source) for s in c.synonyms))
            for c in result.configs]


def incremental_alter_configs(admin: AdminClient, resource_type: int, name: str,
                              operations: Sequence[tuple[str, int, str | None]],
                              validate_only: bool = False) -> None:
    """Apply (key, operation, value) operations to one resource; KafkaError if refused."""
    conn = _connection(admin, resource_type, name)
    version = conn.version_for(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    response = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
        "resources": [{"resource_type": resource_type, "resource_name": name,
                       "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in operations]}],
        "validate_only": validate_only,
    }, version)
    result = response.responses[0]
    if result.error_code != ErrorCode.NONE:
        raise KafkaError(result.error_code, result.error_message or "")
