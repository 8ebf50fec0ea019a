"""pylog's Kafka wire codec: sans-IO, bytes in, typed messages out (DESIGN.md ``broker/wire``).

No sockets, no event loop, no files, no other pylog package. One declarative spec per API
(``apis/``) covers all its versions; ``codec`` compiles a spec per version once and caches it.

Server side::

    header, request = decode_request(frame)        # frame = bytes after the 4-byte size
    ...
    transport.writelines(encode_response_chunks(header.api_key, header.api_version,
                                                header.correlation_id, response))

Client side: ``encode_request`` + ``with_size_prefix``, then ``response_correlation_id`` and
``decode_response``.
"""

from broker.wire.apis import API_SPECS, SUPPORTED_API_VERSIONS, ApiKey
from broker.wire.apis import *  # noqa: F401,F403  (the generated request/response classes)
from broker.wire.apis import __all__ as _apis_all
from broker.wire.errors import (
    EncodeError,
    ErrorCode,
    MalformedMessage,
    MalformedRequest,
    MalformedResponse,
    UnknownApiKey,
    UnsupportedVersion,
    WireError,
)
from broker.wire.frame import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_request_chunks,
    encode_request_header,
    encode_response,
    encode_response_chunks,
    request_header_version,
    response_correlation_id,
    response_header_version,
    with_size_prefix,
)
from broker.wire.message import Message

__all__ = [
    *_apis_all,
    "Message",
    "ErrorCode", "WireError", "MalformedMessage", "MalformedRequest", "MalformedResponse",
    "UnsupportedVersion", "UnknownApiKey", "EncodeError",
    "RequestHeader", "request_header_version", "response_header_version",
    "decode_request_header", "encode_request_header",
    "decode_request", "encode_request", "encode_request_chunks",
    "encode_response", "encode_response_chunks", "decode_response",
    "response_correlation_id", "with_size_prefix",
]
