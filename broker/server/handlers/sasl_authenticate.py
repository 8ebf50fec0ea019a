"""SaslAuthenticate (key 36) outside a SASL exchange: ILLEGAL_SASL_STATE (34), with Kafka's
message. The SASL gate (``broker.server.authenticator``) serves the real exchange."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, SaslAuthenticateResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.SASL_AUTHENTICATE


async def handle(ctx: BrokerContext, header, request) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime_ms=0)


def error_response(header, request, error_code: int) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=error_code, error_message=None, auth_bytes=b"",
                                    session_lifetime_ms=0)
