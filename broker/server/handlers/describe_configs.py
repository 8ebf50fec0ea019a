"""DescribeConfigs (key 32), v0-4: topic configs (overrides over broker values over defaults)
and this broker's own configuration, with Kafka's names (KIP-133, KIP-226 sources, KIP-569
types). ``configuration_keys`` (null = all) filters the entries. A broker resource must name this
broker (its id as a string, or "" for the cluster-wide default); any other is INVALID_REQUEST.
An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; other resource types are INVALID_REQUEST.
"""

from __future__ import annotations

from dataclasses import replace

from broker.server.config_entries import (
    SOURCE_DEFAULT,
    ConfigEntry,
    describe_broker_configs,
    describe_topic_configs,
)
from broker.server.config_synonyms import (
    broker_defaults,
    broker_synonyms,
    kafka_broker_value,
    source_of,
    topic_synonyms,
)
from broker.server.context import BrokerContext
from broker.wire import ApiKey, DescribeConfigsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_CONFIGS
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
_Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


async def handle(ctx: BrokerContext, header, request) -> DescribeConfigsResponse:
    results = [_describe(ctx, resource, request.include_synonyms) for resource in request.resources]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe(ctx: BrokerContext, resource, include_synonyms: bool):
    kind, name = resource.resource_type, resource.resource_name
    if kind == RESOURCE_TOPIC:
        topic = ctx.metadata.snapshot.topics.get(name)
        if topic is None:
            return _error(resource, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        defaults = broker_defaults(ctx.config)
        entries = [(e, topic_synonyms(e, ctx.config, defaults))
                   for e in describe_topic_configs(topic.config, ctx.config)]
    elif kind == RESOURCE_BROKER:
        if name not in ("", str(ctx.broker_id)):
            return _error(resource, ErrorCode.INVALID_REQUEST,
                          f"broker {name!r} must be described by that broker (this is {ctx.broker_id})")
        defaults = broker_defaults(ctx.config)
        entries = [(replace(e, value=kafka_broker_value(e, ctx.config)), broker_synonyms(e.name, ctx.config, defaults))
                   for e in describe_broker_configs(ctx.config)]
    else:
        return _error(resource, ErrorCode.INVALID_REQUEST, f"resource type {kind} is not supported")
    keys = resource.configuration_keys
    if keys is not None:
        entries = [(e, chain) for e, chain in entries if e.name in set(keys)]
    return _Result(error_code=ErrorCode.NONE, error_message=None, resource_type=kind, resource_name=name,
                   configs=[_entry(e, chain, include_synonyms) for e, chain in entries])


def _entry(entry: ConfigEntry, chain: list, include_synonyms: bool):
    """KIP-226 synonyms, most specific first, and the source they give the entry (Kafka's
    rules: config_synonyms.py)."""
    source = source_of(chain)
    synonyms = [_Synonym(name=n, value=v, source=s) for n, v, s in chain] if include_synonyms else []
    return _Entry(name=entry.name, value=entry.value, read_only=False, config_source=source,
                  is_default=source == SOURCE_DEFAULT, is_sensitive=False, synonyms=synonyms,
                  config_type=entry.config_type, documentation=None)


def _error(resource, error_code: int, message: str):
    return _Result(error_code=error_code, error_message=message, resource_type=resource.resource_type,
                   resource_name=resource.resource_name, configs=[])


def error_response(header, request, error_code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[
        _error(r, error_code, ErrorCode(error_code).message) for r in request.resources
    ])
