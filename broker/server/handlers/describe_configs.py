"""DescribeConfigs (key 32), v0-4: topic configs (overrides over broker values over defaults)
and this broker's own configuration, with Kafka's names (KIP-133, KIP-226 sources, KIP-569
types); a broker key is read-only unless AlterConfigs may change it (``DYNAMIC_BROKER_KEYS``). ``configuration_keys`` (null = all) filters the entries. A broker resource must name this
broker (its id as a string, or "" for the cluster-wide default: then only what the default
``/config/brokers/<default>`` sets, as Kafka); any other is INVALID_REQUEST. Sources and synonyms
include the dynamic levels (``config_changes``).
A BROKER_LOGGER (8) resource lists this broker's loggers with their levels (``logger_levels``).
An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; other resource types are INVALID_REQUEST.
"""

from __future__ import annotations

from dataclasses import replace

from broker.server.config_entries import (
    SOURCE_DEFAULT,
    TYPE_LONG,
    ConfigEntry,
    describe_broker_configs,
    describe_topic_configs,
)
from broker.server.config_synonyms import (
    SOURCE_DYNAMIC_BROKER,
    SOURCE_DYNAMIC_DEFAULT_BROKER,
    broker_defaults,
    broker_synonyms,
    kafka_broker_value,
    source_of,
    topic_synonyms,
)
from broker.server.context import BrokerContext
from broker.server.dynamic_config import DYNAMIC_BROKER_KEYS, static_broker_keys
from broker.server.logger_levels import RESOURCE_BROKER_LOGGER, loggers
from broker.wire import ApiKey, DescribeConfigsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_CONFIGS
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
_SOURCE_BROKER_LOGGER = 6  # DYNAMIC_BROKER_LOGGER_CONFIG
TYPE_PASSWORD = 9  # ConfigDef.Type.PASSWORD: Kafka's type for a key it does not know
_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
_Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


async def handle(ctx: BrokerContext, header, request) -> DescribeConfigsResponse:
    results = [_describe(ctx, resource, request.include_synonyms) for resource in request.resources]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe(ctx: BrokerContext, resource, include_synonyms: bool):
    kind, name = resource.resource_type, resource.resource_name
    levels = getattr(ctx.config_store, "levels", None)
    if kind == RESOURCE_TOPIC:
        topic = ctx.metadata.snapshot.topics.get(name)
        if topic is None:
            return _error(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")  # Kafka 4.1: no message
        defaults = broker_defaults(ctx.config)
        entries = [(e, topic_synonyms(e, ctx.config, defaults, levels))
                   for e in describe_topic_configs(topic.config, ctx.config)]
    elif kind == RESOURCE_BROKER:
        if name not in ("", str(ctx.broker_id)):
            return _error(resource, ErrorCode.INVALID_REQUEST,
                          f"broker {name!r} must be described by that broker (this is {ctx.broker_id})")
        entries = _broker_entries(ctx, levels, per_broker=name != "")
    elif kind == RESOURCE_BROKER_LOGGER:
        return _logger_levels(ctx, resource)
    else:
        return _error(resource, ErrorCode.INVALID_REQUEST, f"resource type {kind} is not supported")
    keys = resource.configuration_keys
    if keys is not None:
        entries = [(e, chain) for e, chain in entries if e.name in set(keys)]
    # Kafka: a broker key is read-only unless it may change without a restart; topic keys never are
    return _Result(error_code=ErrorCode.NONE, error_message=None, resource_type=kind, resource_name=name,
                   configs=[_entry(e, chain, include_synonyms,
                                   read_only=kind == RESOURCE_BROKER and e.name not in DYNAMIC_BROKER_KEYS)
                            for e, chain in entries])


def _logger_levels(ctx: BrokerContext, resource):
    """Kafka's ``ConfigHelper`` for BROKER_LOGGER: every logger, source DYNAMIC_BROKER_LOGGER_CONFIG,
    no synonyms; the resource must name this broker."""
    name = resource.resource_name
    if not name:
        return _error(resource, ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    if not name.lstrip("-").isdigit():
        return _error(resource, ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}")
    if int(name) != ctx.broker_id:
        return _error(resource, ErrorCode.INVALID_REQUEST,
                      f"Unexpected broker id, expected {ctx.broker_id} but received {name}")
    keys = resource.configuration_keys
    configs = [_Entry(name=logger, value=level, read_only=False, config_source=_SOURCE_BROKER_LOGGER,
                      is_default=False, is_sensitive=False, synonyms=[], config_type=0, documentation=None)
               for logger, level in sorted(loggers().items()) if keys is None or logger in keys]
    return _Result(error_code=ErrorCode.NONE, error_message=None, resource_type=resource.resource_type,
                   resource_name=name, configs=configs)


def _broker_entries(ctx: BrokerContext, levels, per_broker: bool) -> list:
    """This broker's configs (``per_broker``), or only those the cluster default sets (Kafka
    describes the default resource so). A dynamic key pylog does not know is listed as Kafka
    lists it: sensitive, value hidden."""
    defaults = broker_defaults(ctx.config)
    entries = [(replace(e, value=kafka_broker_value(e, ctx.config)),
                broker_synonyms(e.name, ctx.config, defaults, levels, per_broker))
               for e in describe_broker_configs(ctx.config)]
    if levels is None:
        return entries if per_broker else []
    dynamic = {**levels.cluster_default, **levels.per_broker} if per_broker else dict(levels.cluster_default)
    if not per_broker:
        entries = [(e, chain) for e, chain in entries if e.name in dynamic]
    known = {e.name for e, _ in entries}
    for key in sorted(set(dynamic) - known):
        source = SOURCE_DYNAMIC_BROKER if key in levels.per_broker and per_broker else SOURCE_DYNAMIC_DEFAULT_BROKER
        if key in static_broker_keys():  # a dynamic key DescribeConfigs does not list otherwise
            entries.append((ConfigEntry(key, dynamic[key], source, TYPE_LONG), [(key, dynamic[key], source)]))
        else:
            entries.append((ConfigEntry(key, None, source, TYPE_PASSWORD), [(key, None, source)]))
    return entries


def _entry(entry: ConfigEntry, chain: list, include_synonyms: bool, read_only: bool = False):
    """KIP-226 synonyms, most specific first, and the source they give the entry (Kafka's
    rules: config_synonyms.py)."""
    source = source_of(chain)
    synonyms = [_Synonym(name=n, value=v, source=s) for n, v, s in chain] if include_synonyms else []
    return _Entry(name=entry.name, value=entry.value, read_only=read_only, config_source=source,
                  is_default=source == SOURCE_DEFAULT, is_sensitive=entry.config_type == TYPE_PASSWORD,
                  synonyms=synonyms,
                  config_type=entry.config_type, documentation=None)


def _error(resource, error_code: int, message: str):
    return _Result(error_code=error_code, error_message=message, resource_type=resource.resource_type,
                   resource_name=resource.resource_name, configs=[])


def error_response(header, request, error_code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[
        _error(r, error_code, ErrorCode(error_code).message) for r in request.resources
    ])
