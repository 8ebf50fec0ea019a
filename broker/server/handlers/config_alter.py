"""What AlterConfigs and IncrementalAlterConfigs share: one resource's change, checked as a
whole and then written to ZooKeeper (``ConfigChangeService``), or nothing written at all.

Topics may be changed through any broker. A broker resource names this broker (its id) or the
cluster default (""), as Kafka's admin client sends them: a per-broker change is checked by the
broker it is for. Users and clients are changed through their own APIs (AlterClientQuotas,
AlterUserScramCredentials): here they are INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

from typing import Callable

from broker.cluster.errors import UnknownTopicOrPartitionError
from broker.server.context import BrokerContext
from broker.server.dynamic_config import (
    DEFAULT_BROKER,
    ConfigChangeError,
    check_broker_change,
    check_topic_change,
)
from broker.wire import ErrorCode

__all__ = ["RESOURCE_TOPIC", "RESOURCE_BROKER", "alter_resource"]

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

Change = Callable[[dict[str, str]], dict]  # the stored overrides -> the new overrides


async def alter_resource(ctx: BrokerContext, resource_type: int, name: str, change: Change,
                         validate_only: bool) -> tuple[int, str | None]:
    """(error code, message) for one resource; NONE once written (or, validating, once valid)."""
    store = ctx.config_store
    if store is None:
        return ErrorCode.UNKNOWN_SERVER_ERROR, "this broker has no config store"
    try:
        if resource_type == RESOURCE_TOPIC:
            await _alter_topic(ctx, name, change, validate_only)
        elif resource_type == RESOURCE_BROKER:
            await _alter_broker(ctx, name, change, validate_only)
        else:
            return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type} for this API"
    except ConfigChangeError as exc:
        return exc.error_code, exc.message
    except UnknownTopicOrPartitionError:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ""  # Kafka 4.1 sends no message
    return ErrorCode.NONE, None


async def _alter_topic(ctx: BrokerContext, name: str, change: Change, validate_only: bool) -> None:
    if name not in ctx.metadata.snapshot.topics:
        raise UnknownTopicOrPartitionError(name)
    store = ctx.config_store
    new = change(await store.read("topics", name))
    check_topic_change(name, new, ctx.config.log)
    if not validate_only:
        await store.write("topics", name, new)


async def _alter_broker(ctx: BrokerContext, name: str, change: Change, validate_only: bool) -> None:
    if name == "":
        entity = DEFAULT_BROKER
    elif name == str(ctx.broker_id):
        entity = name
    else:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {ctx.broker_id} or empty string, but received {name}")
    store = ctx.config_store
    new = change(await store.read("brokers", entity))
    check_broker_change(store.levels, entity, new)
    if not validate_only:
        await store.write("brokers", entity, new)
