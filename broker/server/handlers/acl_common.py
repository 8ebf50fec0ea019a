"""What the ACL handlers share: codes <-> the model, and the broker's ACL services.

``ctx.authorizer`` is the broker's ``broker.auth.authorizer.Authorizer`` (None: no
``authorizer.class.name``, and the ACL APIs answer SECURITY_DISABLED as Kafka does);
``ctx.acl_store`` the ``broker.auth.zk_store.AclZkStore`` that writes ZooKeeper. After a write the
handler has the broker's ``AclSync`` (``ctx.acl_sync``) re-read the patterns it touched before it
answers (read-your-writes on this broker); other brokers follow the change notification.
"""

from __future__ import annotations

from enum import IntEnum

from broker.auth.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.server.context import BrokerContext

__all__ = ["enum_or_invalid", "filter_from", "binding_from", "refresh_patterns", "SECURITY_DISABLED_MESSAGE"]

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."


def enum_or_invalid(enum: type[IntEnum], code: int) -> IntEnum:
    try:
        return enum(code)
    except ValueError:
        raise InvalidAcl(f"unknown {enum.__name__} code {code}") from None


def filter_from(item) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter."""
    acl_filter = AclBindingFilter(
        resource_type=enum_or_invalid(ResourceType, item.resource_type_filter),
        resource_name=item.resource_name_filter,
        pattern_type=enum_or_invalid(PatternType, item.pattern_type_filter),
        principal=item.principal_filter,
        host=item.host_filter,
        operation=enum_or_invalid(AclOperation, item.operation),
        permission_type=enum_or_invalid(AclPermissionType, item.permission_type),
    )
    reason = acl_filter.unknown_reason()
    if reason:
        raise InvalidAcl(reason)
    return acl_filter


def binding_from(creation) -> AclBinding:
    return AclBinding(
        ResourcePattern(enum_or_invalid(ResourceType, creation.resource_type), creation.resource_name,
                        enum_or_invalid(PatternType, creation.resource_pattern_type)),
        AccessControlEntry(creation.principal, creation.host,
                           enum_or_invalid(AclOperation, creation.operation),
                           enum_or_invalid(AclPermissionType, creation.permission_type)))


async def refresh_patterns(ctx: BrokerContext, patterns) -> None:
    """Have this broker's authorizer follow ZooKeeper for ``patterns`` before answering.

    Through the broker's ``AclSync`` (``ctx.acl_sync``), which applies its reads in order: a read
    made here and published here could land after the sync had applied a newer state of the same
    pattern and keep the older ACLs in force (broker/auth/zk_store.py, ``AclSync``)."""
    await ctx.acl_sync.refresh(patterns)
