"""SaslAuthenticate (key 36): one SASL token each way (KIP-152). v1 adds the session lifetime
(KIP-368 re-authentication), v2 is flexible."""

from broker.wire.api import api
from broker.wire.schema import BYTES, INT16, INT64, STRING, field

SASL_AUTHENTICATE = api(
    36,
    "SaslAuthenticate",
    valid="0-2",
    flexible="2+",
    request=[field("auth_bytes", BYTES, "0+")],
    response=[
        field("error_code", INT16, "0+"),
        field("error_message", STRING, "0+", nullable="0+", default=None),
        field("auth_bytes", BYTES, "0+"),
        field("session_lifetime_ms", INT64, "1+"),
    ],
)

SaslAuthenticateRequest = SASL_AUTHENTICATE.request_class
SaslAuthenticateResponse = SASL_AUTHENTICATE.response_class
