"""``pylog cluster up --security``: the cluster's brokers listen on SASL_SSL only, with a CA made
for the cluster and an admin user, and the command prints the client settings to use.

Under ``<dir>/security/`` (made once, kept across restarts; keys and the password are 0600)::

    ca.pem, ca.key          the cluster's self-signed CA (the clients' truststore)
    broker.pem              the brokers' key + certificate (CN=localhost, SAN localhost/127.0.0.1)
    admin.password          the admin user's random password
    client.properties       what a client needs (kafka-configs --command-config, console tools,
                            pylog configs --command-config): SASL_SSL, SCRAM-SHA-256, the truststore

Brokers: ``listeners=SASL_SSL://127.0.0.1:<port+i>``, ``inter.broker.listener.name=SASL_SSL``
(replication and controller requests over TLS + SASL/PLAIN as ``admin``, whose PLAIN password is
in the listener's JAAS line as Kafka configures it). After the brokers serve, ``admin`` also gets a
SCRAM-SHA-256 credential through AlterUserScramCredentials, so clients log in with SCRAM.
"""

from __future__ import annotations

import secrets
import ssl
from pathlib import Path

from broker.tools.certs import make_ca, make_certificate

__all__ = ["ensure_security_files", "broker_security_properties", "client_properties", "probe_context",
           "add_admin_scram", "ADMIN_USER"]

ADMIN_USER = "admin"


def _dir(root: Path) -> Path:
    return root / "security"


def ensure_security_files(root: Path) -> Path:
    directory = _dir(root)
    if not (directory / "ca.pem").exists():
        make_ca(directory, "/CN=pylog-cluster-ca")
    if not (directory / "broker.pem").exists():
        make_certificate(directory, "broker", "/CN=localhost/O=pylog")
    password_path = directory / "admin.password"
    if not password_path.exists():
        password_path.write_text(secrets.token_urlsafe(18))
        password_path.chmod(0o600)
    properties = directory / "client.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in client_properties(root).items()))
    properties.chmod(0o600)
    return directory


def _password(root: Path) -> str:
    return (_dir(root) / "admin.password").read_text().strip()


def _jaas(module: str, root: Path, users: bool) -> str:
    password = _password(root)
    extra = f' user_{ADMIN_USER}="{password}"' if users else ""
    return f'{module} required username="{ADMIN_USER}" password="{password}"{extra};'


def broker_security_properties(root: Path) -> dict[str, str]:
    directory = _dir(root).resolve()
    return {
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            _jaas("org.apache.kafka.common.security.plain.PlainLoginModule", root, users=True),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(directory / "broker.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(directory / "ca.pem"),
    }


def client_properties(root: Path, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": _jaas(module, root, users=False),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str((_dir(root) / "ca.pem").resolve()),
    }


def probe_context(root: Path) -> ssl.SSLContext:
    """For the readiness probe (ApiVersions is answered before authentication, over TLS)."""
    return ssl.create_default_context(cafile=str(_dir(root) / "ca.pem"))


def add_admin_scram(root: Path, bootstrap_servers: str) -> None:
    """The admin user's SCRAM-SHA-256 credential, set over SASL_SSL as admin with PLAIN."""
    from broker.client import AdminClient, ClientConfig
    from broker.client.security import client_security
    from broker.tools.user_configs import alter_users

    security = client_security(client_properties(root, "PLAIN"))
    with AdminClient(bootstrap_servers, config=ClientConfig(security=security)) as admin:
        alter_users(admin, ADMIN_USER, {"SCRAM-SHA-256": f"password={_password(root)}"}, [], _Null())


class _Null:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
