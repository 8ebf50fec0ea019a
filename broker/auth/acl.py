"""Kafka's ACL model: what an ACL names and how a filter selects ACLs.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an access control entry
(principal, host, operation, ALLOW/DENY). Codes are Kafka's (``org.apache.kafka.common.acl`` and
``resource``), used on the wire by CreateAcls/DescribeAcls/DeleteAcls; names are the ones Kafka
writes in ZooKeeper (``"Topic"``, ``"Read"``, ``"Allow"``) and prints in ``kafka-acls --list``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "ResourceType", "PatternType", "AclOperation", "AclPermissionType", "ResourcePattern",
    "AccessControlEntry", "AclBinding", "AclBindingFilter", "CLUSTER_NAME", "WILDCARD_RESOURCE",
    "WILDCARD_PRINCIPAL", "WILDCARD_HOST", "InvalidAcl", "parse_enum", "display_name",
    "validate_binding",
]

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD_RESOURCE = "*"  # a LITERAL "*" pattern matches every name of its type
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filter only: LITERAL or PREFIXED, name compared as is
    MATCH = 2  # filter only: every pattern that would match the name (literal, wildcard, prefix)
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class InvalidAcl(ValueError):
    """An ACL that cannot be stored (Kafka answers INVALID_REQUEST with this message)."""


def display_name(value: IntEnum) -> str:
    """Kafka's ZooKeeper/JSON spelling: TRANSACTIONAL_ID -> "TransactionalId", READ -> "Read"."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_enum(enum: type[IntEnum], text: str) -> IntEnum:
    """Accept Kafka's spellings: "Read", "READ", "read", "TransactionalId", "transactional-id"."""
    key = text.strip().replace("-", "").replace("_", "").upper()
    for member in enum:
        if member.name.replace("_", "") == key:
            return member
    raise InvalidAcl(f"unknown {enum.__name__} {text!r}")


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def matches_name(self, name: str) -> bool:
        """Does this stored pattern cover the concrete resource ``name``?"""
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD_RESOURCE


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address or "*"
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select. ``None`` for a string means any; ANY for an enum.
    ``pattern_type`` MATCH selects every stored pattern that would apply to ``resource_name``
    (the literal name, the literal wildcard, and prefixes of it), as Kafka does."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if not self._matches_pattern(pattern):
            return False
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def _matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.pattern_type is PatternType.MATCH:
            return self.resource_name is None or pattern.matches_name(self.resource_name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == pattern.name

    def unknown_reason(self) -> str | None:
        """Why the filter can match nothing Kafka would accept (an UNKNOWN enum), else None."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission_type):
            if value.name == "UNKNOWN":
                return f"filter has an unknown {type(value).__name__}"
        return None


_CLUSTER_OPERATIONS = frozenset({
    AclOperation.ALL, AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE,
})
_STORABLE_TYPES = frozenset({ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                             ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                             ResourceType.USER})


def validate_binding(binding: AclBinding) -> None:
    """What CreateAcls refuses (Kafka's ``AclControlManager.validateNewAcl`` and the ZooKeeper
    authorizer's checks): filter-only or unknown values, an empty name, a cluster ACL not on
    ``kafka-cluster``, a principal without a type, a wildcard inside a prefix."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in _STORABLE_TYPES:
        raise InvalidAcl(f"invalid resource type {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"invalid pattern type {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise InvalidAcl(f"invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl(f"invalid permission type {entry.permission_type.name}")
    if not pattern.name:
        raise InvalidAcl("resource name must not be empty")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAcl(f"the cluster resource's name is {CLUSTER_NAME!r}")
    if pattern.resource_type is ResourceType.CLUSTER and entry.operation not in _CLUSTER_OPERATIONS:
        raise InvalidAcl(f"operation {entry.operation.name} does not apply to the cluster")
    if pattern.pattern_type is PatternType.PREFIXED and pattern.name == WILDCARD_RESOURCE:
        raise InvalidAcl("a prefixed pattern cannot be the wildcard '*'")
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAcl(f"principal {entry.principal!r} is not '<type>:<name>'")
    if not entry.host:
        raise InvalidAcl("host must not be empty")
