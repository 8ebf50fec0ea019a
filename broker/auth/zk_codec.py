"""Where and how Kafka's ZooKeeper authorizer kept ACLs (``kafka.zk.ZkData``). Pure.

- LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED patterns:
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``. ``<ResourceType>`` is Kafka's
  ``SecurityUtils.resourceTypeName``: Topic, Group, Cluster, TransactionalId, DelegationToken, User.
- Each znode holds one pattern's ACLs as JSON, versioned with the znode version for
  compare-and-set updates: ``{"version":1,"acls":[{"principal":"User:alice",
  "permissionType":"Allow","operation":"Read","host":"*"}]}``.
- Every change writes a PERSISTENT_SEQUENTIAL notification naming the pattern, which every broker
  watches: ``/kafka-acl-changes/acl_changes_N`` holds ``"TOPIC:foo"`` (literal);
  ``/kafka-acl-extended-changes/acl_changes_N`` holds ``{"version":1,"resourceType":"TOPIC",
  "name":"foo","patternType":"PREFIXED"}``.
"""

from __future__ import annotations

import json

from broker.auth.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    display_name,
    parse_enum,
)

__all__ = ["ACL_ROOTS", "CHANGE_PATHS", "CHANGE_PREFIX", "LITERAL_ROOT", "EXTENDED_PREFIXED_ROOT",
           "LITERAL_CHANGES", "EXTENDED_CHANGES", "pattern_path", "encode_acls", "decode_acls",
           "encode_change", "decode_change", "change_path", "type_from_path"]

LITERAL_ROOT = "/kafka-acl"
EXTENDED_PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
ACL_ROOTS = {PatternType.LITERAL: LITERAL_ROOT, PatternType.PREFIXED: EXTENDED_PREFIXED_ROOT}
CHANGE_PATHS = {PatternType.LITERAL: LITERAL_CHANGES, PatternType.PREFIXED: EXTENDED_CHANGES}


def pattern_path(pattern: ResourcePattern) -> str:
    return f"{ACL_ROOTS[pattern.pattern_type]}/{display_name(pattern.resource_type)}/{pattern.name}"


def change_path(pattern: ResourcePattern) -> str:
    return f"{CHANGE_PATHS[pattern.pattern_type]}/{CHANGE_PREFIX}"


def type_from_path(segment: str) -> ResourceType:
    return parse_enum(ResourceType, segment)


def encode_acls(entries) -> bytes:
    acls = [{"principal": e.principal, "permissionType": display_name(e.permission_type),
             "operation": display_name(e.operation), "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """An empty or missing znode holds no ACLs. Raises ValueError on anything malformed."""
    if not data:
        return frozenset()
    document = json.loads(data)
    if not isinstance(document, dict) or not isinstance(document.get("acls", []), list):
        raise ValueError("ACL znode is not {'version': 1, 'acls': [...]}")
    return frozenset(
        AccessControlEntry(str(acl["principal"]), str(acl["host"]),
                           parse_enum(AclOperation, acl["operation"]),
                           parse_enum(AclPermissionType, acl["permissionType"]))
        for acl in document.get("acls", []))


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    text = data.decode()
    if root == LITERAL_CHANGES:
        kind, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected '<ResourceType>:<name>', got {text!r}")
        return ResourcePattern(parse_enum(ResourceType, kind), name, PatternType.LITERAL)
    event = json.loads(text)
    return ResourcePattern(parse_enum(ResourceType, event["resourceType"]), event["name"],
                           parse_enum(PatternType, event["patternType"]))
