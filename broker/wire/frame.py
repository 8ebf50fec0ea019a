"""Request and response headers, and the entry points the server and the client call.

A *frame* here is what follows the 4-byte size prefix on the socket: header then body. The
caller (server/client) reads the size, checks it against its own limit, and hands us exactly
that many bytes. Decoding keeps zero-copy views into the frame (records fields), so the caller
must not reuse or mutate the frame's buffer while a decoded message is alive.

Headers (docs/protocol.html; RequestHeader.json, ResponseHeader.json):
  request  v1  api_key i16, api_version i16, correlation_id i32, client_id NULLABLE_STRING
  request  v2  v1 + tagged fields; client_id keeps its int16 length (RequestHeader.json sets
               ``"flexibleVersions": "none"`` on ClientId)
  response v0  correlation_id i32
  response v1  v0 + tagged fields
Flexible api versions use request v2 / response v1, except that ApiVersions responses always
use response header v0 so a client can read the error before it knows our versions (KIP-511).
Request header v0 (no client_id) is only used by ControlledShutdown v0, which we do not serve.

Trailing bytes after a body: Kafka's generated readers ignore them. We reject them by default
(``strict=True``): every client we target encodes bodies exactly, and leftover bytes almost
always mean we parsed the wrong layout (e.g. a client sending a version it was not offered,
reference pitfall 8.4), which is better refused than silently misread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.wire import primitives as prim
from broker.wire.apis import API_SPECS, ApiKey
from broker.wire.codec import struct_decoder, struct_encoder
from broker.wire.errors import (
    EncodeError,
    ErrorCode,
    MalformedMessage,
    MalformedRequest,
    MalformedResponse,
    UnknownApiKey,
    UnsupportedVersion,
)

__all__ = [
    "RequestHeader",
    "request_header_version",
    "response_header_version",
    "decode_request_header",
    "encode_request_header",
    "decode_request",
    "encode_request",
    "encode_request_chunks",
    "encode_response",
    "encode_response_chunks",
    "decode_response",
    "response_correlation_id",
    "with_size_prefix",
]

_HEADER_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_SIZE_AND_CORRELATION = struct.Struct(">ii")  # a response's size prefix and correlation id
_REQUEST_ENCODERS: dict[tuple[int, int], object] = {}  # (api_key, api_version) -> body encoder
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1
    unknown_tags: dict | None = None


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for a flexible api version, else 1. For an unknown api key we assume 1; for a version
    above a spec's range the open-ended flexible range ("3+") decides, as in Kafka, so an
    ApiVersions v5 request still parses and gets its UNSUPPORTED_VERSION answer."""
    spec = API_SPECS.get(api_key)
    return 2 if spec is not None and spec.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0  # KIP-511: always v0, even for the flexible v3+ bodies
    spec = API_SPECS.get(api_key)
    return 1 if spec is not None and spec.is_flexible(api_version) else 0


def _view(frame) -> memoryview:
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


# (api_key, api_version) -> (request header version, body decoder or None: not in the spec),
# for the keys and versions of the spec only (a client may send any 32 bits here): a broker
# looks each request's up once instead of the spec, its version ranges and the codec cache.
_REQUEST_PLANS: dict[tuple[int, int], tuple] = {}
# (api_key, api_version) -> (response header bytes after the correlation id, body encoder)
_RESPONSE_PLANS: dict[tuple[int, int], tuple] = {}


def _request_plan(api_key: int, api_version: int) -> tuple:
    plan = _REQUEST_PLANS.get((api_key, api_version))
    if plan is None:
        spec = API_SPECS.get(api_key)
        decode = None
        if spec is not None and api_version in spec.valid:
            decode = struct_decoder(spec.request, api_version, spec.is_flexible(api_version))
        plan = (request_header_version(api_key, api_version), decode)
        if decode is not None:
            _REQUEST_PLANS[(api_key, api_version)] = plan
    return plan


def decode_request_header(frame) -> tuple[RequestHeader, int]:
    """Parse the request header; return it and the offset where the body starts. Works for any
    api key and version, so the server can always answer with the correlation id."""
    buf = _view(frame)
    if len(buf) < _HEADER_PREFIX.size:
        raise MalformedRequest("RequestHeader", f"{_HEADER_PREFIX.size} bytes", f"{len(buf)} bytes", 0)
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(buf, 0)
    header_version = _request_plan(api_key, api_version)[0]
    try:
        client_id, pos = prim.read_string(buf, _HEADER_PREFIX.size, "RequestHeader.client_id", True)
        tags = None
        if header_version >= 2:
            tags, pos = prim.skip_tagged_fields(buf, pos, "RequestHeader.<tagged fields>")
    except MalformedMessage as exc:
        raise MalformedRequest(exc.field, exc.expected, exc.found, exc.offset) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, header_version, tags), pos


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    try:
        prefix = _HEADER_PREFIX.pack(api_key, api_version, correlation_id)
    except struct.error as exc:
        raise EncodeError("RequestHeader", str(exc)) from None
    client = prim.encode_string(client_id, "RequestHeader.client_id", True, False)
    tags = b"\x00" if request_header_version(api_key, api_version) >= 2 else b""
    return prefix + client + tags


def decode_request(frame, *, strict: bool = True) -> tuple[RequestHeader, object]:
    """Header and typed request body. Raises UnknownApiKey / UnsupportedVersion (both carry the
    parsed header) for keys and versions outside the spec, MalformedRequest for bad bytes."""
    buf = _view(frame)
    header, pos = decode_request_header(buf)
    decode = _request_plan(header.api_key, header.api_version)[1]
    if decode is None:
        spec = API_SPECS.get(header.api_key)
        if spec is None:
            raise UnknownApiKey(header)
        raise UnsupportedVersion(header, (spec.valid.low, spec.valid.high))
    try:
        request, end = decode(buf, pos)
    except MalformedMessage as exc:
        raise MalformedRequest(exc.field, exc.expected, exc.found, exc.offset, header) from None
    if strict and end != len(buf):
        expected, found = f"{end - pos} body bytes", f"{len(buf) - pos} (trailing bytes)"
        raise MalformedRequest(API_SPECS[header.api_key].request.name, expected, found, end, header)
    return header, request


def _encode_body(api_key: int, api_version: int, body, kind: str) -> list:
    spec = API_SPECS.get(api_key)
    if spec is None:
        raise EncodeError(f"api key {api_key}", "no spec for this api key")
    if api_version not in spec.valid:
        raise EncodeError(spec.name, f"version {api_version} is outside {spec.valid}")
    stype = spec.request if kind == "request" else spec.response
    chunks: list = []
    struct_encoder(stype, api_version, spec.is_flexible(api_version))(body, chunks)
    return chunks


def encode_request_chunks(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, request
) -> list:
    """Header + body as a list of buffers, without the size prefix: record sets are the caller's
    own buffers (zero-copy), so a client can send a 1 MiB Produce with ``sendmsg`` and never copy
    it. ``request`` is the API's request object or a dict of its fields."""
    encode = _REQUEST_ENCODERS.get((api_key, api_version))
    if encode is None:
        chunks = _encode_body(api_key, api_version, request, "request")  # raises outside the spec
        spec = API_SPECS[api_key]
        _REQUEST_ENCODERS[(api_key, api_version)] = struct_encoder(
            spec.request, api_version, spec.is_flexible(api_version))
    else:
        chunks = []
        encode(request, chunks)
    chunks.insert(0, encode_request_header(api_key, api_version, correlation_id, client_id))
    return chunks


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, request
) -> bytes:
    """Header + body in one ``bytes``, without the size prefix (see ``with_size_prefix``): one
    copy of the body (``encode_request_chunks`` for none)."""
    return b"".join(encode_request_chunks(api_key, api_version, correlation_id, client_id, request))


def _response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    try:
        header = _SIZE.pack(correlation_id)
    except struct.error as exc:
        raise EncodeError("ResponseHeader.correlation_id", str(exc)) from None
    return header + b"\x00" if response_header_version(api_key, api_version) >= 1 else header


def encode_response_chunks(api_key: int, api_version: int, correlation_id: int, response) -> list:
    """The whole response *with* its 4-byte size prefix, as a list of bytes-like chunks for
    ``transport.writelines``: records are the caller's own buffers, never copied here."""
    plan = _RESPONSE_PLANS.get((api_key, api_version))
    if plan is None:
        chunks = _encode_body(api_key, api_version, response, "response")  # raises outside the spec
        spec = API_SPECS[api_key]
        plan = _RESPONSE_PLANS[(api_key, api_version)] = (
            b"\x00" if response_header_version(api_key, api_version) >= 1 else b"",
            struct_encoder(spec.response, api_version, spec.is_flexible(api_version)))
    else:
        chunks = []
        plan[1](response, chunks)
    tags = plan[0]
    size = 4 + len(tags) + sum(map(len, chunks))  # every chunk is bytes-like with 1-byte items
    try:
        prefix = _SIZE_AND_CORRELATION.pack(size, correlation_id)
    except struct.error as exc:
        raise EncodeError("ResponseHeader.correlation_id", str(exc)) from None
    return [prefix + tags, *chunks]


def encode_response(api_key: int, api_version: int, correlation_id: int, response) -> bytes:
    """Header + body, without the size prefix (see ``with_size_prefix``). For an ApiVersions
    request of a version we do not support, the server encodes an ApiVersionsResponse with
    error UNSUPPORTED_VERSION at version 0 (KIP-511)."""
    chunks = _encode_body(api_key, api_version, response, "response")
    return b"".join([_response_header(api_key, api_version, correlation_id), *chunks])


def with_size_prefix(payload: bytes) -> bytes:
    """The 4-byte big-endian size prefix that frames every request and response on the socket."""
    return _SIZE.pack(len(payload)) + payload


def response_correlation_id(frame) -> int:
    """The correlation id of a response frame, to find its request before decoding the body."""
    buf = _view(frame)
    if len(buf) < 4:
        raise MalformedResponse("ResponseHeader.correlation_id", "4 bytes", f"{len(buf)} bytes", 0)
    return _SIZE.unpack_from(buf, 0)[0]


def decode_response(api_key: int, api_version: int, frame, *, strict: bool = True) -> tuple[int, object]:
    """(correlation_id, typed response body) for a response to our request ``api_key`` at
    ``api_version``. An ApiVersions error response is read as v0 whatever we asked (KIP-511)."""
    buf = _view(frame)
    spec = API_SPECS.get(api_key)
    if spec is None or api_version not in spec.valid:
        raise ValueError(f"api key {api_key} v{api_version} is not a request this codec can send")
    correlation_id = response_correlation_id(buf)
    pos = 4
    try:
        if response_header_version(api_key, api_version) >= 1:
            _, pos = prim.skip_tagged_fields(buf, pos, "ResponseHeader.<tagged fields>")
        if api_key == ApiKey.API_VERSIONS:
            return correlation_id, _decode_api_versions_response(spec, api_version, buf, pos, strict)
        return correlation_id, _decode_body(spec, api_version, buf, pos, strict)
    except MalformedMessage as exc:
        raise MalformedResponse(exc.field, exc.expected, exc.found, exc.offset) from None


def _decode_body(spec, api_version: int, buf: memoryview, pos: int, strict: bool):
    decode = struct_decoder(spec.response, api_version, spec.is_flexible(api_version))
    body, end = decode(buf, pos)
    if strict and end != len(buf):
        expected, found = f"{end - pos} body bytes", f"{len(buf) - pos} (trailing bytes)"
        raise MalformedMessage(spec.response.name, expected, found, end)
    return body


def _decode_api_versions_response(spec, api_version: int, buf: memoryview, pos: int, strict: bool):
    """A broker that does not support our ApiVersions version answers with a v0 body and
    UNSUPPORTED_VERSION; like Kafka's ApiVersionsResponse.parse, fall back to v0 when the
    error says so or the body does not parse at the version we sent."""
    if len(buf) - pos >= 2 and prim.INT16.unpack_from(buf, pos)[0] == ErrorCode.UNSUPPORTED_VERSION:
        return _decode_body(spec, 0, buf, pos, strict)
    try:
        return _decode_body(spec, api_version, buf, pos, strict)
    except MalformedMessage:
        if api_version == 0:
            raise
        return _decode_body(spec, 0, buf, pos, strict)
