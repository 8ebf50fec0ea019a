"""Decode a request frame, route it to its handler, encode the answer (or decide not to answer).

What happens to requests the broker does not serve (reference 1.3, pitfalls 8.3 and 8.4):

| request                                            | answer                                     |
|----------------------------------------------------|--------------------------------------------|
| ApiVersions of any version we do not serve         | v0 body, UNSUPPORTED_VERSION (35), our range for key 18 (KIP-511) |
| a version the codec parses but we do not serve      | the API's error response at that version, UNSUPPORTED_VERSION in every slot (e.g. Produce v0-2, Fetch v0-3) |
| (same, for an acks=0 Produce)                       | close the connection: such a client expects no answer |
| a version the codec cannot parse (e.g. Fetch v13)   | close the connection                        |
| an unknown api key                                  | close the connection (Kafka does the same)  |
| a key the codec parses but no handler serves       | close the connection, as for an unknown key (JoinGroup etc. until their handlers exist) |
| bytes that do not parse (MalformedRequest)          | close the connection, logged                |

Closing is signalled with ``network.CloseConnection``; the responses to earlier requests on the
connection are still sent first.

Trailing bytes after a request body are ignored, as Kafka's generated readers ignore them
(``decode_request(strict=False)``). This is not optional: librdkafka 2.16 asks for "all topics"
with Metadata v9+ by leaving its 4-byte array-count placeholder as zeros, i.e. a compact null
array followed by three stray bytes (``rd_kafka_MetadataRequest0``), and relies on the broker
reading the rest as ``allow_auto_topic_creation=false``, ``include_topic_authorized_operations=
false``, no tags, and skipping the remainder.
"""

from __future__ import annotations

import logging
from asyncio import Future
from time import perf_counter

from broker.server.context import BrokerContext
from broker.server.handlers import HANDLERS
from broker.server.handlers.api_versions import unsupported_version_response
from broker.server.network import CloseConnection
from broker.server.quota_gate import gate_for
from broker.server.request_auth import authorize_and_handle
from broker.wire import (
    ApiKey,
    ErrorCode,
    MalformedRequest,
    SUPPORTED_API_VERSIONS,
    UnknownApiKey,
    UnsupportedVersion,
    decode_request,
    encode_response_chunks,
)

__all__ = ["Dispatcher", "SERVED_API_VERSIONS"]

logger = logging.getLogger(__name__)

# What is advertised (SUPPORTED_API_VERSIONS) minus Produce v0-2: advertised so librdkafka keeps
# compression on (pitfall 8.1), answered UNSUPPORTED_VERSION since they carry MessageSet v0/v1.
SERVED_API_VERSIONS = {**SUPPORTED_API_VERSIONS, ApiKey.PRODUCE: (3, SUPPORTED_API_VERSIONS[ApiKey.PRODUCE][1])}


class Dispatcher:
    """The network layer's request handler: ``handle(frame) -> chunks | None``."""

    def __init__(self, ctx: BrokerContext, observe=None) -> None:
        """``observe(header, request, response, seconds)``: told of every request a handler
        answered (``broker.metrics.requests.RequestMetrics.observe``); None: no metrics."""
        self._ctx = ctx
        self._observe = observe

    def start(self, frame: bytes):
        """``handle`` started inline by the network layer (``network._Connection._start_inline``):
        a served request with no quota gate and no authorizer whose handler answers with a
        future (OffsetCommit's coordinator future) gives ``(future, finish)``, no coroutine or
        task per request; anything else gives a coroutine that is ``handle``'s answer."""
        try:
            header, request = decode_request(frame, strict=False)
        except (UnknownApiKey, UnsupportedVersion, MalformedRequest):
            return self.handle(frame)  # answered (or closed) by the general path
        module = HANDLERS.get(header.api_key)
        served = SERVED_API_VERSIONS.get(header.api_key)
        if (module is None or served is None or not served[0] <= header.api_version <= served[1]
                or self._ctx.authorizer is not None
                or gate_for(self._ctx.quotas, header, request) is not None):
            return self._handle_decoded(header, request, len(frame))
        started = perf_counter()
        answer = module.handle(self._ctx, header, request)
        if not isinstance(answer, Future):
            return self._finish_awaited(header, request, answer, started)
        return answer, lambda response: self._finish(header, request, response, started)

    async def _finish_awaited(self, header, request, answer, started: float) -> list | None:
        return self._finish(header, request, await answer, started)

    def _finish(self, header, request, response, started: float) -> list | None:
        if self._observe is not None:
            self._observe(header, request, response, perf_counter() - started)
        if response is None:
            return None
        return encode_response_chunks(header.api_key, header.api_version, header.correlation_id,
                                      response)

    async def handle(self, frame: bytes) -> list | None:
        try:
            header, request = decode_request(frame, strict=False)
        except UnknownApiKey as exc:
            raise CloseConnection(f"unknown api key {exc.header.api_key}") from None
        except UnsupportedVersion as exc:
            return _unparseable_version(exc)
        except MalformedRequest as exc:
            where = (f"api key {exc.header.api_key} v{exc.header.api_version} "
                     f"correlation id {exc.header.correlation_id}") if exc.header else "header"
            logger.warning("malformed request (%s): %s", where, exc)
            raise CloseConnection(f"malformed request: {exc}") from None
        return await self._handle_decoded(header, request, len(frame))

    async def _handle_decoded(self, header, request, frame_bytes: int) -> list | None:
        module = HANDLERS.get(header.api_key)
        if module is None or header.api_key not in SERVED_API_VERSIONS:
            # Parsed but not served: what a client sees must not depend on whether our codec
            # happens to know the key, so this is the unknown-key answer.
            raise CloseConnection(f"api key {header.api_key} is not served")
        low, high = SERVED_API_VERSIONS[header.api_key]
        if low <= header.api_version <= high:
            gate = gate_for(self._ctx.quotas, header, request)  # client quotas (quota_gate.py)
            if gate is not None:
                return await gate.serve(self._ctx.now_ms, header, request, frame_bytes,
                                        lambda: self._answer(module, header, request))
            response = await self._answer(module, header, request)
        else:
            response = _unserved_version(module, header, request)
        if response is None:
            return None
        return encode_response_chunks(header.api_key, header.api_version, header.correlation_id,
                                      response)

    async def _answer(self, module, header, request):
        started = perf_counter()
        if self._ctx.authorizer is None:
            response = await module.handle(self._ctx, header, request)
        else:  # Kafka's per-API authorization (broker/server/request_auth.py)
            response = await authorize_and_handle(self._ctx, module, header, request)
        if self._observe is not None:
            self._observe(header, request, response, perf_counter() - started)
        return response


def _unparseable_version(exc: UnsupportedVersion) -> list:
    header = exc.header
    if header.api_key == ApiKey.API_VERSIONS:
        return encode_response_chunks(ApiKey.API_VERSIONS, 0, header.correlation_id,
                                      unsupported_version_response())
    raise CloseConnection(f"api key {header.api_key} v{header.api_version} cannot be parsed")


def _unserved_version(module, header, request):
    if header.api_key == ApiKey.PRODUCE and request.acks == 0:
        raise CloseConnection(f"acks=0 Produce v{header.api_version} is not served")
    logger.debug("answering api key %d v%d with UNSUPPORTED_VERSION", header.api_key, header.api_version)
    return module.error_response(header, request, ErrorCode.UNSUPPORTED_VERSION)
