"""AlterUserScramCredentials (key 51), v0: see ``user_scram_credentials``."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.server.handlers import user_scram_credentials
from broker.wire import ApiKey, AlterUserScramCredentialsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS


async def handle(ctx: BrokerContext, header, request) -> AlterUserScramCredentialsResponse:
    return await user_scram_credentials.alter(ctx, request)


def error_response(header, request, error_code: int) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
            user=user, error_code=error_code, error_message=None) for user in users])
