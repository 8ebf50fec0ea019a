"""DescribeAcls (key 29), v1-3: the ACLs a filter selects, grouped by resource pattern.
Authorization (DESCRIBE on the cluster) is ``request_auth``'s; without an authorizer the answer is
SECURITY_DISABLED (54), as Kafka's."""

from __future__ import annotations

from broker.auth.acl import InvalidAcl
from broker.server.context import BrokerContext
from broker.server.handlers.acl_common import SECURITY_DISABLED_MESSAGE, filter_from
from broker.wire import ApiKey, DescribeAclsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_ACLS
_Resource = DescribeAclsResponse.DescribeAclsResource
_Acl = _Resource.AclDescription if hasattr(_Resource, "AclDescription") else DescribeAclsResponse.AclDescription


async def handle(ctx: BrokerContext, header, request) -> DescribeAclsResponse:
    if ctx.authorizer is None:
        return error_response(header, request, ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    try:
        acl_filter = filter_from(request)
    except InvalidAcl as exc:
        return error_response(header, request, ErrorCode.INVALID_REQUEST, str(exc))
    by_pattern: dict = {}
    for binding in ctx.authorizer.index.bindings(acl_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    resources = [
        _Resource(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type),
                  acls=[_Acl(principal=e.principal, host=e.host, operation=int(e.operation),
                             permission_type=int(e.permission_type))
                        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission_type))])
        for p, entries in sorted(by_pattern.items(), key=lambda kv: (kv[0].resource_type, kv[0].pattern_type, kv[0].name))
    ]
    return DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                resources=resources)


def error_response(header, request, error_code: int, message: str | None = None) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=error_code, error_message=message, resources=[])
