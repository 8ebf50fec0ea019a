"""TLS contexts from Kafka's ``ssl.*`` settings, and the principal of a client certificate.

Keystores and truststores are PEM files (Kafka's ``ssl.keystore.type=PEM`` /
``ssl.truststore.type=PEM``): Python's ``ssl`` reads PEM only, and Kafka's Java clients read PEM
too, so one set of files serves every client. A keystore file holds the private key and the
certificate chain; ``ssl.key.password`` (or ``ssl.keystore.password``) decrypts an encrypted key.
TLS 1.2 and 1.3, as Kafka's default ``ssl.enabled.protocols``.

``ssl.client.auth`` (Kafka's names): ``required`` refuses a client without a certificate the
truststore signed; ``requested`` asks and accepts none; ``none`` does not ask. A client that
presented a certificate is ``User:<its subject DN>`` (Kafka's ``ssl.principal.mapping.rules``
DEFAULT: the RFC 2253 string of ``X500Principal.getName()``); without one, ``User:ANONYMOUS``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

__all__ = ["SslSettings", "server_context", "client_context", "certificate_principal"]

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass(frozen=True)
class SslSettings:
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    client_auth: str = "none"
    endpoint_identification_algorithm: str = "https"  # clients: check the host name ("" = off)

    def __repr__(self) -> str:  # passwords never reach a log line
        return (f"SslSettings(keystore={self.keystore_location!r}, truststore={self.truststore_location!r}, "
                f"client_auth={self.client_auth!r})")


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """A listener's context; raises ``ssl.SSLError``/``OSError`` naming the unreadable file."""
    if not settings.keystore_location:
        raise ValueError("ssl.keystore.location is required on an SSL or SASL_SSL listener")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.keystore_location,
                            password=settings.key_password or settings.keystore_password)
    context.verify_mode = CLIENT_AUTH[settings.client_auth]
    if settings.client_auth != "none":
        if not settings.truststore_location:
            raise ValueError(f"ssl.client.auth={settings.client_auth} needs ssl.truststore.location")
        context.load_verify_locations(settings.truststore_location)
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """What a client (or a broker towards another broker) uses: the truststore's CAs, or the
    system's without one; a keystore when the server asks for a certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.truststore_location:
        context.load_verify_locations(settings.truststore_location)
    else:
        context.load_default_certs()
    context.check_hostname = bool(settings.endpoint_identification_algorithm)
    if settings.keystore_location:
        context.load_cert_chain(settings.keystore_location,
                                password=settings.key_password or settings.keystore_password)
    return context


# X500Principal.getName(RFC2253) keywords; other attributes are printed as OID=#hex.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
             "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16), "serialNumber": ("2.5.4.5", 0x13)}


def certificate_principal(peer_cert: dict | None) -> str | None:
    """``User:<RFC 2253 DN>`` of a verified peer certificate (``SSLObject.getpeercert()``), or
    None when the client sent none. RDNs are printed last-first, as RFC 2253 orders them."""
    if not peer_cert or not peer_cert.get("subject"):
        return None
    rdns = []
    for rdn in reversed(peer_cert["subject"]):
        rdns.append("+".join(_attribute(name, value) for name, value in rdn))
    return "User:" + ",".join(rdns)


def _attribute(name: str, value: str) -> str:
    if name in _KEYWORDS:
        return f"{_KEYWORDS[name]}={_escape(value)}"
    oid, tag = _OIDS.get(name, (name, 0x0C))
    raw = value.encode()
    return f"{oid}=#{tag:02x}{len(raw):02x}{raw.hex()}"


def _escape(value: str) -> str:
    out = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
