"""DescribeClientQuotas (key 48), v0-1: see ``client_quotas``."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers import client_quotas
from broker.wire import ApiKey, DescribeClientQuotasResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS


async def handle(ctx: BrokerContext, header, request) -> DescribeClientQuotasResponse:
    return await client_quotas.describe(ctx, request)


def error_response(header, request, error_code: int) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=error_code, error_message=None, entries=None)
