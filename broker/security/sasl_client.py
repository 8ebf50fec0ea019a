"""The client side of a SASL exchange, sans-IO: which tokens to send for PLAIN and SCRAM, and the
Kafka requests that carry them (SaslHandshake v1, then SaslAuthenticate). Used by pylog's client
(blocking sockets) and by brokers towards other brokers (asyncio): each drives ``exchange`` with
its own ``request(api_key, version, body) -> response``."""

from __future__ import annotations

import random
import secrets
from typing import Callable

from broker.security.sasl import plain_token
from broker.security.scram import MECHANISMS, ScramClient, ScramError

__all__ = ["SaslClient", "SaslAuthenticationError", "CLIENT_MECHANISMS", "REAUTH_AT_FRACTIONS",
           "reauthentication_delay_ms"]

CLIENT_MECHANISMS = ("PLAIN", *MECHANISMS)
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
REAUTH_AT_FRACTIONS = (0.85, 0.95)  # of a KIP-368 session lifetime: renew between these (Kafka's)


def reauthentication_delay_ms(lifetime_ms: int, draw: Callable[[], float] = random.random) -> float | None:
    """When to renew a KIP-368 session, in ms after its exchange began; ``None`` when the broker
    asked for no renewal (lifetime 0). Kafka's clients pick a random point between 85% and 95% of
    the lifetime: many connections opened together do not all renew at once, and at least 5% of
    the lifetime is left for the renewal to reach the broker. Counting from the exchange's start
    (not its end) errs early: the broker's session starts after that. Shared by pylog's client
    (broker.client.connection) and broker-to-broker connections (broker.server.inter_broker)."""
    if not lifetime_ms:
        return None
    low, high = REAUTH_AT_FRACTIONS
    return lifetime_ms * (low + (high - low) * draw())


class SaslAuthenticationError(Exception):
    """The broker refused us (``error_code``: Kafka's, e.g. 58 or 33), or answered nonsense."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class SaslClient:
    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: Callable[[], str] = lambda: secrets.token_urlsafe(18)) -> None:
        if mechanism not in CLIENT_MECHANISMS:
            raise ValueError(f"sasl.mechanism={mechanism} is not supported (pylog speaks "
                             f"{', '.join(CLIENT_MECHANISMS)})")
        self.mechanism = mechanism
        self._username, self._password = username, password
        self._scram = ScramClient(mechanism, username, password, nonce) if mechanism in MECHANISMS else None
        self._step = 0

    def __repr__(self) -> str:
        return f"SaslClient({self.mechanism}, user={self._username!r})"  # never the password

    def requests(self, authenticate_version: int = 1):
        """A generator: yields ``(api_key, version, body)`` requests, is sent each response,
        returns the session lifetime in ms (0: no re-authentication asked). Raises
        ``SaslAuthenticationError``. ``exchange``/``exchange_async`` drive it."""
        handshake = yield SASL_HANDSHAKE, 1, {"mechanism": self.mechanism}
        if handshake.error_code != 0:
            raise SaslAuthenticationError(handshake.error_code, (
                f"SASL mechanism {self.mechanism} is not enabled on the broker (enabled: "
                f"{', '.join(handshake.mechanisms)})" if handshake.error_code == UNSUPPORTED_SASL_MECHANISM
                else f"SaslHandshake failed with error {handshake.error_code}"))
        token = self.first()
        while True:
            response = yield SASL_AUTHENTICATE, authenticate_version, {"auth_bytes": token}
            if response.error_code != 0:
                raise SaslAuthenticationError(response.error_code,
                                              response.error_message or f"SASL error {response.error_code}")
            token = self.next(bytes(response.auth_bytes))
            if token is None:
                return getattr(response, "session_lifetime_ms", 0) or 0

    def exchange(self, request: Callable[[int, int, dict], object], authenticate_version: int = 1) -> int:
        steps, response = self.requests(authenticate_version), None
        try:
            while True:
                response = request(*steps.send(response))
        except StopIteration as done:
            return done.value

    async def exchange_async(self, request, authenticate_version: int = 1) -> int:
        steps, response = self.requests(authenticate_version), None
        try:
            while True:
                response = await request(*steps.send(response))
        except StopIteration as done:
            return done.value

    def first(self) -> bytes:
        self._step = 1
        if self._scram is None:
            return plain_token(self._username, self._password)
        return self._scram.first()

    def next(self, server_token: bytes) -> bytes | None:
        """The next token to send, or None when the exchange is complete."""
        self._step += 1
        try:
            if self._scram is None:
                return None
            if self._step == 2:
                return self._scram.final(server_token)
            self._scram.verify(server_token)
            return None
        except ScramError as exc:
            raise SaslAuthenticationError(SASL_AUTHENTICATION_FAILED, str(exc)) from None
