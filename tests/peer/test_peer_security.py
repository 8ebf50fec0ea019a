"""SASL_SSL with SCRAM, pylog beside Apache Kafka 4.1 (issue 17): the same raw exchanges against
both, and what a client observes compared: error codes, Kafka's messages, whether the connection
is closed. One Apache Kafka node (KRaft; its SCRAM users added through AlterUserScramCredentials
as on pylog) and one pylog broker (the integration tier's secure cluster), each with its own CA's
certificates and the same JAAS lines. Both are started at once and each test's exchanges run on
both at once: each side mostly waits on its own broker.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from broker.security.sasl_client import SaslAuthenticationError, SaslClient
from broker.tools.certs import make_ca, make_certificate
from broker.tools.kafka_peer import ApacheKafkaCluster
from broker.tools.zookeeper import reserve_free_port
from broker.wire import decode_response, encode_request
from peer_support import COMMON_BROKER_SETTINGS

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from secure_cluster import ADMIN_JAAS, secure_cluster  # noqa: E402

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
REAUTH_MS = 1500
# KIP-368 for SCRAM-SHA-512 sessions only (Kafka's listener + mechanism prefix): bob's
REAUTH = {"listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS)}


@contextmanager
def kafka_secure(root: Path) -> Iterator[tuple[int, str]]:
    """One Apache Kafka node with a SASL_SSL listener (its own CA and certificate, the same
    mechanisms and JAAS lines as pylog's side) and alice and bob added as secure_cluster adds them:
    (SASL_SSL port, CA file); stopped at the end."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    certs = root / "certs"
    ca = str(make_ca(certs))
    broker_pem = make_certificate(certs, "broker", "/CN=localhost/O=kafka")
    kafka = ApacheKafkaCluster(root / "kafka", brokers=1)
    node, sasl_port = kafka.nodes[0], reserve_free_port()
    kafka.overrides = {
        **COMMON_BROKER_SETTINGS,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.client_port},CONTROLLER://127.0.0.1:{node.controller_port},"
                     f"SASL_SSL://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.client_port},SASL_SSL://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(broker_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": ca,
        **REAUTH,
    }
    kafka.start()
    try:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        upserts = [UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                                b"alice-secret"),
                   UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                                b"bob-secret")]  # as secure_cluster makes them
        for future in admin.alter_user_scram_credentials(upserts, request_timeout=30).values():
            future.result()
        yield sasl_port, ca
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def sides(zookeeper, tmp_path_factory):
    """Both secured systems, started at the same time (each start is mostly waiting: a JVM, a
    broker process, the SCRAM upserts): {name: (SASL_SSL port, CA file)}. pylog's is the
    integration tier's secure cluster (one broker here)."""
    with ExitStack() as running:
        with ThreadPoolExecutor(2) as pool:  # leaving this block waits for both starts
            kafka = pool.submit(running.enter_context, kafka_secure(tmp_path_factory.mktemp("kafka-secure")))
            pylog = pool.submit(running.enter_context, secure_cluster(tmp_path_factory, zookeeper, "pylog-secure",
                                                                      brokers=1, overrides=REAUTH))
        yield {"kafka": kafka.result(), "pylog": (pylog.result().sasl_ports[0], pylog.result().ca)}


def on_both(sides, run) -> dict:
    """``run(side)`` for both systems at once (each is waiting on its own broker): by name."""
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {name: pool.submit(run, side) for name, side in sides.items()}
        return {name: future.result() for name, future in futures.items()}


def _connect(port: int, ca: str) -> socket.socket:
    context = ssl.create_default_context(cafile=ca)
    return context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15), server_hostname="localhost")


def _request(sock, api_key: int, version: int, body: dict):
    frame = encode_request(api_key, version, 3, "peer-security", body)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _closed(sock) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError, socket.timeout):
        return True


def _login(sock, mechanism: str, user: str, password: str):
    """(error code, message) of the exchange, and whether the broker then closed the connection."""
    try:
        SaslClient(mechanism, user, password).exchange(lambda k, v, b: _request(sock, k, v, b), 2)
        return (0, None), False
    except SaslAuthenticationError as exc:
        return (exc.error_code, str(exc)), _closed(sock)


def observe(side) -> dict:
    port, ca = side
    seen = {}
    for name, (mechanism, user, password) in {
        "wrong password": ("SCRAM-SHA-256", "alice", "alice-guess"),
        "unknown user": ("SCRAM-SHA-256", "nobody", "x-guess"),
        "PLAIN wrong password": ("PLAIN", "admin", "admin-guess"),
        "SCRAM-SHA-512 without a credential": ("SCRAM-SHA-512", "alice", "alice-secret"),
    }.items():
        with _connect(port, ca) as sock:
            seen[name] = _login(sock, mechanism, user, password)
    with _connect(port, ca) as sock:
        answer = _request(sock, 17, 1, {"mechanism": "GSSAPI"})
        seen["unsupported mechanism"] = (answer.error_code, _closed(sock))
    with _connect(port, ca) as sock:
        frame = encode_request(3, 1, 9, "early", {"topics": []})
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        seen["Metadata before authentication"] = _closed(sock)
    with _connect(port, ca) as sock:
        frame = encode_request(36, 2, 9, "early", {"auth_bytes": b"x"})
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        seen["SaslAuthenticate before SaslHandshake"] = _closed(sock)
    with _connect(port, ca) as sock:
        seen["good login"] = _login(sock, "SCRAM-SHA-256", "alice", "alice-secret")
        again = _request(sock, 36, 2, {"auth_bytes": b"x"})
        seen["SaslAuthenticate after login"] = (again.error_code, again.error_message)
        handshake = _request(sock, 17, 1, {"mechanism": "SCRAM-SHA-256"})
        seen["SaslHandshake after login"] = handshake.error_code
        described = _request(sock, 50, 0, {"users": [{"name": "nobody"}, {"name": "alice"}]})
        seen["describe"] = sorted((r.user, r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
                           for r in described.results)
        altered = _request(sock, 51, 0, {"deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": [
            {"name": "weak", "mechanism": 1, "iterations": 100, "salt": b"s" * 16, "salted_password": b"p" * 32},
            {"name": "odd", "mechanism": 7, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}]})
        seen["alter"] = sorted((r.user, r.error_code, r.error_message) for r in altered.results)
    return seen


def test_sasl_ssl_scram_answers_match_apache_kafka(sides):
    seen = on_both(sides, observe)
    kafka, pylog = seen["kafka"], seen["pylog"]
    differences = {k: (kafka[k], pylog[k]) for k in kafka if kafka[k] != pylog[k]}
    assert not differences, "\n".join(f"{k}: kafka {a!r} / pylog {b!r}" for k, (a, b) in differences.items())


def test_session_lifetime_reauthentication_and_expiry_match_apache_kafka(sides):
    """KIP-368 on both (bob's SCRAM-SHA-512 sessions last REAUTH_MS): the lifetime SaslAuthenticate
    answers, a re-authentication on the same connection (SaslHandshake + SaslAuthenticate again)
    that is answered and keeps the connection serving, and a connection that did not
    re-authenticate closed at its first request after the lifetime, without an answer. Both
    systems at once: each waits out its own idle session's lifetime."""

    def login(sock) -> int:
        return SaslClient("SCRAM-SHA-512", "bob", "bob-secret").exchange(lambda k, v, b: _request(sock, k, v, b), 2)

    def sessions(side) -> dict:
        port, ca = side
        with _connect(port, ca) as idle:
            first = login(idle)
            logged_in = time.monotonic()  # the broker started counting the lifetime before this
            with _connect(port, ca) as sock:
                renewed = (login(sock), login(sock))
                served = _request(sock, 3, 1, {"topics": []}).brokers != []
            seen = {"lifetime": first, "renewed": renewed, "served after renewal": served}
            deadline = logged_in + REAUTH_MS / 1000 + 0.2  # the idle session is over after this
            while time.monotonic() < deadline:
                time.sleep(0.05)
            try:
                _request(idle, 3, 1, {"topics": []})
                seen["request after the lifetime"] = "answered"
            except (ConnectionError, OSError):
                seen["request after the lifetime"] = "closed"
        return seen

    seen = on_both(sides, sessions)
    assert seen["kafka"] == seen["pylog"] == {
        "lifetime": REAUTH_MS, "renewed": (REAUTH_MS, REAUTH_MS), "served after renewal": True,
        "request after the lifetime": "closed"}
