"""TLS and SASL for pylog's client, from Kafka's client config names.

| name | meaning |
|---|---|
| ``security.protocol`` | PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL |
| ``ssl.truststore.location`` (Java, PEM) / ``ssl.ca.location`` (librdkafka) | the CAs to trust; the system's without one |
| ``ssl.keystore.location`` (PEM: key + chain) / ``ssl.certificate.location`` + ``ssl.key.location`` (librdkafka) | this client's certificate, when the broker asks for one |
| ``ssl.key.password`` / ``ssl.keystore.password`` | decrypts the key |
| ``ssl.endpoint.identification.algorithm`` | ``https`` (default): check the broker's host name; empty: don't |
| ``sasl.mechanism`` | PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default: GSSAPI, which pylog does not speak) |
| ``sasl.username`` / ``sasl.password`` (librdkafka) or ``sasl.jaas.config`` (Java: ``... username="u" password="p";``) | the credentials |

``ClientSecurity`` keeps the properties it was made from, so it pickles (Spark ships it to
executors inside the client kwargs); its SSL context is built on first use and shared, per process,
by every ``ClientSecurity`` of the same properties. It never prints the password.
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass, field
from typing import Mapping

from broker.security.sasl import parse_jaas
from broker.security.sasl_client import CLIENT_MECHANISMS, SaslClient
from broker.security.tls import SslSettings, client_context

__all__ = ["ClientSecurity", "client_security", "SECURITY_PROPERTY_NAMES"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SECURITY_PROPERTY_NAMES = frozenset({
    "security.protocol", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.ca.location", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
    "ssl.key.password", "ssl.certificate.location", "ssl.key.location",
    "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.username", "sasl.password",
    "sasl.jaas.config",
})


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ssl_properties: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # sorted ssl.* items

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        if self.protocol not in ("SSL", "SASL_SSL"):
            return None
        with _CONTEXTS_LOCK:
            context = _CONTEXTS.get(self.ssl_properties)
            if context is None:
                context = _CONTEXTS[self.ssl_properties] = _ssl_context(dict(self.ssl_properties))
            return context

    def __repr__(self) -> str:
        return f"ClientSecurity({self.protocol}, mechanism={self.mechanism}, user={self.username!r})"

    def sasl_client(self) -> SaslClient | None:
        if self.mechanism is None:
            return None
        return SaslClient(self.mechanism, self.username or "", self.password or "")


def client_security(props: Mapping[str, str]) -> ClientSecurity | None:
    """From Kafka client properties (other names are ignored); None for PLAINTEXT. Raises
    ``ValueError`` naming the property that is wrong or missing."""
    get = lambda key, default=None: (str(props[key]).strip() if props.get(key) not in (None, "") else default)  # noqa: E731
    protocol = get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol={protocol} must be one of {', '.join(PROTOCOLS)}")
    if protocol == "PLAINTEXT":
        return None
    ssl_properties = tuple(sorted((k, str(v)) for k, v in props.items() if k.startswith("ssl.")))
    if protocol in ("SSL", "SASL_SSL"):
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            if get(key) and get(key).upper() != "PEM":
                raise ValueError(f"{key}={get(key)}: pylog's client reads PEM files only")
        _ssl_context(dict(ssl_properties))  # unreadable files fail here, where the config is given
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        mechanism = get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in CLIENT_MECHANISMS:
            raise ValueError(f"sasl.mechanism={mechanism} is not supported (pylog speaks "
                             f"{', '.join(CLIENT_MECHANISMS)})")
        username, password = get("sasl.username"), get("sasl.password")
        if get("sasl.jaas.config"):
            jaas = parse_jaas(get("sasl.jaas.config"))
            username, password = jaas.username or username, jaas.password or password
        if not username or password is None:
            raise ValueError("SASL needs sasl.username and sasl.password (or sasl.jaas.config with "
                             "username=\"...\" password=\"...\")")
    return ClientSecurity(protocol, mechanism, username, password, ssl_properties)


_CONTEXTS: dict[tuple, ssl.SSLContext] = {}
_CONTEXTS_LOCK = threading.Lock()


def _ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    get = lambda key: (str(props[key]).strip() or None) if key in props else None  # noqa: E731
    identification = props.get("ssl.endpoint.identification.algorithm", "https")
    context = client_context(SslSettings(
        get("ssl.keystore.location"), get("ssl.keystore.password"), get("ssl.key.password"),
        get("ssl.truststore.location") or get("ssl.ca.location"),
        endpoint_identification_algorithm=str(identification or "").strip().lower()))
    if get("ssl.certificate.location") and not get("ssl.keystore.location"):
        context.load_cert_chain(get("ssl.certificate.location"), get("ssl.key.location"),
                                password=get("ssl.key.password"))
    return context

