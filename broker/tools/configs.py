"""``pylog configs``: Kafka's ``kafka-configs.sh`` for topics and brokers, over DescribeConfigs and
IncrementalAlterConfigs (``broker.client.config_admin``).

    pylog configs --bootstrap-server B --entity-type topics --entity-name t --alter \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    pylog configs --bootstrap-server B --entity-type brokers --entity-default --describe
    pylog configs --bootstrap-server B --entity-type brokers --entity-name 1 --describe --all

Output is kafka-configs' own: ``Dynamic configs for topic t are:`` then one line per config,
``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` (sensitive values print as
``null``); ``--describe`` lists only what the entity itself sets (a broker's
DYNAMIC_BROKER_CONFIG, the default's DYNAMIC_DEFAULT_BROKER_CONFIG, a topic's
DYNAMIC_TOPIC_CONFIG), ``--all`` everything. ``--alter`` prints ``Completed updating config for
topic t.`` (``... for broker 1.``, ``... default config for brokers in the cluster.``); deleting a
key the entity does not set is refused before anything is sent (``Invalid config(s): k``), as
kafka-configs does. A refused change prints ``Error while executing config command ...`` and
exits 1. ``--entity-type users`` is SCRAM credentials (``broker.tools.user_configs``);
``--entity-type clients``, and users' quota keys, are client quotas (``broker.tools.quota_configs``).
``--entity-type broker-loggers --entity-name 1``: that broker's loggers and their levels
(``--describe``; all of them, as kafka-configs shows them), ``--alter --add-config
broker.server.network=DEBUG`` / ``--delete-config`` to change them at runtime; a logger the
broker does not have is refused first (``Invalid broker logger(s): x``), as kafka-configs does.
``--command-config <file>``: the admin client's own properties, as kafka-configs reads them
(``security.protocol``, ``ssl.*``, ``sasl.*``: ``broker.client.security``).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from broker.client import AdminClient, ClientConfig, KafkaError
from broker.client.config_admin import (
    OP_DELETE,
    OP_SET,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    SOURCE_NAMES,
    DescribedConfig,
    describe_configs,
    incremental_alter_configs,
)

__all__ = ["add_configs_parser", "run_configs", "parse_add_config"]

_OWN_SOURCE = {RESOURCE_TOPIC: 1, RESOURCE_BROKER: 2}  # what --describe shows without --all
_DEFAULT_SOURCE = 3
_ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER, "broker-loggers": RESOURCE_BROKER_LOGGER,
                 "users": None, "clients": None}


def add_configs_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("configs", help="describe and alter topic and broker configs (kafka-configs)")
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument("--entity-type", choices=sorted(_ENTITY_TYPES), default=None)
    parser.add_argument("--entity-name", default=None, help="topic name, broker id or user name")
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="admin client properties (security.protocol, ssl.*, sasl.*)")
    parser.add_argument("--entity-default", action="store_true", help="the cluster-wide broker default (or the default user / client id)")
    parser.add_argument("--topic", default=None, help="same as --entity-type topics --entity-name")
    parser.add_argument("--broker", default=None, help="same as --entity-type brokers --entity-name")
    parser.add_argument("--broker-logger", default=None, help="same as --entity-type broker-loggers --entity-name")
    parser.add_argument("--broker-defaults", action="store_true",
                        help="same as --entity-type brokers --entity-default")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    parser.add_argument("--all", action="store_true", help="with --describe: every config, not only overrides")
    parser.add_argument("--add-config", default=None, metavar="K=V,K=[V1,V2]")
    parser.add_argument("--delete-config", default=None, metavar="K1,K2")
    return parser


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b],k3=v3`` -> {k1: v1, k2: "a,b", k3: v3} (kafka-configs' syntax)."""
    items, depth, current = [], 0, ""
    for char in text:
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    items.append(current)
    configs = {}
    for item in (i.strip() for i in items if i.strip()):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"Invalid entity config: all configs to be added must be in the format \"key=val\": {item}")
        configs[key.strip()] = value.strip().removeprefix("[").removesuffix("]") if value.startswith("[") else value
    return configs


def _entity(args) -> tuple[str | None, str | None, bool]:
    """(entity type, name, is default) from either spelling of the options."""
    if args.topic is not None:
        return "topics", args.topic, False
    if args.broker is not None:
        return "brokers", args.broker, False
    if args.broker_logger is not None:
        return "broker-loggers", args.broker_logger, False
    if args.broker_defaults:
        return "brokers", None, True
    return args.entity_type, args.entity_name, args.entity_default


def run_configs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    entity_type, name, is_default = _entity(args)
    if entity_type is None:
        raise ValueError("--entity-type (topics or brokers) is required")
    if is_default and entity_type == "topics":
        raise ValueError("--entity-default applies to --entity-type brokers, users and clients only")
    resource_type = _ENTITY_TYPES[entity_type]
    try:
        with AdminClient(args.bootstrap_server, config=_command_config(args.command_config)) as admin:
            if _is_quota(entity_type, args):
                return _quotas(admin, entity_type, None if is_default else name, is_default, args, out)
            if entity_type == "users":
                return _users(admin, name, args, out)
            if args.alter:
                return _alter(admin, resource_type, "" if is_default else name, args, out)
            return _describe(admin, resource_type, name, is_default, args.all, out)
    except KafkaError as exc:
        print(f"Error while executing config command: {exc}", file=err)
        return 1


def _command_config(path: str | None) -> ClientConfig | None:
    if path is None:
        return None
    from pathlib import Path

    from broker.client.security import client_security
    from broker.server.config import parse_properties
    return ClientConfig(security=client_security(parse_properties(Path(path).read_text())))


def _is_quota(entity_type: str, args) -> bool:
    """Client quotas (``broker.tools.quota_configs``): clients always; users when the configs
    altered are quotas, or for a default user (SCRAM credentials are per user)."""
    if entity_type == "clients":
        return True
    if entity_type != "users":
        return False
    from broker.tools.quota_configs import QUOTA_CONFIGS
    keys = [*parse_add_config(args.add_config or ""), *(args.delete_config or "").split(",")]
    return args.entity_default or any(k.strip() in QUOTA_CONFIGS for k in keys)


def _quotas(admin: AdminClient, entity_type: str, name: str | None, is_default: bool, args, out: TextIO) -> int:
    from broker.tools.quota_configs import alter_quotas, describe_quotas
    if not args.alter:
        return describe_quotas(admin, entity_type, name, is_default, out)
    if name is None and not is_default:
        raise ValueError(f"--alter --entity-type {entity_type} needs --entity-name or --entity-default")
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    return alter_quotas(admin, entity_type, name, parse_add_config(args.add_config or ""), deleted, out)


def _users(admin: AdminClient, name: str | None, args, out: TextIO) -> int:
    from broker.tools.user_configs import alter_users, describe_users
    if not args.alter:
        return describe_users(admin, name, out)
    if not name:
        raise ValueError("--alter --entity-type users needs --entity-name")
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    return alter_users(admin, name, parse_add_config(args.add_config or ""), deleted, out)


def _alter(admin: AdminClient, resource_type: int, name: str | None, args, out: TextIO) -> int:
    if name is None:
        raise ValueError("--alter needs --entity-name or --entity-default")
    if resource_type == RESOURCE_BROKER and name and not name.isdigit():
        raise ValueError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    added = parse_add_config(args.add_config or "")
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not added and not deleted:
        raise ValueError("--alter needs --add-config or --delete-config")
    if resource_type == RESOURCE_BROKER_LOGGER:
        _check_loggers(admin, name, [*added, *deleted])
    elif deleted:
        own = _DEFAULT_SOURCE if name == "" else _OWN_SOURCE[resource_type]
        current = {c.name for c in describe_configs(admin, resource_type, name) if c.source == own}
        missing = [k for k in deleted if k not in current]
        if missing:
            raise KafkaError(40, f"Invalid config(s): {','.join(missing)}")
    operations = [(k, OP_SET, v) for k, v in added.items()] + [(k, OP_DELETE, None) for k in deleted]
    incremental_alter_configs(admin, resource_type, name, operations)
    if resource_type == RESOURCE_TOPIC:
        print(f"Completed updating config for topic {name}.", file=out)
    elif resource_type == RESOURCE_BROKER_LOGGER:
        print(f"Completed updating config for broker-logger {name}.", file=out)
    elif name == "":
        print("Completed updating default config for brokers in the cluster.", file=out)
    else:
        print(f"Completed updating config for broker {name}.", file=out)
    return 0


def _check_loggers(admin: AdminClient, name: str, names: list[str]) -> None:
    """kafka-configs asks the broker for its loggers first and refuses unknown ones."""
    if not name.isdigit():
        raise ValueError(f"The entity name for broker-loggers must be a valid integer broker id, found: {name}")
    known = {c.name for c in describe_configs(admin, RESOURCE_BROKER_LOGGER, name)}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KafkaError(40, f"Invalid broker logger(s): {','.join(unknown)}")


def _describe(admin: AdminClient, resource_type: int, name: str | None, is_default: bool, describe_all: bool,
              out: TextIO) -> int:
    if resource_type == RESOURCE_BROKER_LOGGER and (name is None or is_default):
        raise ValueError("An entity name must be specified with --describe of broker-loggers")
    if is_default:
        targets = [""]
    elif name is not None:
        targets = [name]
    elif resource_type == RESOURCE_TOPIC:
        targets = sorted(admin.list_topics())
    else:
        targets = [str(b) for b in sorted(admin.cluster.brokers)] + [""]
    for target in targets:
        configs = describe_configs(admin, resource_type, target)
        own = _DEFAULT_SOURCE if target == "" else _OWN_SOURCE.get(resource_type)
        if not describe_all and resource_type != RESOURCE_BROKER_LOGGER:  # loggers: all, as kafka-configs
            configs = [c for c in configs if c.source == own]
        print(_heading(resource_type, target, describe_all), file=out)
        for config in sorted(configs, key=lambda c: c.name):
            print(_line(config), file=out)
    return 0


def _heading(resource_type: int, name: str, describe_all: bool) -> str:
    kind = "All" if describe_all else "Dynamic"
    if resource_type == RESOURCE_TOPIC:
        return f"{kind} configs for topic {name} are:"
    if resource_type == RESOURCE_BROKER_LOGGER:
        return f"{kind} configs for broker-logger {name} are:"
    if name == "":
        return "Default configs for brokers in the cluster are:"
    return f"{kind} configs for broker {name} are:"


def _line(config: DescribedConfig) -> str:
    def shown(value: str | None) -> str:
        return "null" if value is None or config.is_sensitive else value
    synonyms = ", ".join(f"{SOURCE_NAMES.get(source, source)}:{n}={shown(v)}" for n, v, source in config.synonyms)
    return f"  {config.name}={shown(config.value)} sensitive={str(config.is_sensitive).lower()} synonyms={{{synonyms}}}"
