"""The SASL gate in front of a SASL listener's dispatcher: Kafka's ``SaslServerAuthenticator``.

Per connection (``network.connection_state()``), the phases are Kafka's:

| phase | accepted | anything else |
|---|---|---|
| handshake | ApiVersions, SaslHandshake v0/v1 | connection closed (Kafka: IllegalSaslStateException) |
| authenticate (after v1) | SaslAuthenticate | connection closed |
| authenticate (after v0) | raw SASL tokens, answered raw (no Kafka header) | - |
| complete | every request (to the dispatcher) | - |

A SaslHandshake naming a mechanism this listener does not enable is answered
UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, then the connection closes; a failed
authentication (wrong password, unknown user, malformed token) is answered
SASL_AUTHENTICATION_FAILED (58) with Kafka's message, then the connection closes. Messages never
contain a password or a token, nor do the log lines.

Re-authentication (KIP-368, ``connections.max.reauth.ms`` > 0): SaslAuthenticate v1+ answers the
session lifetime; before it ends the client sends SaslHandshake and SaslAuthenticate again on the
same connection (without a lifetime, a later SaslHandshake reaches its handler: ILLEGAL_SASL_STATE,
as from Kafka). The mechanism and the principal must stay the same. A request other than a
re-authentication that arrives after the session expired closes the connection, as Kafka does
(``SocketServer``: "Disconnecting expired channel"; the client connects and authenticates anew).
The lifetime is per mechanism: ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``
overrides the broker-wide value, as in Kafka.

``counts`` holds Kafka's socket-server-metrics counters for the listener (successful and failed
authentications and re-authentications, expired connections killed); the metrics room exports
them.

Once authenticated, a request costs the gate one dict lookup and one comparison.
"""

from __future__ import annotations

import logging
import secrets
import struct
from typing import Callable

from broker.security.sasl import PlainServer, SaslError
from broker.security.scram import ScramError, ScramServer, client_first_username
from broker.server.network import AnswerAndClose, CloseConnection, connection_state, set_principal
from broker.server.security_config import ListenerSecurity
from broker.wire import (
    ApiKey,
    ErrorCode,
    MalformedRequest,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    decode_request,
    encode_response_chunks,
)

__all__ = ["SaslAuthenticator"]

logger = logging.getLogger("pylog.authenticator")
_API_KEY = struct.Struct(">h")
_SESSION = "sasl"  # the connection_state() slot
_NONCE_BYTES = 18
# Kafka's socket-server-metrics names (kafka.server:type=socket-server-metrics,listener=<l>)
COUNTERS = ("successful-authentication-total", "failed-authentication-total",
            "successful-reauthentication-total", "failed-reauthentication-total",
            "expired-connections-killed-count")


class _Session:
    __slots__ = ("phase", "mechanism", "server", "user", "expires_ms", "raw", "first_done")

    def __init__(self) -> None:
        self.phase = "handshake"
        self.mechanism: str | None = None
        self.server = None
        self.user: str | None = None  # set once authenticated (kept across re-authentication)
        self.expires_ms: int | None = None
        self.raw = False  # SaslHandshake v0: tokens without Kafka framing
        self.first_done = False  # SCRAM: the client-first message was answered


class SaslAuthenticator:
    """``handle(frame)`` for a SASL listener; the dispatcher serves what passes."""

    def __init__(self, dispatcher, listener: ListenerSecurity, credentials, now_ms: Callable[[], int],
                 reauth_ms: int = 0, token_bytes_max: int = 524_288) -> None:
        self._dispatcher = dispatcher
        self._listener = listener
        self._credentials = credentials
        self._now_ms = now_ms
        self._reauth_ms = reauth_ms  # the broker-wide connections.max.reauth.ms
        self._token_bytes_max = token_bytes_max
        self._plain = PlainServer.from_jaas(listener.jaas.get("PLAIN"))
        self.counts = dict.fromkeys(COUNTERS, 0)

    def _lifetime_ms(self, mechanism: str | None) -> int:
        return self._listener.reauth_ms.get(mechanism, self._reauth_ms)

    def handle(self, frame: bytes):
        session = connection_state().get(_SESSION)
        if session is not None and session.phase == "complete":
            if (session.expires_ms is not None and len(frame) >= 2
                    and _API_KEY.unpack_from(frame)[0] == ApiKey.SASL_HANDSHAKE):
                return self._sasl(session, frame)  # KIP-368 re-authentication (only with a session lifetime)
            if session.expires_ms is not None and self._now_ms() >= session.expires_ms:
                self.counts["expired-connections-killed-count"] += 1
                raise CloseConnection(f"SASL session of User:{session.user} expired "
                                      f"(connections.max.reauth.ms={self._lifetime_ms(session.mechanism)})")
            return self._dispatcher.handle(frame)
        if session is None:
            session = connection_state()[_SESSION] = _Session()
        return self._sasl(session, frame)

    async def _sasl(self, session: _Session, frame: bytes):
        if len(frame) > self._token_bytes_max:
            raise CloseConnection(f"SASL frame of {len(frame)} bytes before authentication "
                                  f"(sasl.server.max.receive.size={self._token_bytes_max})")
        if session.raw and session.phase == "authenticate":
            token, error = await self._step(session, frame)
            if error is not None:
                self.counts["failed-authentication-total"] += 1
                raise CloseConnection(f"SASL authentication failed: {error}")
            return bytes(token)
        try:
            header, request = decode_request(frame, strict=False)
        except MalformedRequest as exc:
            raise CloseConnection(f"malformed request during SASL authentication: {exc}") from None
        except Exception as exc:  # unknown key or unparseable version before authentication
            raise CloseConnection(f"unexpected request during SASL authentication: {exc}") from None
        key = header.api_key
        if key == ApiKey.API_VERSIONS and session.phase == "handshake" and session.user is None:
            return await self._dispatcher.handle(frame)
        if key == ApiKey.SASL_HANDSHAKE and session.phase in ("handshake", "complete"):
            return self._handshake(session, header, request)
        if key == ApiKey.SASL_AUTHENTICATE and session.phase == "authenticate" and not session.raw:
            return await self._authenticate(session, header, request)
        raise CloseConnection(f"unexpected request (api key {key}) in SASL phase {session.phase}")

    def _handshake(self, session: _Session, header, request):
        mechanism = request.mechanism
        enabled = list(self._listener.mechanisms)
        if mechanism not in enabled:
            self.counts["failed-reauthentication-total" if session.user is not None
                        else "failed-authentication-total"] += 1
            response = SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
            raise AnswerAndClose(self._encode(header, response),
                                 f"unsupported SASL mechanism {mechanism!r} (enabled: {enabled})")
        if session.user is not None and mechanism != session.mechanism:
            self.counts["failed-reauthentication-total"] += 1
            response = SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)
            raise AnswerAndClose(self._encode(header, response),
                                 f"re-authentication changed the mechanism from {session.mechanism} to {mechanism}")
        session.phase, session.mechanism, session.raw = "authenticate", mechanism, header.api_version == 0
        session.server = None if mechanism == "PLAIN" else ScramServer(
            mechanism, lambda: secrets.token_urlsafe(_NONCE_BYTES))
        session.first_done = False
        return self._encode(header, SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))

    async def _authenticate(self, session: _Session, header, request):
        token, error = await self._step(session, request.auth_bytes)
        if error is not None:
            self.counts["failed-reauthentication-total" if session.user is not None
                        else "failed-authentication-total"] += 1
            response = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                error_message=error, auth_bytes=b"", session_lifetime_ms=0)
            raise AnswerAndClose(self._encode(header, response), f"SASL authentication failed: {error}")
        lifetime = self._lifetime_ms(session.mechanism) if session.phase == "complete" else 0
        return self._encode(header, SaslAuthenticateResponse(
            error_code=ErrorCode.NONE, error_message=None, auth_bytes=token, session_lifetime_ms=lifetime))

    async def _step(self, session: _Session, token: bytes) -> tuple[bytes, str | None]:
        """One token of the exchange: (answer, None) or (b"", Kafka's error message)."""
        try:
            if session.mechanism == "PLAIN":
                return b"", self._complete(session, self._plain.authenticate(bytes(token)))
            server: ScramServer = session.server
            if not session.first_done:
                user = client_first_username(bytes(token))
                credential = await self._credentials.lookup(user, session.mechanism) if user else None
                answer = server.first(bytes(token), credential)
                session.first_done = True
                return answer, None
            answer = server.final(bytes(token))
            return answer, self._complete(session, server.username)
        except (SaslError, ScramError) as exc:
            logger.info("SASL %s authentication failed on %s: %s", session.mechanism,
                        self._listener.name, exc)
            return b"", str(exc)

    def _complete(self, session: _Session, user: str) -> str | None:
        """The exchange succeeded for ``user``: the connection's principal from now on."""
        if session.user is not None and user != session.user:
            return (f"Cannot change principals during re-authentication from User:{session.user} "
                    f"to User:{user}")
        self.counts["successful-reauthentication-total" if session.user is not None
                    else "successful-authentication-total"] += 1
        session.user, session.phase = user, "complete"
        lifetime = self._lifetime_ms(session.mechanism)
        session.expires_ms = self._now_ms() + lifetime if lifetime > 0 else None
        set_principal(f"User:{user}")
        connection_state()["authenticated"] = True
        return None

    @staticmethod
    def _encode(header, response) -> list:
        return encode_response_chunks(header.api_key, header.api_version, header.correlation_id, response)

