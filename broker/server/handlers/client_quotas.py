"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas in ZooKeeper, where
Kafka's ZooKeeper mode kept them (``/config/users/<user>[/clients/<client-id>]``,
``/config/clients/<client-id>``, ``<default>`` for a null name, names URL-encoded). An alteration
rewrites the entity's znode (keeping its other configs, such as SCRAM credentials) and adds a
``/config/changes`` notification, so every broker applies it without restart (``quota_store``).

Validation as Kafka's (``ClientQuotaControlManager``): entity types ``user`` and ``client-id``,
each at most once; keys ``producer_byte_rate``, ``consumer_byte_rate`` (whole numbers) and
``request_percentage``; values above 0. A bad entry gets INVALID_REQUEST and none of its ops is
applied (the other entries are).
"""

from __future__ import annotations

import asyncio
import urllib.parse

from broker.server.context import BrokerContext
from broker.server.quota import DEFAULT, QUOTA_KEYS, sanitize, validate_quota
from broker.wire import AlterClientQuotasResponse, DescribeClientQuotasResponse, ErrorCode

__all__ = ["alter", "describe", "entity_path"]

USER, CLIENT_ID = "user", "client-id"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _Invalid(Exception):
    pass


def entity_path(entity: dict) -> tuple[str, str]:
    """``{"user": "alice", "client-id": None}`` -> ``("users", "alice/clients/<default>")``."""
    def name(value):
        return DEFAULT if value is None else sanitize(value)
    if USER in entity:
        user = name(entity[USER])
        return ("users", f"{user}/clients/{name(entity[CLIENT_ID])}") if CLIENT_ID in entity else ("users", user)
    return "clients", name(entity[CLIENT_ID])


def _entity(items) -> dict:
    entity = {}
    for item in items:
        if item.entity_type not in (USER, CLIENT_ID):
            raise _Invalid(f"Unhandled client quota entity type: {item.entity_type}")
        if item.entity_type in entity:
            raise _Invalid(f"Duplicate {item.entity_type} entity type in request")
        entity[item.entity_type] = item.entity_name
    if not entity:
        raise _Invalid("Invalid empty client quota entity")
    return entity


def _number_text(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


async def alter(ctx: BrokerContext, request) -> AlterClientQuotasResponse:
    results = []
    for entry in request.entries:
        error, message, entity_items = ErrorCode.NONE, None, entry.entity
        try:
            entity = _entity(entry.entity)
            entity_type, name = entity_path(entity)
            changes = {}
            for op in entry.ops:
                if op.remove:
                    if op.key not in QUOTA_KEYS:
                        raise _Invalid(f"Invalid configuration key {op.key}")
                    changes[op.key] = None
                else:
                    try:
                        validate_quota(op.key, _number_text(op.value))
                    except ValueError as exc:
                        raise _Invalid(str(exc)) from None
                    changes[op.key] = _number_text(op.value)
            if not request.validate_only:
                config = await ctx.config_store.read(entity_type, name)
                for key, value in changes.items():
                    if value is None:
                        config.pop(key, None)
                    else:
                        config[key] = value
                await ctx.config_store.write(entity_type, name, config)
        except _Invalid as exc:
            error, message = ErrorCode.INVALID_REQUEST, str(exc)
        entity_out = [AlterClientQuotasResponse.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                      for e in entity_items]
        results.append(AlterClientQuotasResponse.EntryData(error_code=error, error_message=message,
                                                           entity=entity_out))
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=results)


def _matches(entity: dict, components, strict: bool) -> bool:
    for component in components:
        present = component.entity_type in entity
        value = entity.get(component.entity_type)
        if component.match_type == MATCH_EXACT:
            if not present or value != component.match:
                return False
        elif component.match_type == MATCH_DEFAULT:
            if not present or value is not None:
                return False
        elif not present:  # MATCH_SPECIFIED: any name (the default included)
            return False
    return not strict or len(entity) == len(components)


async def describe(ctx: BrokerContext, request) -> DescribeClientQuotasResponse:
    types = [c.entity_type for c in request.components]
    if any(t not in (USER, CLIENT_ID) for t in types) or len(set(types)) != len(types) or any(
            c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED) for c in request.components):
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                            error_message="Invalid match component", entries=None)
    found = await asyncio.to_thread(ctx.quota_store.read_all)
    entries = []
    for (user, client), config in sorted(found.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or "")):
        values = {k: float(v) for k, v in config.items() if k in QUOTA_KEYS and _is_number(v)}
        if not values:
            continue
        entity = {}
        if user is not None:
            entity[USER] = None if user == DEFAULT else urllib.parse.unquote(user)
        if client is not None:
            entity[CLIENT_ID] = None if client == DEFAULT else urllib.parse.unquote(client)
        if not _matches(entity, request.components, request.strict):
            continue
        entries.append(DescribeClientQuotasResponse.EntryData(
            entity=[DescribeClientQuotasResponse.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            values=[DescribeClientQuotasResponse.ValueData(key=k, value=v) for k, v in sorted(values.items())]))
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                        entries=entries)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
