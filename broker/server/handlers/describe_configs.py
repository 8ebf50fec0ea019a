"""DescribeConfigs (key 32), v0-4: topic configs (overrides over broker values over defaults)
and this broker's own configuration, with Kafka's names (KIP-133, KIP-226 sources, KIP-569
types). ``configuration_keys`` (null = all) filters the entries. A broker resource must name this
broker (its id as a string, or "" for the cluster-wide default); any other is INVALID_REQUEST.
An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; other resource types are INVALID_REQUEST.
"""

from __future__ import annotations

from broker.server.config_entries import (
    SOURCE_DYNAMIC_TOPIC,
    ConfigEntry,
    describe_broker_configs,
    describe_topic_configs,
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
        entries = describe_topic_configs(topic.config, ctx.config)
    elif kind == RESOURCE_BROKER:
        if name not in ("", str(ctx.broker_id)):
            return _error(resource, ErrorCode.INVALID_REQUEST,
                          f"broker {name!r} must be described by that broker (this is {ctx.broker_id})")
        entries = describe_broker_configs(ctx.config)
    else:
        return _error(resource, ErrorCode.INVALID_REQUEST, f"resource type {kind} is not supported")
    keys = resource.configuration_keys
    if keys is not None:
        entries = [e for e in entries if e.name in set(keys)]
    return _Result(error_code=ErrorCode.NONE, error_message=None, resource_type=kind,
                   resource_name=name, configs=[_entry(e, include_synonyms) for e in entries])


def _entry(entry: ConfigEntry, include_synonyms: bool):
    """KIP-226 synonyms, most specific first: the topic's override (if any), then the broker
    setting it would fall back to."""
    synonyms = []
    if include_synonyms:
        if entry.synonym is None or entry.source == SOURCE_DYNAMIC_TOPIC:
            synonyms.append(_Synonym(name=entry.name, value=entry.value, source=entry.source))
        if entry.synonym is not None:
            name, value, source = entry.synonym
            synonyms.append(_Synonym(name=name, value=value, source=source))
    return _Entry(name=entry.name, value=entry.value, read_only=False, config_source=entry.source,
                  is_default=entry.is_default, is_sensitive=False, synonyms=synonyms,
                  config_type=entry.config_type, documentation=None)


def _error(resource, error_code: int, message: str):
    return _Result(error_code=error_code, error_message=message, resource_type=resource.resource_type,
                   resource_name=resource.resource_name, configs=[])


def error_response(header, request, error_code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(results=[
        _error(r, error_code, ErrorCode(error_code).message) for r in request.resources
    ])
