"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka speaks it: credentials, their ZooKeeper text,
and the server's and client's exchanges as pure state machines.

Credentials (Kafka's ``ScramCredential``): a random salt, ``iterations``, and two keys derived
from the salted password ``Hi(password, salt, i)`` (PBKDF2-HMAC): ``StoredKey = H(HMAC(salted,
"Client Key"))`` and ``ServerKey = HMAC(salted, "Server Key")``. The password and the salted
password are never stored. In ZooKeeper they are one string per mechanism under
``/config/users/<name>``: ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(``ScramCredentialUtils.credentialToString``).

Primitives: ``hashlib.pbkdf2_hmac`` and ``hmac`` from the standard library. They are the
whole of what SCRAM needs (one KDF, one MAC, one hash), implemented in OpenSSL, so a third-party
SCRAM package would add a dependency without adding a primitive (the ones on PyPI wrap the same
calls and do not speak Kafka's credential format or its ``tokenauth`` extension).

Iterations: Kafka accepts 4096..16384 for both mechanisms (``ScramMechanism.minIterations``,
AlterUserScramCredentials' upper bound).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Callable

__all__ = ["MECHANISMS", "ITERATIONS_MIN", "ITERATIONS_MAX", "ScramCredential", "ScramError",
           "ScramServer", "ScramClient", "salted_password", "credential_from_salted",
           "credential_from_password", "mechanism_id", "mechanism_name", "client_first_username"]

ITERATIONS_MIN = 4096
ITERATIONS_MAX = 16384
SALT_BYTES = 32  # what Kafka's ScramFormatter.secureRandomBytes uses for a new credential
NONCE_BYTES = 24
# mechanism -> (hashlib name, wire id in Describe/AlterUserScramCredentials)
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
_MESSAGE_BYTES_MAX = 4096  # a SCRAM message is ~200 bytes; anything longer is not one


class ScramError(Exception):
    """The exchange failed; the message is safe to send to the peer (it names no secret)."""


def mechanism_id(name: str) -> int:
    return MECHANISMS[name][1]


def mechanism_name(mechanism: int) -> str | None:
    return next((name for name, (_, wire) in MECHANISMS.items() if wire == mechanism), None)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = lambda raw: base64.b64encode(raw).decode()
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: missing or bad {exc}") from None


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """What the broker does with AlterUserScramCredentials' upsertion (the client salted it)."""
    digest = MECHANISMS[mechanism][0]
    client_key = hmac.digest(salted, b"Client Key", digest)
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           hmac.digest(salted, b"Server Key", digest), iterations)


def credential_from_password(mechanism: str, password: str, salt: bytes,
                             iterations: int = ITERATIONS_MIN) -> ScramCredential:
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                  salt, iterations)


_CLIENT_FIRST = re.compile(r"^n,(a=[^,]*)?,(n=[^,]+),(r=[\x21-\x2b\x2d-\x7e]+)((?:,[a-zA-Z]+=[^,]*)*)$")
_CLIENT_FINAL = re.compile(r"^(c=[A-Za-z0-9+/=]+,r=[\x21-\x2b\x2d-\x7e]+)((?:,[a-zA-Z]+=[^,]*)*),p=([A-Za-z0-9+/=]+)$")


def _decode_name(saslname: str) -> str:
    """RFC 5802 5.1: '=2C' is ',' and '=3D' is '='; any other '=' is malformed."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise ScramError("Invalid SCRAM client first message: bad username encoding")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def client_first_username(message: bytes) -> str | None:
    """The user a client-first message names (to look its credential up before ``first``);
    None when the message is not one."""
    try:
        match = _CLIENT_FIRST.match(_text(message))
        return _decode_name(match.group(2)[2:]) if match else None
    except ScramError:
        return None


class ScramServer:
    """One server-side exchange: ``first(client_first, credential) -> server_first`` then
    ``final(client_final) -> server_final``; ``username`` is known after ``first``.

    The caller looks the credential up (``client_first_username``; the store is I/O). An unknown
    user (credential None) fails at the first message, a wrong proof at the final one, both with
    the message Apache Kafka 4.1 sends for either (so a client cannot tell which users exist)."""

    def __init__(self, mechanism: str, nonce: Callable[[], str]) -> None:
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism][0]
        self._nonce = nonce
        self.username: str | None = None
        self.token_auth = False  # the tokenauth=true extension (delegation tokens, not served)
        self._credential: ScramCredential | None = None
        self._auth_prefix = ""
        self._nonce_full = ""

    def first(self, message: bytes, credential: ScramCredential | None) -> bytes:
        text = _text(message)
        match = _CLIENT_FIRST.match(text)
        if not match:
            raise ScramError("Invalid SCRAM client first message")
        authzid, name, client_nonce, extensions = match.groups()
        self.username = _decode_name(name[2:])
        if authzid and _decode_name(authzid[2:]) != self.username:
            raise ScramError("Authentication failed: Client requested an authorization id that is "
                             "different from username")
        if "tokenauth=true" in (extensions or "").lower():
            raise ScramError("Authentication failed: delegation tokens are not supported")
        if credential is None:
            raise ScramError(_INVALID_CREDENTIALS.format(self.mechanism))
        self._credential = credential
        self._nonce_full = client_nonce[2:] + self._nonce()
        server_first = (f"r={self._nonce_full},s={base64.b64encode(credential.salt).decode()},"
                        f"i={credential.iterations}")
        bare = text[text.index(name):]
        self._auth_prefix = f"{bare},{server_first}"
        return server_first.encode()

    def final(self, message: bytes) -> bytes:
        assert self._credential is not None, "final() before first()"
        match = _CLIENT_FINAL.match(_text(message))
        if not match:
            raise ScramError("Invalid SCRAM client final message")
        without_proof, extensions, proof_b64 = match.groups()
        if f"r={self._nonce_full}" not in without_proof.split(","):
            raise ScramError("Invalid client nonce in the final client message.")
        auth_message = f"{self._auth_prefix},{without_proof}{extensions or ''}".encode()
        proof = base64.b64decode(proof_b64)
        credential = self._credential
        signature = hmac.digest(credential.stored_key, auth_message, self._digest)
        if len(proof) != len(signature):
            raise ScramError(_INVALID_CREDENTIALS.format(self.mechanism))
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise ScramError(_INVALID_CREDENTIALS.format(self.mechanism))
        server_signature = hmac.digest(credential.server_key, auth_message, self._digest)
        return b"v=" + base64.b64encode(server_signature)


_INVALID_CREDENTIALS = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class ScramClient:
    """The client side: ``first() -> client_first``, ``final(server_first) -> client_final``,
    ``verify(server_final)`` (the server proves it knows the ServerKey too)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: Callable[[], str]) -> None:
        self.mechanism = mechanism
        self._digest = MECHANISMS[mechanism][0]
        self._username = username.replace("=", "=3D").replace(",", "=2C")
        self._password = password.encode()
        self._client_nonce = nonce()
        self._bare = ""
        self._server_signature = b""

    def first(self) -> bytes:
        self._bare = f"n={self._username},r={self._client_nonce}"
        return ("n,," + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), fields.get("i", "0")
        if not nonce.startswith(self._client_nonce) or salt is None:
            raise ScramError("Invalid SCRAM server first message")
        if not iterations.isdigit() or not ITERATIONS_MIN <= int(iterations) <= ITERATIONS_MAX:
            raise ScramError(f"Invalid SCRAM iteration count {iterations}")
        salted = _client_salted_password(self.mechanism, self._password, base64.b64decode(salt), int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._digest)
        stored_key = hashlib.new(self._digest, client_key).digest()
        signature = hmac.digest(stored_key, auth_message, self._digest)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.digest(salted, b"Server Key", self._digest)
        self._server_signature = hmac.digest(server_key, auth_message, self._digest)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = _text(server_final)
        if text.startswith("e="):
            raise ScramError(f"SCRAM server error: {text[2:]}")
        if not hmac.compare_digest(text.encode(), b"v=" + base64.b64encode(self._server_signature)):
            raise ScramError("Invalid SCRAM server signature")


@functools.lru_cache(maxsize=32)
def _client_salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """The client's Hi(), remembered per (password, salt, iterations): RFC 5802 section 5.1 lets a
    client cache it. A client that opens many connections, or re-authenticates (KIP-368), pays the
    4096+ PBKDF2 rounds once instead of per login; the broker's cost is unchanged (it holds only
    StoredKey/ServerKey)."""
    return salted_password(mechanism, password, salt, iterations)


def _text(message: bytes) -> str:
    if len(message) > _MESSAGE_BYTES_MAX:
        raise ScramError("Invalid SCRAM message: too long")
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("Invalid SCRAM message: not UTF-8") from None
