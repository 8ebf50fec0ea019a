"""CreateAcls (key 30), v1-3: store ACLs in ZooKeeper, one result per creation, in order. A
creation Kafka would refuse (``broker.auth.acl.validate_binding``) gets INVALID_REQUEST with the
reason and is not stored; the others are. ALTER on the cluster is checked by ``request_auth``."""

from __future__ import annotations

import asyncio
import logging

from broker.auth.acl import InvalidAcl, validate_binding
from broker.server.context import BrokerContext
from broker.server.handlers.acl_common import SECURITY_DISABLED_MESSAGE, binding_from, refresh_patterns
from broker.wire import ApiKey, CreateAclsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.CREATE_ACLS
_Result = CreateAclsResponse.AclCreationResult
log = logging.getLogger(__name__)


async def handle(ctx: BrokerContext, header, request) -> CreateAclsResponse:
    if ctx.authorizer is None or ctx.acl_store is None:
        return error_response(header, request, ErrorCode.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE)
    results, valid = [], []
    for creation in request.creations:
        try:
            binding = binding_from(creation)
            validate_binding(binding)
        except InvalidAcl as exc:
            results.append(_Result(error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc)))
            continue
        valid.append(binding)
        results.append(_Result(error_code=ErrorCode.NONE, error_message=None))
    if valid:
        try:
            await asyncio.to_thread(ctx.acl_store.add, valid)
            await refresh_patterns(ctx, {b.pattern for b in valid})
        except Exception as exc:  # ZooKeeper trouble: every valid creation failed
            log.warning("CreateAcls failed: %s", exc)
            for result in results:
                if result.error_code == ErrorCode.NONE:
                    result.error_code, result.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def error_response(header, request, error_code: int, message: str | None = None) -> CreateAclsResponse:
    return CreateAclsResponse(throttle_time_ms=0, results=[
        _Result(error_code=error_code, error_message=message) for _ in request.creations])
