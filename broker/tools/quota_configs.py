"""``pylog configs --entity-type clients|users``: client quotas, as ``kafka-configs.sh`` alters
and describes them (KIP-546: AlterClientQuotas / DescribeClientQuotas, to any broker).

    pylog configs --bootstrap-server B --alter --entity-type clients --entity-name app \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    pylog configs --bootstrap-server B --alter --entity-type users --entity-default --delete-config producer_byte_rate
    pylog configs --bootstrap-server B --describe --entity-type clients [--entity-name app]

Output lines are kafka-configs': ``Completed updating config for client app.`` and
``Quota configs for client-id 'app' are producer_byte_rate=1048576.0``. A user together with a
client id (``users/<u>/clients/<c>``) is not reachable from this command (the API serves it).
"""

from __future__ import annotations

from typing import TextIO

from broker.client import AdminClient, KafkaError
from broker.wire import ApiKey

__all__ = ["QUOTA_CONFIGS", "alter_quotas", "describe_quotas"]

QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
_TYPES = {"clients": "client-id", "users": "user"}


def _value(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"Invalid value {text} for configuration {key}") from None


def alter_quotas(admin: AdminClient, entity_type: str, name: str | None, added: dict[str, str],
                 deleted: list[str], out: TextIO) -> int:
    ops = [{"key": k, "value": _value(k, v), "remove": False} for k, v in added.items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in deleted]
    request = {"validate_only": False, "entries": [
        {"entity": [{"entity_type": _TYPES[entity_type], "entity_name": name}], "ops": ops}]}
    response = admin.cluster.any_connection().request(ApiKey.ALTER_CLIENT_QUOTAS, request)
    for entry in response.entries:
        if entry.error_code:
            raise KafkaError(entry.error_code, entry.error_message)
    if name is None:
        print(f"Completed updating default config for {entity_type} in the cluster.", file=out)
    else:
        print(f"Completed updating config for {entity_type[:-1]} {name}.", file=out)
    return 0


def describe_quotas(admin: AdminClient, entity_type: str, name: str | None, is_default: bool, out: TextIO) -> int:
    kind = _TYPES[entity_type]
    match = ({"entity_type": kind, "match_type": 1, "match": None} if is_default else
             {"entity_type": kind, "match_type": 0, "match": name} if name is not None else
             {"entity_type": kind, "match_type": 2, "match": None})
    response = admin.cluster.any_connection().request(ApiKey.DESCRIBE_CLIENT_QUOTAS,
                                                      {"components": [match], "strict": True})
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message)
    for entry in response.entries or []:
        entity = ", ".join(_entity_text(e.entity_type, e.entity_name) for e in entry.entity)
        values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
        print(f"Quota configs for {entity} are {values}", file=out)
    return 0


def _entity_text(entity_type: str, name: str | None) -> str:
    kind = "user-principal" if entity_type == "user" else entity_type
    return f"the default {kind}" if name is None else f"{kind} '{name}'"
