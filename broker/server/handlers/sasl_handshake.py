"""SaslHandshake (key 17) after authentication, or on a listener without SASL: Kafka's KafkaApis
answers ILLEGAL_SASL_STATE (34). Before authentication the SASL gate
(``broker.server.authenticator``) serves it, and a re-authentication too."""

from __future__ import annotations

from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, SaslHandshakeResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.SASL_HANDSHAKE


async def handle(ctx: BrokerContext, header, request) -> SaslHandshakeResponse:
    return error_response(header, request, ErrorCode.ILLEGAL_SASL_STATE)


def error_response(header, request, error_code: int) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=error_code, mechanisms=[])
