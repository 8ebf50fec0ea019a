"""A secured two-broker pylog cluster for the security tests (integration and Spark tiers).

Each broker has three listeners: PLAINTEXT (the fixtures' readiness probe), SASL_SSL (clients;
also ``inter.broker.listener.name``, so replication and the controller's requests run over TLS +
SASL/PLAIN as the broker's admin user) and SSL with ``ssl.client.auth=required``. SCRAM users
alice (SCRAM-SHA-256) and bob (SCRAM-SHA-512) are added the way operators add them, through
AlterUserScramCredentials (confluent-kafka's admin, logged in as the JAAS admin over PLAIN), and
one RF-2 topic is created.

``secure_cluster(tmp_path_factory, zookeeper, name, acls=...)`` is the one way a module fixture
gets such a cluster (started, killed at the end); ``acls=True`` adds ``ACL_AUTHORIZER`` (only
``User:admin``, who runs the set-up, is a super user). ``fixtures`` (BrokerProcess,
wait_for_controller) defaults to ``integration_support``, which tests/conftest.py loads once for
every tier.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker.tools.certs import make_ca, make_certificate
from broker.tools.zookeeper import reserve_free_port

ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
AUTH_TIMEOUT_MS = 1500  # authentication.timeout.ms: the slowloris test waits this long
ACL_AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def _integration_support():
    return sys.modules["integration_support"]  # loaded by tests/conftest.py before any test module


class SecureCluster:
    def __init__(self, root: Path, zk_connect: str, fixtures=None, brokers: int = 2,
                 overrides: dict | None = None) -> None:
        fixtures = fixtures or _integration_support()
        self.certs = root / "certs"
        make_ca(self.certs)
        self.broker_pem = make_certificate(self.certs, "broker", "/CN=localhost/O=pylog")
        self.client_pem = make_certificate(self.certs, "client", "/CN=alice/OU=eng/O=pylog", hosts=())
        other = root / "other-ca"
        make_ca(other, "/CN=other-ca")
        self.untrusted_pem = make_certificate(other, "mallory", "/CN=mallory", hosts=())
        self.ca = str(self.certs / "ca.pem")
        self.brokers: list = []
        self.sasl_ports: list[int] = []
        self.ssl_ports: list[int] = []
        for broker_id in range(1, brokers + 1):
            directory = root / f"broker-{broker_id}"
            directory.mkdir()
            plain, sasl, tls = reserve_free_port(), reserve_free_port(), reserve_free_port()
            props = {
                "broker.id": str(broker_id),
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl},SSL://127.0.0.1:{tls}",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.broker_pem),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": self.ca,
                "listener.name.ssl.ssl.client.auth": "required",
                "authentication.timeout.ms": str(AUTH_TIMEOUT_MS),
                "log.dirs": str(directory / "data"),
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": "4000",
                # (transactions: the exactly-once Spark sink's driver-side test commits them here)
                **fixtures.small_internal_topics(brokers),
                "controlled.shutdown.enable": "false",  # the last broker would retry for 20 s
                **(overrides or {}),
            }
            config = directory / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            self.brokers.append(fixtures.BrokerProcess(broker_id, plain, config, directory / "broker.log", directory / "data"))
            self.sasl_ports.append(sasl)
            self.ssl_ports.append(tls)
        fixtures.start_all(self.brokers)  # side by side

    @property
    def sasl_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.sasl_ports)

    def confluent(self, user: str = "admin", password: str = "admin-secret", mechanism: str = "PLAIN", **extra):
        return {"bootstrap.servers": self.sasl_bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": self.ca, **extra}

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()

    def kill(self) -> None:
        """SIGKILL every broker, then wait: a module's end, where nothing checks how they go (a
        graceful stop of the pair was 4.7 s of test_security's teardown at load 16)."""
        for broker in self.brokers:
            if broker.is_running():
                broker.popen.kill()
        for broker in self.brokers:
            if broker.popen is not None:
                broker.popen.wait(30)




def start_secure_cluster(root: Path, zookeeper_connect: str, fixtures=None, brokers: int = 2,
                         overrides: dict | None = None) -> SecureCluster:
    """Start the cluster, add the SCRAM users, create ``cluster.topic``; stop it on failure.
    ``overrides``: more broker properties (an authorizer with ``super.users=User:admin``, say:
    the setup below runs as admin)."""
    from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    cluster = SecureCluster(root, f"{zookeeper_connect}/pylog-secure-{uuid.uuid4().hex[:8]}", fixtures, brokers,
                            overrides)
    try:
        admin = AdminClient(cluster.confluent())
        upserts = [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                                b"alice-secret"),
                   UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                                b"bob-secret")]
        for future in admin.alter_user_scram_credentials(upserts, request_timeout=30).values():
            future.result()
        topic = "secure-" + uuid.uuid4().hex[:6]
        admin.create_topics([NewTopic(topic, 2, brokers)], request_timeout=30)[topic].result()
        cluster.topic = topic
        return cluster
    except BaseException:
        cluster.stop()
        raise


@contextmanager
def secure_cluster(tmp_path_factory, zookeeper, name: str, brokers: int = 2, acls: bool = False,
                   overrides: dict | None = None) -> Iterator[SecureCluster]:
    """A started ``start_secure_cluster`` under ``tmp_path_factory.mktemp(name)``, killed after;
    ``acls``: with ``ACL_AUTHORIZER``. For module fixtures: ``with secure_cluster(...) as c: yield c``."""
    cluster = start_secure_cluster(tmp_path_factory.mktemp(name), zookeeper.connect_string, brokers=brokers,
                                   overrides={**(ACL_AUTHORIZER if acls else {}), **(overrides or {})})
    try:
        yield cluster
    finally:
        cluster.kill()
