"""``InterBrokerConnection``: one asyncio TCP connection from this broker to another, for the
controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica), follower fetches and
controlled shutdown.

One request at a time (send, then read the answer), which is all these callers need: each owns
its connection and waits for the answer before the next request, as Kafka's
``NetworkClientUtils.sendAndReceive`` does for the controller and the replica fetchers. No
ApiVersions exchange: brokers of one cluster speak the versions this code base picks (Kafka's
``inter.broker.protocol.version``). Every read is bounded: the response frame by
``response_bytes_max`` (checked before allocating), the wait by ``timeout_s``. Any failure closes
the connection and raises ``InterBrokerError``; the next ``request`` reconnects.

Security (issue 17): every connection of the process goes to the other brokers' inter-broker
listener (``inter.broker.listener.name``), so its TLS context and SASL credentials are set once
per broker process with ``configure_security`` (before any connection opens): TLS when the
listener is SSL/SASL_SSL, then the SASL exchange (``sasl.mechanism.inter.broker.protocol`` with the
listener's JAAS ``username``/``password``) before the first request. A refused login is an
``InterBrokerError`` like any other failure. When the listener answers a session lifetime
(KIP-368, ``connections.max.reauth.ms``), the connection authenticates again on the same socket
before the request that follows a random 85-95 % of it (``reauthentication_delay_ms``, the rule
pylog's client uses too), as Kafka's own clients do; without that the other
broker would close it at the first request after the lifetime (a replica fetch or controller
request lost, then a reconnect).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from dataclasses import dataclass

from typing import Callable

from broker.security.sasl_client import SaslAuthenticationError, reauthentication_delay_ms
from broker.wire import WireError, decode_response, encode_request, with_size_prefix

__all__ = ["InterBrokerConnection", "InterBrokerError", "RESPONSE_BYTES_MAX", "InterBrokerSecurity",
           "configure_security"]

_SIZE = struct.Struct(">i")
RESPONSE_BYTES_MAX = 128 * 1024 * 1024  # above a fetch response of replica.fetch.response.max.bytes


class InterBrokerError(Exception):
    """The request could not be completed (connect, send, timeout, or a malformed answer)."""


@dataclass(frozen=True)
class InterBrokerSecurity:
    ssl_context: ssl.SSLContext | None = None
    sasl: Callable[[], object] | None = None  # a new broker.security.sasl_client.SaslClient per connection

    def __repr__(self) -> str:
        return f"InterBrokerSecurity(tls={self.ssl_context is not None}, sasl={self.sasl is not None})"


_SECURITY = InterBrokerSecurity()


def configure_security(security: InterBrokerSecurity) -> None:
    """How this process's brokers reach each other (set by ``Broker`` at start)."""
    global _SECURITY
    _SECURITY = security


class InterBrokerConnection:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 response_bytes_max: int = RESPONSE_BYTES_MAX,
                 monotonic_s: Callable[[], float] = time.monotonic) -> None:
        self.host, self.port = host, port
        self._monotonic_s = monotonic_s
        self._reauthenticate_at_s: float | None = None  # KIP-368: the session's renewal time
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._response_bytes_max = response_bytes_max
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def request(self, api_key: int, api_version: int, body, timeout_s: float | None = None):
        """Send ``body`` and return the decoded response; raises ``InterBrokerError``."""
        timeout = self._timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(timeout):
                if self._writer is None:
                    await self._connect()
                elif self._reauthenticate_at_s is not None and self._monotonic_s() >= self._reauthenticate_at_s:
                    await self._authenticate()
                correlation_id, data = await self._round_trip(api_key, api_version, body)
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            await self.close()
            raise InterBrokerError(f"{self.address}: {type(exc).__name__}: {exc}") from None
        except InterBrokerError:
            await self.close()
            raise
        try:
            return self._decode(api_key, api_version, correlation_id, data)
        except InterBrokerError:
            await self.close()
            raise

    async def _connect(self) -> None:
        security = _SECURITY
        context = security.ssl_context
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, ssl=context, server_hostname=self.host if context else None)
        self._reauthenticate_at_s = None
        if security.sasl is not None:
            await self._authenticate()

    async def _authenticate(self) -> None:
        """The SASL exchange on the open connection: first login, or a KIP-368 renewal."""
        async def request(api_key, version, body):
            correlation_id, data = await self._round_trip(api_key, version, body)
            return self._decode(api_key, version, correlation_id, data)

        started_s = self._monotonic_s()
        try:
            lifetime_ms = await _SECURITY.sasl().exchange_async(request)
        except SaslAuthenticationError as exc:
            raise InterBrokerError(f"{self.address}: SASL authentication failed: {exc}") from None
        delay_ms = reauthentication_delay_ms(lifetime_ms)
        self._reauthenticate_at_s = None if delay_ms is None else started_s + delay_ms / 1000

    async def _round_trip(self, api_key: int, api_version: int, body) -> tuple[int, bytes]:
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request(api_key, api_version, correlation_id, self._client_id, body)
        self._writer.write(with_size_prefix(frame))
        await self._writer.drain()
        size = _SIZE.unpack(await self._reader.readexactly(4))[0]
        if not 4 <= size <= self._response_bytes_max:
            raise InterBrokerError(f"{self.address}: response of {size} bytes is outside "
                                   f"4..{self._response_bytes_max}")
        return correlation_id, await self._reader.readexactly(size)

    def _decode(self, api_key: int, api_version: int, correlation_id: int, data: bytes):
        try:
            answered, response = decode_response(api_key, api_version, data)
        except WireError as exc:
            raise InterBrokerError(f"{self.address}: malformed response: {exc}") from None
        if answered != correlation_id:
            raise InterBrokerError(f"{self.address}: correlation id {answered}, expected {correlation_id}")
        return response

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
