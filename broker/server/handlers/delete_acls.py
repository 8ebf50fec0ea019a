"""DeleteAcls (key 31), v1-3: per filter, delete the stored ACLs it matches and answer them.
ALTER on the cluster is checked by ``request_auth``."""

from __future__ import annotations

import asyncio
import logging

from broker.auth.acl import InvalidAcl
from broker.server.context import BrokerContext
from broker.server.handlers.acl_common import SECURITY_DISABLED_MESSAGE, filter_from, refresh_patterns
from broker.wire import ApiKey, DeleteAclsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DELETE_ACLS
_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _FilterResult.DeleteAclsMatchingAcl if hasattr(_FilterResult, "DeleteAclsMatchingAcl") \
    else DeleteAclsResponse.DeleteAclsMatchingAcl
log = logging.getLogger(__name__)


async def handle(ctx: BrokerContext, header, request) -> DeleteAclsResponse:
    if ctx.authorizer is None or ctx.acl_store is None:
        return error_response(header, request, ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    results, touched = [], set()
    for item in request.filters:
        try:
            acl_filter = filter_from(item)
            removed = await asyncio.to_thread(ctx.acl_store.remove, acl_filter)
        except InvalidAcl as exc:
            results.append(_FilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), matching_acls=[]))
            continue
        except Exception as exc:  # ZooKeeper trouble
            log.warning("DeleteAcls failed: %s", exc)
            results.append(_FilterResult(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(exc),
                                         matching_acls=[]))
            continue
        touched.update(b.pattern for b in removed)
        results.append(_FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            _Matching(error_code=ErrorCode.NONE, error_message=None, resource_type=int(b.pattern.resource_type),
                      resource_name=b.pattern.name, pattern_type=int(b.pattern.pattern_type),
                      principal=b.entry.principal, host=b.entry.host, operation=int(b.entry.operation),
                      permission_type=int(b.entry.permission_type))
            for b in removed]))
    if touched:
        await refresh_patterns(ctx, touched)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def error_response(header, request, error_code: int, message: str | None = None) -> DeleteAclsResponse:
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        _FilterResult(error_code=error_code, error_message=message, matching_acls=[]) for _ in request.filters])
