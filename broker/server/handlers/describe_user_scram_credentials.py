"""DescribeUserScramCredentials (key 50), v0: see ``user_scram_credentials``."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers import user_scram_credentials
from broker.wire import ApiKey, DescribeUserScramCredentialsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS


async def handle(ctx: BrokerContext, header, request) -> DescribeUserScramCredentialsResponse:
    return await user_scram_credentials.describe(ctx, request)


def error_response(header, request, error_code: int) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=error_code,
                                                error_message=None, results=[])
