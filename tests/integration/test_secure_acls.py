"""ACLs over SASL_SSL with SCRAM (issue 17's test list): each client - confluent-kafka,
kafka-python, Kafka's Java tools, pylog's own - logged in as a SCRAM user, one allowed and one
denied case each; host-based ACLs against a real connection; KIP-368 re-authentication with
librdkafka and with pylog's client, and the broker's closing of a session that was not renewed.

One broker for the module (``secure_cluster``: SASL_SSL for clients and the broker itself) with
``authorizer.class.name`` set, ``super.users=User:admin`` (the setup and the ACL grants run as
admin, through CreateAcls) and no ``allow.everyone.if.no.acl.found``: what is not granted is
denied. alice (SCRAM-SHA-256) is granted the module's topic and her groups, bob (SCRAM-SHA-512)
the topic; carol (SCRAM-SHA-256) nothing. SCRAM-SHA-512 sessions on the SASL_SSL listener last 2 s
(``listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms``, Kafka's per-mechanism
prefix), so bob's clients (Java, librdkafka, pylog) re-authenticate while alice's and the broker's own
sessions (PLAIN) are left alone; the broker's Prometheus endpoint shows Kafka's socket-server
counters.
The Spark source and sink against ACLs are in tests/spark/test_spark_security.py (here: the
source's driver-side planning only).
"""

from __future__ import annotations

import struct
import time
import urllib.request
import uuid

import pytest

from broker.tools.zookeeper import reserve_free_port
from broker.wire import decode_response, encode_request
from secure_cluster import secure_cluster

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

WAIT_S = 20
REAUTH_MS = 2000  # SCRAM-SHA-512 session lifetime on the SASL_SSL listener
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'


class AclSecureCluster:
    def __init__(self, cluster, metrics_port: int) -> None:
        self.secure = cluster
        self.metrics_port = metrics_port
        self.bootstrap = cluster.sasl_bootstrap
        self.ca = cluster.ca
        self.admin = AdminClient(cluster.confluent())
        self.topic = "acl-" + uuid.uuid4().hex[:8]

    def grant(self, principal: str, resource_type, name: str, *operations, host: str = "*",
              permission=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL) -> list:
        bindings = [AclBinding(resource_type, name, pattern, principal, host, op, permission) for op in operations]
        for future in self.admin.create_acls(bindings, request_timeout=WAIT_S).values():
            future.result()
        return bindings

    def revoke(self, binding) -> None:
        matching = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                                    binding.host, binding.operation, binding.permission_type)
        assert self.admin.delete_acls([matching], request_timeout=WAIT_S)[matching].result() == [binding]

    def confluent(self, user: str, **extra) -> dict:
        mechanism = "SCRAM-SHA-512" if user == "bob" else "SCRAM-SHA-256"
        return self.secure.confluent(user, f"{user}-secret", mechanism, **extra)

    def metrics(self) -> dict[str, float]:
        """The SASL_SSL listener's socket-server counters from /metrics."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        prefix = "kafka_server_socket_server_metrics_"
        return {line.split("{")[0][len(prefix):].removesuffix("_total"): float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith(prefix) and 'listener="SASL_SSL"' in line}


@pytest.fixture(scope="module")
def acl_secure(zookeeper, tmp_path_factory):
    metrics_port = reserve_free_port()
    with secure_cluster(tmp_path_factory, zookeeper, "secure-acls", brokers=1, acls=True, overrides={
            "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS),
            "metrics.port": str(metrics_port), "metrics.snapshot.interval.ms": "200"}) as cluster:
        yield from _with_users_and_grants(cluster, metrics_port)


def _with_users_and_grants(cluster, metrics_port: int):
    """carol (no grants), the module's topic, alice's and bob's ACLs; the admin handle dropped
    before the cluster stops."""
    c = None
    try:
        c = AclSecureCluster(cluster, metrics_port)
        upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"carol-secret")
        c.admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S)["carol"].result()
        c.admin.create_topics([NewTopic(c.topic, 1, 1)], request_timeout=WAIT_S)[c.topic].result()
        c.grant("User:alice", ResourceType.TOPIC, c.topic, AclOperation.WRITE, AclOperation.READ,
                AclOperation.DESCRIBE)
        c.grant("User:alice", ResourceType.GROUP, "alice-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
        c.grant("User:bob", ResourceType.TOPIC, c.topic, AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
        yield c
    finally:
        if c is not None:
            c.admin = None  # librdkafka's handle goes before the broker (no reconnect noise)


def _until(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _confluent_produce(config: dict, topic: str, values: list[bytes]) -> list:
    """Delivery error codes (None: delivered)."""
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": 10000, "enable.idempotence": False})
    codes = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: codes.append(err and err.code()))
    assert producer.flush(WAIT_S) == 0
    return codes


# ------------------------------------------------------------------------------- each client

def test_confluent_kafka_allowed_and_denied(acl_secure):
    c = acl_secure
    assert _until(lambda: _confluent_produce(c.confluent("alice"), c.topic, [b"ck-alice"]) == [None],
                  "alice's WRITE")
    assert _confluent_produce(c.confluent("carol"), c.topic, [b"ck-carol"]) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_kafka_python_allowed_and_denied(acl_secure):
    kafka = pytest.importorskip("kafka")
    from kafka.errors import TopicAuthorizationFailedError
    c = acl_secure

    def settings(user: str) -> dict:
        return dict(bootstrap_servers=c.bootstrap, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                    sasl_plain_username=user, sasl_plain_password=f"{user}-secret", ssl_cafile=c.ca)

    producer = kafka.KafkaProducer(acks="all", **settings("alice"))
    try:
        producer.send(c.topic, b"kp-alice").get(timeout=WAIT_S)
    finally:
        producer.close()
    producer = kafka.KafkaProducer(acks="all", max_block_ms=5000, **settings("carol"))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(c.topic, b"kp-carol").get(timeout=WAIT_S)
    finally:
        producer.close()


def test_kafka_java_tools_allowed_and_denied(acl_secure, tmp_path):
    """kafka-console-consumer as bob (SCRAM-SHA-512; READ granted) reads the topic and, running
    past his 2 s session lifetime, the Java client re-authenticates (KIP-368), counted by the
    broker; kafka-console-producer as carol is refused: Kafka's TopicAuthorizationException."""
    from broker.tools.kafka_peer import run_kafka_tool
    c = acl_secure
    assert _confluent_produce(c.confluent("alice"), c.topic, [b"for-java"]) == [None]

    def properties(user: str, mechanism: str = "SCRAM-SHA-256"):
        path = tmp_path / f"{user}.properties"
        path.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={c.ca}\n"
                        f"sasl.mechanism={mechanism}\nsasl.jaas.config={SCRAM_JAAS.format(user, user + '-secret')}\n")
        return str(path)

    before = c.metrics().get("successful_reauthentication", 0)
    consumed = run_kafka_tool("kafka-console-consumer", [  # assigned (no group join): ends 4 s after the last record
        "--bootstrap-server", c.bootstrap, "--topic", c.topic, "--partition", "0", "--offset", "earliest",
        "--consumer.config", properties("bob", "SCRAM-SHA-512"), "--timeout-ms", "4000"])
    assert "for-java" in consumed.stdout.decode().splitlines(), consumed.stderr.decode()[-2000:]
    assert "AuthorizationException" not in consumed.stderr.decode(), consumed.stderr.decode()[-2000:]
    _until(lambda: c.metrics().get("successful_reauthentication", 0) >= before + 1,
           "the Java consumer's re-authentication counted")
    produced = run_kafka_tool("kafka-console-producer", [
        "--bootstrap-server", c.bootstrap, "--topic", c.topic, "--producer.config", properties("carol")],
        input=b"from-carol\n")
    assert f"Not authorized to access topics: [{c.topic}]" in produced.stderr.decode()


def test_pylog_client_allowed_and_denied(acl_secure):
    """pylog's producer with Kafka's property names: alice's send is acknowledged, carol's fails
    with TOPIC_AUTHORIZATION_FAILED (29)."""
    from broker.client import KafkaError as PylogKafkaError, Producer
    from broker.client.properties import producer_options_from_properties
    c = acl_secure

    def send(user: str):
        props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                 "ssl.truststore.location": c.ca, "sasl.jaas.config": SCRAM_JAAS.format(user, f"{user}-secret"),
                 "enable.idempotence": "false", "delivery.timeout.ms": "5000", "acks": "1"}
        with Producer(c.bootstrap, **producer_options_from_properties(props)) as producer:
            return producer.send(c.topic, f"pylog-{user}".encode()).get(timeout_ms=10000)

    assert send("alice").offset >= 0
    with pytest.raises(PylogKafkaError) as refused:
        send("carol")
    assert refused.value.code == KafkaError.TOPIC_AUTHORIZATION_FAILED



def test_pylog_client_reauthenticates_on_the_same_connection(acl_secure):
    """pylog's producer as bob (SCRAM-SHA-512, 2 s sessions) sends one record at a time for more
    than three lifetimes: every send is acknowledged, the connection object and its socket stay the
    same throughout (renewed in place, never closed by the broker and reconnected), and the
    broker counts at least three successful re-authentications."""
    from broker.client import Producer
    from broker.client.properties import producer_options_from_properties
    c = acl_secure
    before = c.metrics().get("successful_reauthentication", 0)
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "ssl.truststore.location": c.ca, "sasl.jaas.config": SCRAM_JAAS.format("bob", "bob-secret"),
             "enable.idempotence": "false", "delivery.timeout.ms": "10000", "acks": "1", "linger.ms": "0"}
    with Producer(c.bootstrap, **producer_options_from_properties(props)) as producer:
        connections = producer._cluster._connections
        producer.send(c.topic, b"bob-0").get(timeout_ms=10000)
        sockets = {key: (conn, conn._sock) for key, conn in connections.items() if conn._sock is not None}
        assert sockets
        opened, sent = time.monotonic(), 1

        def renewed_three_times() -> bool:
            nonlocal sent
            assert producer.send(c.topic, b"bob-%d" % sent).get(timeout_ms=10000).offset >= 0
            sent += 1
            for key, (conn, sock) in sockets.items():
                assert connections[key] is conn and conn._sock is sock, f"connection {key} was replaced"
            time.sleep(0.1)  # a paced producer: each send finds nothing in flight
            return (time.monotonic() - opened > 3 * REAUTH_MS / 1000
                    and c.metrics()["successful_reauthentication"] - before >= 3)
        _until(renewed_three_times, "three re-authentications by pylog's producer", timeout_s=30)


def test_spark_source_planning_refuses_a_topic_it_may_not_describe(acl_secure):
    """The Spark source's driver (no Spark needed): carol's subscribe names a topic her listing
    hides; planning fails with TOPIC_AUTHORIZATION_FAILED as Kafka's consumer fails with
    TopicAuthorizationException, instead of reading an empty topic. alice's plan has the partition."""
    from broker.client import KafkaError as PylogKafkaError
    from spark_log.driver import plan_batch_read
    from spark_log.options import BATCH, parse_source_options
    c = acl_secure

    def plan(user: str):
        return plan_batch_read(parse_source_options({
            "kafka.bootstrap.servers": c.bootstrap, "subscribe": c.topic, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.ssl.truststore.location": c.ca,
            "kafka.sasl.jaas.config": SCRAM_JAAS.format(user, f"{user}-secret"), "fetchOffset.numRetries": "0"},
            BATCH))

    assert _confluent_produce(c.confluent("alice"), c.topic, [b"for-spark"]) == [None]
    assert [(r.topic, r.partition) for r in plan("alice").ranges] == [(c.topic, 0)]
    with pytest.raises(PylogKafkaError) as refused:
        plan("carol")
    assert refused.value.code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert str(refused.value).endswith(f"Not authorized to access topics: [{c.topic}]")

# ------------------------------------------------------------------------------- host ACLs

def test_host_acls_deny_the_connections_address(acl_secure):
    """Every connection here comes from 127.0.0.1: a DENY for another host leaves alice's ALLOW
    for ``*`` in force, a DENY for 127.0.0.1 refuses her (deny wins), and removing it lets her
    write again."""
    c = acl_secure
    topic = "hosts-" + uuid.uuid4().hex[:8]
    c.admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=WAIT_S)[topic].result()
    c.grant("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE, AclOperation.DESCRIBE)
    c.grant("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE, host="10.9.9.9",
            permission=AclPermissionType.DENY)
    alice = c.confluent("alice")
    assert _until(lambda: _confluent_produce(alice, topic, [b"h1"]) == [None], "ALLOW for host *")
    [deny] = c.grant("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE, host="127.0.0.1",
                     permission=AclPermissionType.DENY)
    assert _until(lambda: _confluent_produce(alice, topic, [b"h2"]) == [KafkaError.TOPIC_AUTHORIZATION_FAILED],
                  "DENY for host 127.0.0.1")
    c.revoke(deny)
    assert _until(lambda: _confluent_produce(alice, topic, [b"h3"]) == [None], "the DENY's removal")
    consumer = confluent_kafka.Consumer(c.secure.confluent(**{"group.id": "admin-check"}))  # a super user
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        seen = []
        _until(lambda: seen.extend(m.value() for m in consumer.consume(10, 0.2) if m.error() is None)
               or b"h3" in seen, "the written records")
    finally:
        consumer.close()
    assert b"h2" not in seen  # the denied produce wrote nothing


# ---------------------------------------------------------------------- KIP-368 re-authentication

def test_librdkafka_reauthenticates_and_an_expired_session_is_closed(acl_secure):
    """bob's SCRAM-SHA-512 sessions last REAUTH_MS: librdkafka (>= 2.2) re-authenticates on its
    connections and keeps producing through several renewals, none closed by the broker; a
    connection that does not re-authenticate is closed at its next request after the lifetime
    (Kafka's "Disconnecting expired channel"), and the broker counts both."""
    import socket
    import ssl

    from broker.security.sasl_client import SaslClient
    c = acl_secure
    before = c.metrics()
    context = ssl.create_default_context(cafile=c.ca)
    idle = context.wrap_socket(socket.create_connection(("127.0.0.1", c.secure.sasl_ports[0]), timeout=10),
                               server_hostname="localhost")
    try:
        lifetime = SaslClient("SCRAM-SHA-512", "bob", "bob-secret").exchange(lambda k, v, b: _request(idle, k, v, b), 2)
        assert lifetime == REAUTH_MS
        opened = time.monotonic()
        producer = confluent_kafka.Producer({**c.confluent("bob"), "enable.idempotence": False,
                                             "message.timeout.ms": 10000, "linger.ms": 0})
        codes, sent = [], 0

        def renewed_three_times() -> bool:
            nonlocal sent
            producer.produce(c.topic, b"reauth-%d" % sent, on_delivery=lambda err, _m: codes.append(err and err.code()))
            sent += 1
            producer.poll(0.2)
            now = c.metrics()
            return now["successful_reauthentication"] - before.get("successful_reauthentication", 0) >= 3
        _until(renewed_three_times, "three re-authentications", timeout_s=30)
        assert producer.flush(WAIT_S) == 0
        assert codes == [None] * sent and sent > 3
        # (not asserted: that no producer connection was killed - at load 20 a request sent just
        # before the renewal can be read after the lifetime, and Kafka closes it then too)
        assert time.monotonic() - opened > REAUTH_MS / 1000  # the idle connection's session is over
        assert _closed_after_request(idle)
        _until(lambda: c.metrics()["expired_connections_killed_count"]
               > before.get("expired_connections_killed_count", 0), "the expired connection counted")
    finally:
        idle.close()


def _request(sock, api_key: int, version: int, body: dict):
    """One request on a raw (TLS) socket, its decoded answer; ConnectionError when closed."""
    frame = encode_request(api_key, version, 7, "reauth-test", body)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def _closed_after_request(sock) -> bool:
    try:
        _request(sock, 3, 1, {"topics": []})  # Metadata v1
    except (ConnectionError, OSError):
        return True
    return False
