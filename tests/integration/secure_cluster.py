"""A secured two-broker pylog cluster for the security tests (integration and Spark tiers).

Each broker has three listeners: PLAINTEXT (the fixtures' readiness probe), SASL_SSL (clients;
also ``inter.broker.listener.name``, so replication and the controller's requests run over TLS +
SASL/PLAIN as the broker's admin user) and SSL with ``ssl.client.auth=required``. SCRAM users
alice (SCRAM-SHA-256) and bob (SCRAM-SHA-512) are added the way operators add them, through
AlterUserScramCredentials (confluent-kafka's admin, logged in as the JAAS admin over PLAIN), and
one RF-2 topic is created. ``fixtures`` is the integration conftest module (BrokerProcess,
wait_for_controller), passed in because the Spark tier loads it under another name.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.tools.certs import make_ca, make_certificate
from broker.tools.zookeeper import reserve_free_port

ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
AUTH_TIMEOUT_MS = 1500  # authentication.timeout.ms: the slowloris test waits this long


class SecureCluster:
    def __init__(self, root: Path, zk_connect: str, fixtures, brokers: int = 2, overrides: dict | None = None) -> None:
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
                "offsets.topic.replication.factor": str(brokers),
                "offsets.topic.num.partitions": "2",
                "group.initial.rebalance.delay.ms": "0",
                # the exactly-once Spark sink's driver-side test commits transactions here
                "transaction.state.log.replication.factor": str(brokers),
                "transaction.state.log.min.isr": "1",
                "transaction.state.log.num.partitions": "2",
                "controlled.shutdown.enable": "false",  # the last broker would retry for 20 s
                **(overrides or {}),
            }
            config = directory / "server.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            self.brokers.append(fixtures.BrokerProcess(broker_id, plain, config, directory / "broker.log", directory / "data"))
            self.sasl_ports.append(sasl)
            self.ssl_ports.append(tls)
        for broker in self.brokers:
            broker.start()
        fixtures.wait_for_controller(self.brokers)

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




def start_secure_cluster(root: Path, zookeeper_connect: str, fixtures, brokers: int = 2,
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
