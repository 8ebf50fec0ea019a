"""Listeners, TLS and SASL (issue 17 part 1) against real broker processes and real clients.

One two-broker cluster for the module. Each broker has three listeners: PLAINTEXT (the fixtures'
readiness probe), SASL_SSL (clients; also ``inter.broker.listener.name``, so replication and the
controller's requests run over TLS + SASL/PLAIN as the broker's admin user) and SSL with
``ssl.client.auth=required``. SCRAM users are added the way operators add them, through
AlterUserScramCredentials (confluent-kafka's admin, logged in as the JAAS admin over PLAIN).
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid
from pathlib import Path

import pytest

from broker.wire import decode_response, encode_request
from secure_cluster import AUTH_TIMEOUT_MS, secure_cluster

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ScramMechanism  # noqa: E402


@pytest.fixture(scope="module")
def secure(zookeeper, tmp_path_factory):
    with secure_cluster(tmp_path_factory, zookeeper, "secure") as cluster:
        yield cluster


# ------------------------------------------------------------------------------- raw protocol

def _connect(port: int, tls: bool = True, cert: Path | None = None, ca: str | None = None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if not tls:
        return sock
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(str(cert))
    return context.wrap_socket(sock, server_hostname="localhost")


def _request(sock: socket.socket, api_key: int, version: int, body: dict, correlation_id: int = 7):
    frame = encode_request(api_key, version, correlation_id, "security-test", body)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


# ------------------------------------------------------------------------------------- tests

def test_confluent_scram_sha256_produce_consume_over_sasl_ssl(secure):
    """alice (SCRAM-SHA-256, added through AlterUserScramCredentials) produces acks=all to an RF-2
    topic, whose replication runs over the SASL_SSL inter-broker listener, and reads it back."""
    config = secure.confluent("alice", "alice-secret", "SCRAM-SHA-256")
    producer = confluent_kafka.Producer({**config, "acks": "all"})
    for i in range(20):
        producer.produce(secure.topic, value=b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": "g-" + uuid.uuid4().hex[:6],
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([secure.topic])
    seen, deadline = set(), time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value())
    consumer.close()
    assert seen == {b"v%d" % i for i in range(20)}
    admin = AdminClient(secure.confluent())
    described = admin.describe_user_scram_credentials(["alice", "bob"])
    infos = {user: [(c.mechanism, c.iterations) for c in f.result().scram_credential_infos]
             for user, f in described.items()}
    assert infos == {"alice": [(ScramMechanism.SCRAM_SHA_256, 4096)], "bob": [(ScramMechanism.SCRAM_SHA_512, 8192)]}


def test_kafka_python_scram_sha512(secure):
    kafka = pytest.importorskip("kafka")
    settings = dict(bootstrap_servers=secure.sasl_bootstrap, security_protocol="SASL_SSL",
                    sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret",
                    ssl_cafile=secure.ca)
    producer = kafka.KafkaProducer(acks="all", **settings)
    producer.send(secure.topic, b"from-kafka-python", partition=0).get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer(**settings, auto_offset_reset="earliest")
    consumer.assign([kafka.TopicPartition(secure.topic, 0)])
    seen, deadline = set(), time.monotonic() + 30
    while b"from-kafka-python" not in seen and time.monotonic() < deadline:
        seen |= {m.value for batch in consumer.poll(timeout_ms=500).values() for m in batch}
    consumer.close()
    assert b"from-kafka-python" in seen


def test_pylog_client_scram_over_sasl_ssl(secure):
    """pylog's producer and group consumer with Kafka's property names (TLS + SCRAM-SHA-512)."""
    from broker.client.consumer import Consumer
    from broker.client.producer import Producer
    from broker.client.properties import consumer_options_from_properties, producer_options_from_properties
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "ssl.truststore.location": secure.ca,
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="bob" password="bob-secret";'}
    with Producer(secure.sasl_bootstrap, **producer_options_from_properties({**props, "acks": "all"})) as producer:
        for i in range(50):
            producer.send(secure.topic, value=b"pylog-%d" % i)
        producer.flush(30_000)
    options = consumer_options_from_properties({**props, "group.id": "pylog-" + uuid.uuid4().hex[:6],
                                                "auto.offset.reset": "earliest"})
    with Consumer(secure.sasl_bootstrap, **options) as consumer:
        consumer.subscribe([secure.topic])
        seen, deadline = set(), time.monotonic() + 30
        while len(seen) < 50 and time.monotonic() < deadline:
            seen |= {r.value for r in consumer.poll(500) if r.value.startswith(b"pylog-")}
    assert seen == {b"pylog-%d" % i for i in range(50)}


def test_pylog_client_wrong_password_is_kafka_error_58(secure):
    from broker.client.admin import AdminClient as PylogAdmin
    from broker.client.config import ClientConfig
    from broker.client.errors import KafkaError
    from broker.client.security import client_security
    security = client_security({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                                "sasl.username": "alice", "sasl.password": "alice-guess", "ssl.ca.location": secure.ca})
    with pytest.raises(KafkaError) as failed:
        with PylogAdmin(secure.sasl_bootstrap, config=ClientConfig(security=security)) as admin:
            admin.list_topics()
    assert failed.value.code == 58 and "invalid credentials" in str(failed.value)


@pytest.mark.parametrize("user, password, mechanism", [
    ("alice", "alice-guess", "SCRAM-SHA-256"),
    ("nobody", "nobody-guess", "SCRAM-SHA-256"),
    ("admin", "admin-guess", "PLAIN"),
])
def test_failed_login_is_sasl_authentication_failed_then_closed(secure, user, password, mechanism):
    from broker.security.sasl_client import SaslAuthenticationError, SaslClient
    with _connect(secure.sasl_ports[0], ca=secure.ca) as sock:
        with pytest.raises(SaslAuthenticationError) as failed:
            SaslClient(mechanism, user, password).exchange(lambda k, v, b: _request(sock, k, v, b), 2)
        assert failed.value.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert "password" not in str(failed.value).lower() or "username or password" in str(failed.value)
        assert _closed(sock)
    log = secure.brokers[0].log_path.read_text()
    assert "alice-secret" not in log and "admin-secret" not in log and password not in log


def test_refusals_leave_other_clients_unaffected(secure):
    # an unsupported mechanism: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, then closed
    with _connect(secure.sasl_ports[0], ca=secure.ca) as sock:
        answer = _request(sock, 17, 1, {"mechanism": "GSSAPI"})
        assert (answer.error_code, answer.mechanisms) == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        assert _closed(sock)
    # a request before authentication: the connection is closed without an answer
    with _connect(secure.sasl_ports[0], ca=secure.ca) as sock:
        assert _request(sock, 18, 0, {}).error_code == 0  # ApiVersions is allowed first
        frame = encode_request(3, 1, 8, "early", {"topics": []})
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert _closed(sock)
    # a plaintext client on a TLS port, a TLS client on the plaintext port
    with _connect(secure.sasl_ports[0], tls=False) as sock:
        frame = encode_request(18, 0, 1, "plain", {})
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert _closed(sock)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _connect(secure.brokers[0].port, ca=secure.ca)
    # an untrusted client certificate on the client-auth listener; no certificate at all
    for cert in (secure.untrusted_pem, None):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            sock = _connect(secure.ssl_ports[0], cert=cert, ca=secure.ca)
            _request(sock, 18, 0, {})  # TLS 1.3: the refusal arrives with the first read
    # a trusted client certificate works on that listener
    with _connect(secure.ssl_ports[0], cert=secure.client_pem, ca=secure.ca) as sock:
        assert _request(sock, 18, 0, {}).error_code == 0
    # a server certificate the client does not trust
    with pytest.raises(ssl.SSLCertVerificationError):
        _connect(secure.sasl_ports[0], ca=str(secure.untrusted_pem))
    # slowloris: TLS done, no SASL exchange: closed after authentication.timeout.ms
    with _connect(secure.sasl_ports[0], ca=secure.ca) as sock:
        started = time.monotonic()
        assert _closed(sock)
        assert AUTH_TIMEOUT_MS / 1000 * 0.8 <= time.monotonic() - started < AUTH_TIMEOUT_MS / 1000 + 5
    # and a good client is still served
    producer = confluent_kafka.Producer(secure.confluent("alice", "alice-secret", "SCRAM-SHA-256"))
    producer.produce(secure.topic, b"after-refusals")
    assert producer.flush(30) == 0


def test_kafka_java_tools_add_a_scram_user_and_produce_as_it(secure, tmp_path):
    """kafka-configs adds carol (AlterUserScramCredentials, as admin over SASL_SSL/PLAIN), then
    kafka-console-producer logs in as carol with SCRAM-SHA-256 from a client config file."""
    from broker.tools.kafka_peer import run_kafka_tool
    common = (f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location={secure.ca}\n")
    admin = tmp_path / "admin.properties"
    admin.write_text(common + "sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain."
                              "PlainLoginModule required username=\"admin\" password=\"admin-secret\";\n")
    added = run_kafka_tool("kafka-configs", ["--bootstrap-server", secure.sasl_bootstrap, "--command-config",
                                             str(admin), "--alter", "--entity-type", "users", "--entity-name",
                                             "carol", "--add-config", "SCRAM-SHA-256=[iterations=4096,password=carol-secret]"])
    assert added.returncode == 0, added.stderr.decode()[-2000:]
    carol = tmp_path / "carol.properties"
    carol.write_text(common + "sasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=org.apache.kafka.common.security."
                              "scram.ScramLoginModule required username=\"carol\" password=\"carol-secret\";\n")
    produced = run_kafka_tool("kafka-console-producer", ["--bootstrap-server", secure.sasl_bootstrap, "--topic",
                                                         secure.topic, "--producer.config", str(carol)],
                              input=b"from-java-1\nfrom-java-2\n")
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    consumer = confluent_kafka.Consumer(secure.confluent("carol", "carol-secret", "SCRAM-SHA-256",
                                                         **{"group.id": "java-check", "auto.offset.reset": "earliest"}))
    consumer.subscribe([secure.topic])
    seen, deadline = set(), time.monotonic() + 30
    while not {b"from-java-1", b"from-java-2"} <= seen and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value())
    consumer.close()
    assert {b"from-java-1", b"from-java-2"} <= seen


def test_pylog_configs_users_add_describe_delete(secure, tmp_path):
    """pylog configs --entity-type users with a --command-config file, as kafka-configs is used."""
    import argparse
    import io

    from broker.tools.configs import add_configs_parser, run_configs
    admin = tmp_path / "admin.properties"
    admin.write_text(f"security.protocol=SASL_SSL\nssl.truststore.location={secure.ca}\nsasl.mechanism=PLAIN\n"
                     f"sasl.username=admin\nsasl.password=admin-secret\n")
    parser = add_configs_parser(argparse.ArgumentParser().add_subparsers())

    def configs(*args: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        code = run_configs(parser.parse_args(["--bootstrap-server", secure.sasl_bootstrap, "--command-config",
                                              str(admin), "--entity-type", "users", *args]), out, err)
        return code, out.getvalue() + err.getvalue()

    assert configs("--alter", "--entity-name", "erin", "--add-config",
                   "SCRAM-SHA-256=[iterations=8192,password=erin-secret],SCRAM-SHA-512=[password=erin-secret]") == (
        0, "Completed updating config for user erin.\n")
    assert configs("--describe", "--entity-name", "erin") == (
        0, "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-256=iterations=8192, "
           "SCRAM-SHA-512=iterations=4096\n")
    producer = confluent_kafka.Producer(secure.confluent("erin", "erin-secret", "SCRAM-SHA-512"))
    producer.produce(secure.topic, b"from-erin")
    assert producer.flush(30) == 0
    assert configs("--alter", "--entity-name", "erin", "--delete-config", "SCRAM-SHA-512")[0] == 0
    code, text = configs("--alter", "--entity-name", "erin", "--delete-config", "SCRAM-SHA-512")
    assert code == 1 and "RESOURCE_NOT_FOUND (91)" in text and "erin-secret" not in text


def test_spark_exactly_once_driver_side_over_sasl_ssl(secure, tmp_path):
    """The exactly-once Spark sink's driver side without Spark (as bench/spark_eos_commit.py
    drives it): a prepared transaction committed by ``Committer.commit`` and one an intent lists
    rolled forward by ``python -m spark_log.recover --command-config``, over SASL_SSL + SCRAM
    only (these listeners advertise no other): every client of the path speaks it."""
    from broker.client.config import ClientConfig
    from broker.client.consumer import Consumer
    from broker.client.producer import Producer
    from spark_log import recover, transactions
    from spark_log.options import parse_sink_options
    from spark_log.sink import _txn_settings

    tag = uuid.uuid4().hex[:8]
    options = parse_sink_options({
        "kafka.bootstrap.servers": secure.sasl_bootstrap, "topic": secure.topic,
        "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": f"eos-{tag}",
        "commitLogTopic": f"commits-{tag}", "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.ssl.truststore.location": secure.ca,
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                  'username="bob" password="bob-secret";'})
    config = options.producer["config"]  # what the sink's tasks get

    def prepare(tid: str, partition: int):
        with Producer(secure.sasl_bootstrap, transactional_id=tid, config=config) as producer:
            producer.init_transactions()
            producer.begin_transaction()
            for i in range(20):
                producer.send(secure.topic, b"%s-%d" % (tid.encode(), i), partition=partition)
            return producer.prepare_transaction()

    stream = _txn_settings(options, f"eos-{tag}")
    job = _txn_settings(options, f"{recover.BATCH_PREFIX_ROOT}{tag}")
    committed = prepare(transactions.transactional_id(stream.prefix, 0, 0, 0, 1), 0)
    rolled = prepare(transactions.transactional_id(job.prefix, 0, 1, 0, 2), 1)
    try:
        transactions.Committer(stream).commit([committed], 0)
        dying = transactions.Committer(job)  # a batch job's driver that dies after its intent
        dying._log(transactions._clients_for(job), {"batch": 0, "state": "intent", "job": "batch",
                                                    "transactions": [rolled.to_dict()]})
        props = tmp_path / "client.properties"
        props.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=bob\n"
                         f"sasl.password=bob-secret\nssl.truststore.location={secure.ca}\n")
        assert recover.main(["--bootstrap-servers", secure.sasl_bootstrap, "--commit-log-topic",
                             job.commit_log_topic, "--command-config", str(props)]) == 0
        assert transactions.read_commit_log(job) == {stream.prefix: {"batch": 0, "state": "intent", "transactions":
                                                                     [committed.to_dict()]}, job.prefix: None}
    finally:
        for key in [k for k in transactions._clients if k[0] == secure.sasl_bootstrap]:
            transactions._clients.pop(key).close()
    wanted = {b"%s-%d" % (p.transactional_id.encode(), i) for p in (committed, rolled) for i in range(20)}
    with Consumer(secure.sasl_bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                  config=ClientConfig(security=config.security)) as consumer:
        consumer.assign([(secure.topic, 0), (secure.topic, 1)])
        seen, deadline = set(), time.monotonic() + 30  # EndTxn is answered before the markers land
        while not wanted <= seen and time.monotonic() < deadline:
            seen |= {r.value for r in consumer.poll(500) if r.value and r.value.startswith(b"eos-")
                     or r.value and r.value.startswith(recover.BATCH_PREFIX_ROOT.encode())}
    assert seen == wanted
