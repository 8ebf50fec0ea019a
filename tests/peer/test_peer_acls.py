"""ACLs on Apache Kafka (KRaft, StandardAuthorizer) and on pylog (issue 17 part 2): the same ACL
set, made with Kafka's own ``kafka-acls`` on both, then the same client requests as a named
principal; what the client sees (error codes, visible topics, records) and ``kafka-acls --list``
must agree.

Each peer has two listeners: PLAINTEXT, whose User:ANONYMOUS is a super user (the tools, the
fixtures, a KRaft node's own requests), and SASL_PLAINTEXT with PLAIN users, where ``admin`` is a
super user by name and ``alice`` an ordinary principal. One pair of peers for the module (their own, with the authorizer on).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from broker.tools.kafka_peer import ApacheKafkaCluster, run_kafka_tool
from broker.tools.zookeeper import reserve_free_port
from peer_support import COMMON_BROKER_SETTINGS, internal_topic_settings

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
WAIT_S = 20


def _security(plain_port: int, sasl_port: int, extra_listeners: str = "") -> dict[str, str]:
    return {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}{extra_listeners}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
    }


class SecuredPeer:
    def __init__(self, name: str, plain: str, sasl: str) -> None:
        self.name, self.plain, self.sasl = name, plain, sasl

    def alice(self) -> dict:
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": "alice", "sasl.password": "alice-secret"}


@pytest.fixture(scope="module")
def secured_peers(zookeeper, tmp_path_factory):
    integration = sys.modules["pylog_integration_fixtures"]
    kafka = ApacheKafkaCluster(tmp_path_factory.mktemp("kafka-acls"), brokers=1, overrides=COMMON_BROKER_SETTINGS)
    node, kafka_sasl = kafka.nodes[0], reserve_free_port()
    kafka.overrides.update({
        **_security(node.client_port, kafka_sasl, f",CONTROLLER://127.0.0.1:{node.controller_port}"),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"})
    factory = integration.ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("pylog-acls"))
    try:
        kafka.start()
        plain, sasl = reserve_free_port(), reserve_free_port()
        pylog = _start_pylog(integration, factory, tmp_path_factory.mktemp("pylog-acls-broker"), plain, sasl)
        yield (SecuredPeer("kafka", kafka.bootstrap, f"127.0.0.1:{kafka_sasl}"),
               SecuredPeer("pylog", f"127.0.0.1:{plain}", f"127.0.0.1:{sasl}"))
        pylog.stop()
    finally:
        kafka.stop()
        factory.close()


def _start_pylog(integration, factory, root, plain: int, sasl: int):
    """One pylog broker with the same two listeners (ClusterFactory picks one listener itself)."""
    chroot = f"{factory._zookeeper_connect}/pylog-acls-{uuid.uuid4().hex[:6]}"
    props = {"broker.id": "1", "log.dirs": str(root / "data"), "zookeeper.connect": chroot,
             "zookeeper.session.timeout.ms": "6000", "listener.security.protocol.map":
             "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT", "inter.broker.listener.name": "PLAINTEXT",
             **COMMON_BROKER_SETTINGS, **internal_topic_settings(1), **_security(plain, sasl)}
    config = root / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    broker = integration.BrokerProcess(1, plain, config, root / "broker.log", root / "data")
    broker.start()
    integration.wait_for_controller([broker])
    return broker


def _acls(peer: SecuredPeer, *args: str) -> str:
    result = run_kafka_tool("kafka-acls", ["--bootstrap-server", peer.plain, *args])
    assert result.returncode == 0, (peer.name, result.stderr.decode(errors="replace")[-2000:])
    return result.stdout.decode()


def _blocks(listing: str) -> set[tuple]:
    """``kafka-acls --list`` as a set of (resource, sorted entries): Kafka prints resources and
    entries in hash order."""
    out = set()
    for block in listing.split("Current ACLs for resource ")[1:]:
        head, _, body = block.partition("`:")
        out.add((head + "`", tuple(sorted(line.strip() for line in body.splitlines() if line.strip()))))
    return out


def _scenario(peer: SecuredPeer, names: dict[str, str]) -> dict:
    """Make the ACL set with kafka-acls, then act as alice; returns what alice saw."""
    ok, no, hidden, group_ok, group_no, txn_ok, txn_no = (names[k] for k in (
        "ok", "no", "hidden", "group_ok", "group_no", "txn_ok", "txn_no"))
    admin = AdminClient({"bootstrap.servers": peer.plain})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (ok, no, hidden)]).values():
        future.result(timeout=WAIT_S)
    alice = ("--allow-principal", "User:alice")
    # three kafka-acls runs (each is a JVM start, seconds on a loaded box)
    _acls(peer, "--add", *alice, "--producer", "--idempotent", "--consumer", "--topic", ok, "--group", group_ok)
    _acls(peer, "--add", *alice, "--deny-principal", "User:alice", "--operation", "Describe", "--operation", "Read",
          "--topic", hidden, "--group", group_no)  # allowed and denied: the DENY wins
    _acls(peer, "--add", *alice, "--operation", "Write", "--transactional-id", txn_ok[:6],
          "--resource-pattern-type", "prefixed")
    seen = {"list": _blocks(_acls(peer, "--list"))}
    seen["list_topic"] = _blocks(_acls(peer, "--list", "--topic", ok))
    # pylog's own tool prints what kafka-acls prints (entries sorted; Kafka's are in hash order)
    ours = subprocess.run([sys.executable, "-m", "broker.cli", "acls", "--list", "--bootstrap-server", peer.plain,
                           "--topic", ok], capture_output=True, timeout=60)
    assert ours.returncode == 0, ours.stderr.decode(errors="replace")
    seen["pylog_acls_list_topic"] = _blocks(ours.stdout.decode())
    # as alice (--command-config, SASL), who may not DESCRIBE the cluster: both tools are refused
    alice_config = names["tmp"] / f"alice-{peer.name}.properties"
    alice_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                            f"sasl.jaas.config={JAAS.split(' username')[0]} username=\"alice\" password=\"alice-secret\";\n")
    theirs = run_kafka_tool("kafka-acls", ["--bootstrap-server", peer.sasl, "--command-config", str(alice_config),
                                           "--list"])
    ours = subprocess.run([sys.executable, "-m", "broker.cli", "acls", "--list", "--bootstrap-server", peer.sasl,
                           "--command-config", str(alice_config)], capture_output=True, timeout=60)
    seen["alice_kafka_acls_refused"] = b"ClusterAuthorization" in theirs.stdout + theirs.stderr
    # admin, a super user by name (SASL), lists what ANONYMOUS (PLAINTEXT) lists
    admin_config = names["tmp"] / f"admin-{peer.name}.properties"
    admin_config.write_text(alice_config.read_text().replace('"alice"', '"admin"').replace("alice-secret", "admin-secret"))
    as_admin = subprocess.run([sys.executable, "-m", "broker.cli", "acls", "--list", "--bootstrap-server", peer.sasl,
                               "--command-config", str(admin_config)], capture_output=True, timeout=60)
    seen["admin_lists_all"] = _blocks(as_admin.stdout.decode()) == seen["list"]
    seen["alice_pylog_acls_refused"] = (ours.returncode, b"CLUSTER_AUTHORIZATION_FAILED" in ours.stderr)

    def produce(topic):
        producer = confluent_kafka.Producer({**peer.alice(), "message.timeout.ms": 10000})
        errors = []
        producer.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err and err.code()))
        producer.flush(WAIT_S)
        return errors
    # an ACL reaches a Kafka broker through the metadata log: retry until the first one is in
    deadline = time.monotonic() + WAIT_S
    while (answer := produce(ok)) != [None] and time.monotonic() < deadline:
        time.sleep(0.2)
    seen["produce_ok"], seen["produce_no"] = answer, produce(no)

    listed = AdminClient(peer.alice()).list_topics(timeout=WAIT_S).topics
    seen["visible"] = sorted(t for t in listed if t in (ok, no, hidden))
    named = AdminClient(peer.alice()).list_topics(topic=hidden, timeout=WAIT_S).topics[hidden]
    seen["hidden_error"] = named.error.code() if named.error else None

    def consume(topic, group):
        consumer = confluent_kafka.Consumer({**peer.alice(), "group.id": group, "auto.offset.reset": "earliest",
                                             "session.timeout.ms": 6000, "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            end = time.monotonic() + WAIT_S
            while time.monotonic() < end:
                message = consumer.poll(0.2)
                if message is not None:
                    return message.error().code() if message.error() else message.value()
            return "nothing"
        finally:
            consumer.close()
    seen["consume_ok"] = consume(ok, group_ok)
    seen["consume_group_no"] = consume(ok, group_no)
    seen["consume_topic_no"] = consume(no, group_ok)

    def init(txn_id):
        producer = confluent_kafka.Producer({**peer.alice(), "transactional.id": txn_id})
        try:
            producer.init_transactions(WAIT_S)
            return None
        except KafkaException as exc:
            return exc.args[0].code()
    seen["txn_ok"], seen["txn_no"] = init(txn_ok), init(txn_no)
    return seen


def test_same_acls_same_answers(secured_peers, tmp_path):
    tag = uuid.uuid4().hex[:6]
    names = {"ok": f"acl-ok-{tag}", "no": f"acl-no-{tag}", "hidden": f"acl-hidden-{tag}",
             "group_ok": f"g-ok-{tag}", "group_no": f"g-no-{tag}", "txn_ok": f"tx{tag}-1", "txn_no": f"other-{tag}", "tmp": tmp_path}
    # The two peers' scenarios are independent (own clusters, own tool output files): run them side
    # by side, so one peer's waits (ACL propagation, client round trips) overlap the other's.
    with ThreadPoolExecutor(max_workers=len(secured_peers)) as pool:
        kafka, pylog = (future.result() for future in [pool.submit(_scenario, peer, names) for peer in secured_peers])
    assert kafka["produce_ok"] == [None]
    assert kafka["produce_no"] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert kafka["txn_no"] == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert kafka["pylog_acls_list_topic"] == kafka["list_topic"]  # pylog acls against Kafka prints as kafka-acls
    assert kafka["alice_kafka_acls_refused"] and kafka["alice_pylog_acls_refused"] == (2, True)
    assert kafka["admin_lists_all"]
    for key in kafka:
        assert pylog[key] == kafka[key], (key, kafka[key], pylog[key])
