"""SASL/PLAIN (RFC 4616) and JAAS option parsing, as Kafka configures them.

Kafka reads SASL settings from a JAAS line (``sasl.jaas.config``), e.g. for a broker's PLAIN
users::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

``username``/``password`` are what this side sends (clients, and a broker to other brokers);
``user_<name>="<password>"`` are the users a PLAIN server accepts (Kafka's
``PlainServerCallbackHandler``). PLAIN's passwords therefore live in the broker's config file as
Kafka's do; SCRAM's live salted and hashed in ZooKeeper (``broker.security.scram``).
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["SaslError", "JaasConfig", "parse_jaas", "PlainServer", "plain_token", "SERVER_MECHANISMS"]

SERVER_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # what pylog can serve
_PLAIN_TOKEN_BYTES_MAX = 1024  # authzid, user and password with two NULs; Kafka has no bound


class SaslError(Exception):
    """Authentication failed; the message is Kafka's and safe to send to the client."""


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def __repr__(self) -> str:  # never print a password (STYLE: never log secrets)
        return f"JaasConfig({self.login_module}, options={sorted(self.options)})"


_JAAS = re.compile(r'^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;?\s*$', re.S)
_OPTION = re.compile(r'\s*([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


def parse_jaas(text: str) -> JaasConfig:
    """One login module line: ``<class> <flag> key=value ... ;`` (values quoted or bare)."""
    match = _JAAS.match(text or "")
    if not match:
        raise ValueError("sasl.jaas.config is not '<LoginModule> required key=\"value\" ...;'")
    module, _flag, rest = match.groups()
    options = {}
    position = 0
    while position < len(rest):
        option = _OPTION.match(rest, position)
        if not option:
            if rest[position:].strip(" ;\n\t"):
                raise ValueError("sasl.jaas.config: options must be key=\"value\"")
            break
        value = option.group(2)
        if value.startswith('"'):
            value = re.sub(r'\\(.)', r'\1', value[1:-1])
        options[option.group(1)] = value
        position = option.end()
    return JaasConfig(module, options)


class PlainServer:
    """Checks one PLAIN token against ``user_<name>`` passwords; ``authenticate(token)`` returns
    the user name or raises ``SaslError`` with Kafka's message."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = dict(users)

    @classmethod
    def from_jaas(cls, jaas: JaasConfig | None) -> "PlainServer":
        options = jaas.options if jaas else {}
        return cls({key[5:]: value for key, value in options.items() if key.startswith("user_")})

    def authenticate(self, token: bytes) -> str:
        if len(token) > _PLAIN_TOKEN_BYTES_MAX:
            raise SaslError("Invalid SASL/PLAIN response: token too long")
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslError("Authentication failed: username not specified")
        if not password:
            raise SaslError("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compare even for an unknown user, so the answer takes as long either way
        ok = hmac.compare_digest((expected or "\x00" + password).encode(), password.encode())
        if expected is None or not ok:
            raise SaslError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslError("Authentication failed: Client requested an authorization id that is "
                            "different from username")
        return user


def plain_token(username: str, password: str) -> bytes:
    return b"\x00" + username.encode() + b"\x00" + password.encode()
