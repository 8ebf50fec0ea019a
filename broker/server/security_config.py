"""The broker's security settings, under Kafka's names: which listener speaks which protocol,
its TLS files, its SASL mechanisms and users, and how brokers reach each other.

| key | meaning (Kafka's) |
|---|---|
| ``listener.security.protocol.map`` | ``NAME:PROTOCOL,...``; default maps each protocol name to itself |
| ``inter.broker.listener.name`` | the listener replication and controller requests use; default: the one named by ``security.inter.broker.protocol`` (PLAINTEXT) |
| ``sasl.enabled.mechanisms`` | mechanisms a SASL listener offers; pylog serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 |
| ``sasl.mechanism.inter.broker.protocol`` | what a broker uses towards a SASL inter-broker listener |
| ``listener.name.<l>.<mechanism>.sasl.jaas.config`` | PLAIN's ``user_<name>`` list; the broker's own ``username``/``password`` |
| ``ssl.keystore.location`` / ``.password``, ``ssl.key.password``, ``ssl.truststore.location``, ``ssl.client.auth`` | PEM files (``broker.security.tls``); each may be prefixed ``listener.name.<l>.`` |
| ``connections.max.reauth.ms`` | KIP-368: a SASL session lasts this long (0: forever); the client re-authenticates; may be prefixed ``listener.name.<l>.<mechanism>.`` as Kafka allows |
| ``sasl.server.max.receive.size`` | the largest SASL token a client may send before it is authenticated |

Kafka's default for ``sasl.enabled.mechanisms`` is GSSAPI, which pylog does not serve; pylog's is
``PLAIN,SCRAM-SHA-256,SCRAM-SHA-512`` (a mechanism without users refuses every login).
``sasl.jaas.config`` without a listener prefix is accepted as a fallback for every listener and
mechanism (Kafka reads a static JAAS file instead). pylog's own bound:
``authentication.timeout.ms`` (10 s), the time a new connection has to finish its TLS handshake
and its SASL authentication before it is closed (slowloris).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from broker.security.sasl import SERVER_MECHANISMS, JaasConfig, parse_jaas
from broker.security.tls import CLIENT_AUTH, SslSettings

__all__ = ["SECURITY_PROTOCOLS", "ListenerSecurity", "SecurityConfig", "security_from_properties"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_MAP = {p: p for p in SECURITY_PROTOCOLS}
_SSL_KEYS = ("ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
             "ssl.truststore.location", "ssl.client.auth", "ssl.keystore.type", "ssl.truststore.type",
             "ssl.truststore.password", "ssl.endpoint.identification.algorithm")


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    ssl: SslSettings | None = None
    mechanisms: tuple[str, ...] = ()
    jaas: Mapping[str, JaasConfig] = field(default_factory=dict)  # mechanism -> its JAAS line
    # mechanism -> listener.name.<l>.<mechanism>.connections.max.reauth.ms (others: the broker-wide value)
    reauth_ms: Mapping[str, int] = field(default_factory=dict)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class SecurityConfig:
    listeners: Mapping[str, ListenerSecurity] = field(default_factory=dict)
    inter_broker_listener_name: str = "PLAINTEXT"
    inter_broker_mechanism: str = "PLAIN"
    connections_max_reauth_ms: int = 0
    authentication_timeout_ms: int = 10_000
    sasl_server_max_receive_size_bytes: int = 524_288

    def for_listener(self, name: str) -> ListenerSecurity:
        return self.listeners.get(name) or ListenerSecurity(name, "PLAINTEXT")


def security_from_properties(props: Mapping[str, str], listener_names: list[str]) -> tuple[SecurityConfig, set[str]]:
    """The security settings and the keys they consumed; ``ValueError`` names a bad key."""
    known: set[str] = set()

    def get(key: str, default: str | None = None) -> str | None:
        known.add(key)
        value = props.get(key)
        return default if value is None or str(value).strip() == "" else str(value).strip()

    protocol_map = _protocol_map(get("listener.security.protocol.map"))
    mechanisms = _mechanisms(get("sasl.enabled.mechanisms", ",".join(SERVER_MECHANISMS)))
    reauth_ms = _int(get, "connections.max.reauth.ms", 0, 0)
    listeners = {}
    for name in listener_names:
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ValueError(f"listener.security.protocol.map: listener {name} has no security protocol "
                             f"(map: {','.join(f'{k}:{v}' for k, v in protocol_map.items())})")
        listeners[name] = _listener(name, protocol, props, get, mechanisms, reauth_ms)
    inter_name = get("inter.broker.listener.name")
    inter_protocol = get("security.inter.broker.protocol")
    if inter_name and inter_protocol:
        raise ValueError("only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
    if not inter_name:
        wanted = inter_protocol or "PLAINTEXT"
        inter_name = wanted if wanted in listeners else next(
            (n for n, l in listeners.items() if l.protocol == wanted), wanted)
    inter_name = inter_name.upper()
    if inter_name not in listeners:
        raise ValueError(f"inter.broker.listener.name={inter_name} is not one of listeners {listener_names}")
    inter_mechanism = get("sasl.mechanism.inter.broker.protocol", "PLAIN").upper()
    if listeners[inter_name].uses_sasl and inter_mechanism not in listeners[inter_name].mechanisms:
        raise ValueError(f"sasl.mechanism.inter.broker.protocol={inter_mechanism} is not enabled on "
                         f"{inter_name} ({','.join(listeners[inter_name].mechanisms)})")
    known.update(_listener_keys(listener_names).intersection(props))
    config = SecurityConfig(
        listeners=MappingProxyType(listeners),
        inter_broker_listener_name=inter_name,
        inter_broker_mechanism=inter_mechanism,
        connections_max_reauth_ms=reauth_ms,
        authentication_timeout_ms=_int(get, "authentication.timeout.ms", 10_000, 1),
        sasl_server_max_receive_size_bytes=_int(get, "sasl.server.max.receive.size", 524_288, 1),
    )
    return config, known


def _listener_keys(listener_names: list[str]) -> set[str]:
    """The ``listener.name.<l>.`` keys ``_listener`` reads: any other one (a typo, a listener not
    in ``listeners``, a key that has no per-listener form here) is reported unknown, not dropped
    in silence."""
    keys = set()
    for name in listener_names:
        prefix = f"listener.name.{name.lower()}."
        keys.update(prefix + key for key in (*_SSL_KEYS, "sasl.enabled.mechanisms"))
        for mechanism in SERVER_MECHANISMS:
            keys.update((f"{prefix}{mechanism.lower()}.sasl.jaas.config",
                         f"{prefix}{mechanism.lower()}.connections.max.reauth.ms"))
    return keys


def _listener(name: str, protocol: str, props, get, mechanisms: tuple[str, ...], reauth_ms: int) -> ListenerSecurity:
    prefix = f"listener.name.{name.lower()}."

    def scoped(key: str, default: str | None = None) -> str | None:
        value = props.get(prefix + key)
        return str(value).strip() if value is not None and str(value).strip() else get(key, default)

    ssl = None
    if protocol in ("SSL", "SASL_SSL"):
        for key in _SSL_KEYS:
            kind = scoped(key) if key.endswith(".type") else None
            if kind and kind.upper() != "PEM":
                raise ValueError(f"{key}={kind}: pylog reads PEM files only (set {key}=PEM)")
        client_auth = (scoped("ssl.client.auth", "none") or "none").lower()
        if client_auth not in CLIENT_AUTH:
            raise ValueError(f"ssl.client.auth={client_auth} must be one of {', '.join(CLIENT_AUTH)}")
        identification = props.get(prefix + "ssl.endpoint.identification.algorithm",
                                   props.get("ssl.endpoint.identification.algorithm", "https"))
        ssl = SslSettings(scoped("ssl.keystore.location"), scoped("ssl.keystore.password"),
                          scoped("ssl.key.password"), scoped("ssl.truststore.location"), client_auth,
                          str(identification).strip().lower())
        if not ssl.keystore_location:
            raise ValueError(f"listeners: {name} ({protocol}) needs ssl.keystore.location "
                             f"(or listener.name.{name.lower()}.ssl.keystore.location)")
    listener_mechanisms = mechanisms
    if props.get(prefix + "sasl.enabled.mechanisms"):
        listener_mechanisms = _mechanisms(props[prefix + "sasl.enabled.mechanisms"])
    jaas, lifetimes = {}, {}
    if protocol.startswith("SASL_"):
        for mechanism in listener_mechanisms:
            text = props.get(f"{prefix}{mechanism.lower()}.sasl.jaas.config") or get("sasl.jaas.config")
            if text:
                jaas[mechanism] = parse_jaas(text)
            scoped_key = f"{prefix}{mechanism.lower()}.connections.max.reauth.ms"
            if props.get(scoped_key) is not None:
                lifetimes[mechanism] = _int(lambda _key: props.get(scoped_key), scoped_key, reauth_ms, 0)
    return ListenerSecurity(name, protocol, ssl, listener_mechanisms if protocol.startswith("SASL_") else (),
                            MappingProxyType(jaas), MappingProxyType(lifetimes))


def _protocol_map(raw: str | None) -> dict[str, str]:
    if raw is None:
        return dict(_DEFAULT_MAP)
    out = {}
    for item in (part.strip() for part in raw.split(",") if part.strip()):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with "
                             f"PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name] = protocol
    return out


def _mechanisms(raw: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(m.strip().upper() for m in raw.split(",") if m.strip()))
    unsupported = [m for m in names if m not in SERVER_MECHANISMS]
    if unsupported:
        raise ValueError(f"sasl.enabled.mechanisms: {', '.join(unsupported)} not served "
                         f"(pylog serves {', '.join(SERVER_MECHANISMS)})")
    return names


def _int(get, key: str, default: int, low: int) -> int:
    raw = get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not an integer") from None
    if not low <= value <= (1 << 63) - 1:
        raise ValueError(f"{key}={raw!r} must be at least {low}")
    return value
