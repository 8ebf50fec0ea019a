"""SaslHandshake (key 17): the client names its SASL mechanism; the answer lists the enabled
ones. v0 is followed by raw SASL tokens (no Kafka framing); v1 by SaslAuthenticate requests
(KIP-152). Never flexible."""

from broker.wire.api import api
from broker.wire.schema import INT16, STRING, array, field

SASL_HANDSHAKE = api(
    17,
    "SaslHandshake",
    valid="0-1",
    flexible="none",
    request=[field("mechanism", STRING, "0+")],
    response=[
        field("error_code", INT16, "0+"),
        field("mechanisms", array(STRING), "0+"),
    ],
)

SaslHandshakeRequest = SASL_HANDSHAKE.request_class
SaslHandshakeResponse = SASL_HANDSHAKE.response_class
