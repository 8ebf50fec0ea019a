"""The authorization decision, Kafka's rules, over an immutable index of the ACLs.

Rules (Kafka's ``AclAuthorizer.authorizeAction``, kept by KRaft's ``StandardAuthorizer``):
1. A principal in ``super.users`` may do everything.
2. The ACLs that apply to a resource are those on its literal name, on the literal wildcard
   ``*`` of its type, and on every PREFIXED pattern its name starts with.
3. If none apply (to anyone), ``allow.everyone.if.no.acl.found`` decides (false by default).
4. A DENY for the principal (or ``User:*``) from the host (or ``*``) on the operation (or ALL)
   wins over any ALLOW.
5. An ALLOW of the operation, of ALL, or of an operation that implies it grants it: READ, WRITE,
   DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. (A DENY implies
   nothing: denying DESCRIBE does not deny READ.)

Cost per request: a broker asks the same few questions on every Produce (this principal, this
host, WRITE on this topic), so answers are memoized per (principal, host, operation, type, name)
in a dict of at most ``memo_entries_max`` entries, emptied whenever the ACLs change (and when it
is full). A miss costs one dict lookup per literal name, one for the wildcard, and one per
distinct prefix length stored for the type.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from broker.auth.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
)

__all__ = ["AclIndex", "Authorizer", "MEMO_ENTRIES_MAX"]

MEMO_ENTRIES_MAX = 10_000

_ALLOWED_BY = {  # operation asked -> ALLOW operations that grant it (besides ALL)
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}
_DENY, _ALLOW = AclPermissionType.DENY, AclPermissionType.ALLOW
_ALL = AclOperation.ALL


class AclIndex:
    """Every stored ACL, grouped by pattern; immutable once built (a change builds a new one)."""

    __slots__ = ("_by_pattern", "_literal", "_prefixed", "_prefix_lengths", "_types")

    def __init__(self, by_pattern: Mapping[ResourcePattern, Iterable[AccessControlEntry]] = ()) -> None:
        self._by_pattern: dict[ResourcePattern, frozenset[AccessControlEntry]] = {
            pattern: frozenset(entries) for pattern, entries in dict(by_pattern).items() if entries}
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        lengths: dict[ResourceType, set[int]] = defaultdict(set)
        for pattern, entries in self._by_pattern.items():
            key = (pattern.resource_type, pattern.name)
            if pattern.pattern_type is PatternType.PREFIXED:
                self._prefixed[key] = entries
                lengths[pattern.resource_type].add(len(pattern.name))
            else:
                self._literal[key] = entries
        self._prefix_lengths = {rtype: tuple(sorted(ls)) for rtype, ls in lengths.items()}
        self._types = frozenset(p.resource_type for p in self._by_pattern)

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_pattern.values())

    def patterns(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self._by_pattern

    def with_pattern(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> "AclIndex":
        """A new index where ``pattern`` holds exactly ``entries`` (none: the pattern goes)."""
        by_pattern = dict(self._by_pattern)
        by_pattern[pattern] = frozenset(entries)
        return AclIndex(by_pattern)

    def bindings(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        out = [AclBinding(pattern, entry) for pattern, entries in self._by_pattern.items() for entry in entries]
        return out if acl_filter is None else [b for b in out if acl_filter.matches(b)]

    def applicable(self, resource_type: ResourceType, name: str) -> list[frozenset[AccessControlEntry]]:
        """The entry sets of every pattern that applies to the concrete resource (rule 2)."""
        found = []
        literal = self._literal
        for key in ((resource_type, name), (resource_type, WILDCARD_RESOURCE)):
            entries = literal.get(key)
            if entries:
                found.append(entries)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries = self._prefixed.get((resource_type, name[:length]))
            if entries:
                found.append(entries)
        return found

    def has_type(self, resource_type: ResourceType) -> bool:
        return resource_type in self._types


class Authorizer:
    """Kafka's decision over an ``AclIndex`` (module doc). ``update`` swaps the index."""

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 memo_entries_max: int = MEMO_ENTRIES_MAX) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._memo_entries_max = memo_entries_max
        self._memo: dict[tuple, bool] = {}
        self.index = AclIndex()

    def update(self, index: AclIndex) -> None:
        self.index = index
        self._memo = {}

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, operation, resource_type, name)
        memo = self._memo
        answer = memo.get(key)
        if answer is None:
            answer = self._decide(principal, host, operation, resource_type, name)
            if len(memo) >= self._memo_entries_max:
                memo.clear()
            memo[key] = answer
        return answer

    def _decide(self, principal, host, operation, resource_type, name) -> bool:
        if principal in self.super_users:
            return True
        entry_sets = self.index.applicable(resource_type, name)
        if not entry_sets:
            return self.allow_everyone_if_no_acl_found
        granting = _ALLOWED_BY.get(operation, (operation,))
        allowed = False
        for entries in entry_sets:
            for entry in entries:
                if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                    continue
                if entry.host != host and entry.host != WILDCARD_HOST:
                    continue
                if entry.permission_type is _DENY:
                    if entry.operation is operation or entry.operation is _ALL:
                        return False  # rule 4: deny wins, look no further
                elif entry.operation is _ALL or entry.operation in granting:
                    allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Is there any resource of this type the principal may ``operation``? (KIP-679: an
        idempotent producer may InitProducerId with WRITE on some topic instead of
        IDEMPOTENT_WRITE on the cluster.) An ALLOW counts unless a DENY covers its whole pattern:
        a DENY on the literal wildcard, or a DENY prefix of the allowed name."""
        if principal in self.super_users:
            return True
        if not self.index.has_type(resource_type):
            return self.allow_everyone_if_no_acl_found
        granting = _ALLOWED_BY.get(operation, (operation,))
        allows, denies = [], []
        for pattern, entries in self.index.patterns().items():
            if pattern.resource_type is not resource_type:
                continue
            for entry in entries:
                if entry.principal not in (principal, WILDCARD_PRINCIPAL) or entry.host not in (host, WILDCARD_HOST):
                    continue
                if entry.permission_type is _DENY and entry.operation in (operation, _ALL):
                    denies.append(pattern)
                elif entry.permission_type is _ALLOW and (entry.operation is _ALL or entry.operation in granting):
                    allows.append(pattern)
        if any(d.pattern_type is PatternType.LITERAL and d.name == WILDCARD_RESOURCE for d in denies):
            return False
        for allow in allows:
            covered = any(
                (d.pattern_type is PatternType.PREFIXED and allow.name.startswith(d.name))
                or (d.pattern_type is PatternType.LITERAL and allow.pattern_type is PatternType.LITERAL
                    and d.name == allow.name)
                for d in denies)
            if not covered:
                return True
        return False
