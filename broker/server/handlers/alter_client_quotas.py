"""AlterClientQuotas (key 49), v0-1: see ``client_quotas``."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers import client_quotas
from broker.wire import AlterClientQuotasResponse, ApiKey

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS


async def handle(ctx: BrokerContext, header, request) -> AlterClientQuotasResponse:
    return await client_quotas.alter(ctx, request)


def error_response(header, request, error_code: int) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        AlterClientQuotasResponse.EntryData(error_code=error_code, error_message=None, entity=[
            AlterClientQuotasResponse.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity])
        for entry in request.entries])
