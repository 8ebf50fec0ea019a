"""``pylog acls``: Kafka's ``kafka-acls`` (``kafka.admin.AclCommand``): add, list and remove ACLs.

Options, defaults and output are kafka-acls': resources ``--topic/--group/--transactional-id``
(repeatable), ``--cluster``, ``--delegation-token``; ``--resource-pattern-type`` (literal, the
default, or prefixed; any and match when listing or removing); ``--allow-principal``,
``--deny-principal`` with ``--allow-host``/``--deny-host`` (``*`` when a principal is given without
a host); ``--operation`` (repeatable, default All); ``--producer`` (Write, Describe, Create on
topics; Write, Describe on transactional ids; ``--idempotent``: IdempotentWrite on the cluster) and
``--consumer`` (Read, Describe on topics, Read on groups); ``--principal`` to list one principal's
ACLs; ``--remove`` asks for confirmation unless ``--force``.

Two ways to reach the ACLs: ``--bootstrap-server`` uses CreateAcls/DescribeAcls/DeleteAcls (the
principal of the connection needs ALTER / DESCRIBE on the cluster; ``--command-config`` gives the
admin client's ``security.protocol``, ``ssl.*`` and ``sasl.*`` as kafka-acls takes them), ``--zookeeper HOST:PORT[/chroot]``
(or Kafka 2.x's ``--authorizer-properties zookeeper.connect=...``) writes ZooKeeper directly, as
Kafka's ZooKeeper-era tool did: how the first ACLs of a secured cluster are made.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable, TextIO

from broker.auth.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation as Op,
    AclPermissionType as Perm,
    CLUSTER_NAME,
    PatternType,
    ResourcePattern,
    ResourceType as Rt,
    parse_enum,
    validate_binding,
)

__all__ = ["add_acls_parser", "run_acls", "format_pattern", "format_entry"]


def add_acls_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("acls", help="add, list or remove ACLs (kafka-acls)")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help="through the ACL APIs")
    where.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="write ZooKeeper directly")
    where.add_argument("--authorizer-properties", nargs="+", metavar="KEY=VALUE",
                       help="Kafka 2.x style: zookeeper.connect=HOST:PORT[/CHROOT]")
    for name, what in (("--topic", "topic"), ("--group", "consumer group"),
                       ("--transactional-id", "transactional id"), ("--delegation-token", "delegation token")):
        parser.add_argument(name, action="append", default=[], help=f"a {what} (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default="literal",
                        help="literal (default), prefixed; any or match to list or remove")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, AlterConfigs, "
                             "DescribeConfigs, IdempotentWrite, All (repeatable; default All)")
    parser.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    parser.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (with --group)")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument("--principal", action="append", default=[], help="with --list: only this principal's ACLs")
    parser.add_argument("--force", action="store_true", help="remove without asking")
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="with --bootstrap-server: admin client properties (security.protocol, ssl.*, sasl.*)")
    parser.add_argument("--timeout-ms", type=int, default=30_000, help="how long to wait (default 30000)")
    return parser


# -------------------------------------------------------------------- Kafka's text forms


def format_pattern(pattern: ResourcePattern, kind: str = "ResourcePattern") -> str:
    return f"{kind}(resourceType={pattern.resource_type.name}, name={pattern.name}, patternType={pattern.pattern_type.name})"


def format_entry(entry: AccessControlEntry) -> str:
    return (f"(principal={entry.principal}, host={entry.host}, operation={entry.operation.name}, "
            f"permissionType={entry.permission_type.name})")


def _block(title: str, entries) -> str:
    """Kafka 4.1's AclCommand: ``<title>:`` then one tab-indented entry a line, then a blank line."""
    lines = "".join("\t" + format_entry(e) + "\n" for e in sorted(entries, key=_entry_key))
    return f"{title}:\n{lines}\n"


def _entry_key(entry: AccessControlEntry):
    return (entry.principal, entry.host, entry.operation, entry.permission_type)


# ----------------------------------------------------------------- options to ACLs (pure)


def resource_filters(args, pattern_type: PatternType) -> list[ResourcePattern]:
    """The resources named on the command line (kafka-acls' ``getResourceFilter``); with a
    non-specific pattern type these are filters, carried in ``ResourcePattern`` all the same."""
    out = [ResourcePattern(Rt.TOPIC, t.strip(), pattern_type) for t in args.topic]
    if pattern_type is PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append(ResourcePattern(Rt.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    out += [ResourcePattern(Rt.GROUP, g.strip(), pattern_type) for g in args.group]
    out += [ResourcePattern(Rt.TRANSACTIONAL_ID, t, pattern_type) for t in args.transactional_id]
    out += [ResourcePattern(Rt.DELEGATION_TOKEN, t.strip(), pattern_type) for t in args.delegation_token]
    return list(dict.fromkeys(out))


def entries_for(args, operations) -> set[AccessControlEntry]:
    def hosts(given, principals):
        return {h.strip() for h in given} if given else ({"*"} if principals else set())
    out = set()
    for principals, given_hosts, permission in ((args.allow_principal, args.allow_host, Perm.ALLOW),
                                               (args.deny_principal, args.deny_host, Perm.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise ValueError(f"principal {principal!r} is not '<type>:<name>' (e.g. User:alice)")
        for principal in principals:
            for host in hosts(given_hosts, principals):
                out.update(AccessControlEntry(principal.strip(), host, op, permission) for op in operations)
    return out


def resource_acls(args, pattern_type: PatternType) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """kafka-acls' ``getResourceFilterToAcls``: per resource, the entries the options make."""
    resources = resource_filters(args, pattern_type)
    out: dict[ResourcePattern, set[AccessControlEntry]] = {}
    if not args.producer and not args.consumer:
        operations = {parse_enum(Op, o) for o in args.operation} or {Op.ALL}
        out = {r: entries_for(args, operations) for r in resources}
    if args.producer:
        for r in resources:
            if r.resource_type is Rt.TOPIC:
                out[r] = entries_for(args, {Op.WRITE, Op.DESCRIBE, Op.CREATE})
            elif r.resource_type is Rt.TRANSACTIONAL_ID:
                out[r] = entries_for(args, {Op.WRITE, Op.DESCRIBE})
        if args.idempotent:
            out[ResourcePattern(Rt.CLUSTER, CLUSTER_NAME)] = entries_for(args, {Op.IDEMPOTENT_WRITE})
    if args.consumer:
        if not args.group:
            raise ValueError("--consumer needs --group")
        for r in resources:
            if r.resource_type is Rt.TOPIC:
                out[r] = out.get(r, set()) | entries_for(args, {Op.READ, Op.DESCRIBE})
            elif r.resource_type is Rt.GROUP:
                out[r] = out.get(r, set()) | entries_for(args, {Op.READ})
    return out


# ---------------------------------------------------------------------------- the actions


def run_acls(args: argparse.Namespace, out: TextIO, err: TextIO | None = None,
             confirm: Callable[[str], bool] | None = None) -> int:
    pattern_type = parse_enum(PatternType, args.resource_pattern_type)
    backend = _backend(args)
    try:
        if args.add:
            return _add(backend, args, pattern_type, out)
        if args.remove:
            return _remove(backend, args, pattern_type, out, confirm or _ask)
        return _list(backend, args, pattern_type, out)
    finally:
        backend.close()


def _add(backend, args, pattern_type, out) -> int:
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError(f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when adding acls.")
    resources = resource_acls(args, pattern_type)
    if not resources:
        raise ValueError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --delegation-token <Delegation Token ID>")
    if any(not entries for entries in resources.values()):
        raise ValueError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    for pattern, entries in resources.items():
        for entry in entries:
            validate_binding(AclBinding(pattern, entry))
    for pattern, entries in resources.items():
        out.write(_block(f"Adding ACLs for resource `{format_pattern(pattern)}`", entries))
        backend.create([AclBinding(pattern, e) for e in entries])
    return 0


def _remove(backend, args, pattern_type, out, confirm) -> int:
    resources = resource_acls(args, pattern_type)
    if not resources:
        raise ValueError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                         "or --delegation-token <Delegation Token ID>")
    for pattern, entries in resources.items():
        shown = format_pattern(pattern, "ResourcePatternFilter")
        question = (f"Are you sure you want to delete all ACLs for resource filter `{shown}`? (y/n)" if not entries
                    else _block("Are you sure you want to remove ACLs", entries) + f" from resource filter `{shown}`? (y/n)")
        if not args.force and not confirm(question):
            continue
        base = dict(resource_type=pattern.resource_type, resource_name=pattern.name, pattern_type=pattern.pattern_type)
        filters = ([AclBindingFilter(**base)] if not entries else
                   [AclBindingFilter(**base, principal=e.principal, host=e.host, operation=e.operation,
                                     permission_type=e.permission_type) for e in entries])
        backend.delete(filters)
    return 0


def _list(backend, args, pattern_type, out) -> int:
    resources = resource_filters(args, pattern_type)
    filters = ([AclBindingFilter(resource_type=r.resource_type, resource_name=r.name, pattern_type=r.pattern_type)
                for r in resources] or [AclBindingFilter()])
    by_pattern: dict[ResourcePattern, set] = {}
    for acl_filter in filters:
        for binding in backend.describe(acl_filter):
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
    ordered = sorted(by_pattern.items(), key=lambda kv: (kv[0].resource_type, kv[0].pattern_type, kv[0].name))
    for principal in args.principal or [None]:
        if principal is not None:
            out.write(f"ACLs for principal `{principal}`\n")
        for pattern, entries in ordered:
            mine = {e for e in entries if principal is None or e.principal == principal}
            if mine:
                out.write(_block(f"Current ACLs for resource `{format_pattern(pattern)}`", mine))
    return 0


def _ask(question: str) -> bool:
    print(question)
    try:
        return input().strip().lower() == "y"
    except EOFError:
        return False


def _backend(args):
    if args.bootstrap_server:
        from broker.tools.acls_backends import ApiBackend
        return ApiBackend(args.bootstrap_server, args.timeout_ms, args.command_config)
    connect = args.zookeeper
    if connect is None:
        props = dict(item.partition("=")[::2] for item in args.authorizer_properties)
        connect = props.get("zookeeper.connect")
        if not connect:
            raise ValueError("--authorizer-properties needs zookeeper.connect=HOST:PORT[/CHROOT]")
    from broker.tools.acls_backends import ZooKeeperBackend
    return ZooKeeperBackend(connect, args.timeout_ms)


def _now_ms() -> int:
    return int(time.time() * 1000)
