"""KIP-226 config synonyms as Apache Kafka lists them in DescribeConfigs (``ConfigHelper``).

A config's synonyms are every place a value for it could come from, most specific first: the
topic's own setting (topics only), then for each of the broker keys it falls back to (Kafka's
``brokerConfigSynonyms``: ``log.retention.ms`` -> ``.minutes`` -> ``.hours``) the broker's static
setting, then the default, where there is one. Kafka then drops every leading synonym not named
after the config's own broker key, so ``retention.ms`` on a broker that only sets
``log.retention.hours`` lists no broker synonym at all, and keys whose Kafka default is null
(``log.retention.ms``, ``log.roll.ms``, ``log.flush.interval.ms``: derived from their
``.hours``/scheduler synonyms; ``advertised.listeners``: ``listeners``) list none unless set. An entry's source is its first synonym's, or
DEFAULT_CONFIG when there is none; a broker key with a null default and no setting reads as null,
as Kafka reports it. Dynamic broker configs (``dynamic_config``) come before the static level:
this broker's own (DYNAMIC_BROKER_CONFIG), then the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG);
the default resource (``<default>``, named "" on the wire) lists no per-broker level.

Kafka's tools print these lists (``kafka-configs --describe``), so the peer tier compares them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.server.config import BrokerConfig
from broker.server.config_entries import (
    SOURCE_DEFAULT,
    SOURCE_DYNAMIC_TOPIC,
    SOURCE_STATIC_BROKER,
    ConfigEntry,
    describe_broker_configs,
    describe_topic_configs,
)

if TYPE_CHECKING:
    from broker.server.dynamic_config import DynamicBrokerConfigs

__all__ = ["SOURCE_DYNAMIC_BROKER", "SOURCE_DYNAMIC_DEFAULT_BROKER", "Synonym", "broker_defaults", "broker_synonyms", "topic_synonyms", "kafka_broker_value",
           "source_of"]

Synonym = tuple[str, "str | None", int]  # (name, value, source)
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3

# DynamicBrokerConfig.brokerConfigSynonyms for the keys pylog has; every other key is its own.
_BROKER_SYNONYMS = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
# Keys whose Kafka default is null (KafkaConfig), and defaults of synonyms pylog does not list.
_NO_DEFAULT = frozenset({"log.retention.ms", "log.retention.minutes", "log.roll.ms", "log.flush.interval.ms",
                         "advertised.listeners"})
_EXTRA_DEFAULTS = {"log.retention.hours": "168", "log.roll.hours": "168"}


def broker_defaults(broker: BrokerConfig) -> dict[str, str | None]:
    """Every broker key's default value: a config built from only the keys it requires."""
    bare = BrokerConfig.from_properties({"broker.id": str(broker.broker_id),
                                         "zookeeper.connect": broker.zookeeper_connect})
    values: dict[str, str | None] = dict(_EXTRA_DEFAULTS)
    for entry in describe_topic_configs({}, bare):
        if entry.synonym is not None:
            values[entry.synonym[0]] = entry.value
    values.update((entry.name, entry.value) for entry in describe_broker_configs(bare))
    for key in (*_NO_DEFAULT, "broker.id", "zookeeper.connect"):  # required: no default to show
        values[key] = None
    return values


def broker_synonyms(key: str, broker: BrokerConfig, defaults: dict[str, str | None] | None = None,
                    levels: "DynamicBrokerConfigs | None" = None, per_broker: bool = True) -> list[Synonym]:
    """The broker-level synonyms of broker key ``key``, Kafka's order and trimming. ``levels``
    are the dynamic configs (None: the static properties are everything); ``per_broker=False``
    describes the cluster default, without this broker's own level."""
    defaults = broker_defaults(broker) if defaults is None else defaults
    keys = _BROKER_SYNONYMS.get(key, (key,))
    static = broker.properties if levels is None else levels.static
    chain: list[Synonym] = []
    if levels is not None:
        if per_broker:
            chain += [(k, levels.per_broker[k], SOURCE_DYNAMIC_BROKER) for k in keys if k in levels.per_broker]
        chain += [(k, levels.cluster_default[k], SOURCE_DYNAMIC_DEFAULT_BROKER)
                  for k in keys if k in levels.cluster_default]
    chain += [(k, static[k], SOURCE_STATIC_BROKER) for k in keys if k in static]
    chain += [(k, defaults[k], SOURCE_DEFAULT) for k in keys if defaults.get(k) is not None]
    while chain and chain[0][0] != key:
        chain.pop(0)
    return chain


def topic_synonyms(entry: ConfigEntry, broker: BrokerConfig,
                   defaults: dict[str, str | None] | None = None,
                   levels: "DynamicBrokerConfigs | None" = None) -> list[Synonym]:
    """A topic config's synonyms: its own setting, then its broker key's chain."""
    chain = [(entry.name, entry.value, SOURCE_DYNAMIC_TOPIC)] if entry.source == SOURCE_DYNAMIC_TOPIC else []
    if entry.synonym is not None:
        chain += broker_synonyms(entry.synonym[0], broker, defaults, levels)
    return chain


def kafka_broker_value(entry: ConfigEntry, broker: BrokerConfig) -> str | None:
    """A broker key's value as Kafka reports it: null for a null-default key nobody set."""
    if entry.name in _NO_DEFAULT and entry.name not in broker.properties:
        return None
    return entry.value


def source_of(chain: list[Synonym]) -> int:
    return chain[0][2] if chain else SOURCE_DEFAULT

