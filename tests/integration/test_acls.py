"""ACL authorization (issue 17 part 2) against a real broker process and real clients.

Two brokers for the module with ``authorizer.class.name`` set and no super user: every client here
is ``User:ANONYMOUS`` (PLAINTEXT), and so are the brokers' requests to each other (CLUSTER_ACTION on
the cluster is granted first, as a broker principal's would be). ACLs are written to ZooKeeper the way ``pylog acls
--zookeeper`` (and Kafka's old ``kafka-acls --authorizer-properties zookeeper.connect=``) writes
them, and the broker picks them up from the change notifications while it runs; each test grants
what it needs on its own topic, group or transactional id. A denied request must fail with Kafka's
error and change nothing.
"""

from __future__ import annotations

import time
import uuid

import pytest
from kazoo.client import KazooClient

from broker.auth.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType,
    ResourcePattern,
    ResourceType as Rt,
)
from broker.auth.zk_store import AclZkStore
from integration_support import ClusterFactory, small_internal_topics
from secure_cluster import ACL_AUTHORIZER

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding as CkAclBinding,
    AclBindingFilter as CkAclBindingFilter,
    AclOperation as CkOp,
    AclPermissionType as CkPerm,
    AdminClient,
    NewTopic,
    ResourcePatternType as CkPattern,
    ResourceType as CkType,
)

ANON = "User:ANONYMOUS"
WAIT_S = 15


class AclCluster:
    def __init__(self, factory: ClusterFactory) -> None:
        self.cluster = factory.make(2, overrides={
            "authorizer.class.name": ACL_AUTHORIZER["authorizer.class.name"], **small_internal_topics(2)})
        self.bootstrap = self.cluster.bootstrap
        self.zk = KazooClient(hosts=self.cluster.zk_connect)
        self.zk.start()
        self.store = AclZkStore(self.zk, lambda: int(time.time() * 1000))
        self.admin = None  # _admin(): one confluent AdminClient for the module

    def grant(self, resource_type: Rt, name: str, *operations: Op, permission=Perm.ALLOW,
              pattern=PatternType.LITERAL, principal: str = ANON) -> None:
        self.store.add([AclBinding(ResourcePattern(resource_type, name, pattern),
                                   AccessControlEntry(principal, "*", op, permission)) for op in operations])

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


@pytest.fixture(scope="module")
def acl_cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("acls"))
    cluster = None
    try:
        cluster = AclCluster(factory)
        # what the broker itself needs of its own connections (controller -> broker requests)
        cluster.grant(Rt.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)
        yield cluster
    finally:
        if cluster is not None:
            cluster.close()
        factory.close()  # kills the brokers: a graceful stop of two in turn waits ~15 s, tested nowhere here


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _until(condition, what: str, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _admin(acl_cluster) -> AdminClient:
    """One admin client for the module (each test's topics and ACL calls share it)."""
    if getattr(acl_cluster, "admin", None) is None:
        acl_cluster.admin = AdminClient({"bootstrap.servers": acl_cluster.bootstrap})
    return acl_cluster.admin


def _create_topic(acl_cluster, name: str) -> None:
    """As the topic's creator: CREATE on the topic only (not the cluster)."""
    acl_cluster.grant(Rt.TOPIC, name, Op.CREATE)
    _until(lambda: _try_create(acl_cluster, name), f"topic {name} created")


def _try_create(acl_cluster, name: str) -> bool:
    admin = _admin(acl_cluster)
    future = admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10)[name]
    try:
        future.result(timeout=WAIT_S)
        return True
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return True
        if exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            return False  # the ACL has not reached the broker yet
        raise


def _produce(acl_cluster, topic: str, n: int = 3, **config):
    producer = confluent_kafka.Producer({"bootstrap.servers": acl_cluster.bootstrap, "message.timeout.ms": 10000,
                                         "enable.idempotence": False, **config})
    errors = []
    for i in range(n):
        # codes, not KafkaError objects: KafkaError == None sets a TypeError that surfaces later as a
        # SystemError in some unrelated call (confluent-kafka's rich compare)
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _msg: errors.append(err and err.code()))
    assert producer.flush(WAIT_S) == 0
    return errors


def test_create_topic_needs_create_and_a_denied_create_makes_nothing(acl_cluster):
    denied, admin = _name("no-create"), _admin(acl_cluster)
    future = admin.create_topics([NewTopic(denied, 1, 1)], operation_timeout=10)[denied]
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=WAIT_S)
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert not acl_cluster.zk.exists(f"/brokers/topics/{denied}")
    allowed = _name("may-create")
    _create_topic(acl_cluster, allowed)
    assert acl_cluster.zk.exists(f"/brokers/topics/{allowed}")


def test_produce_and_consume_need_write_and_read(acl_cluster):
    topic, group = _name("orders"), _name("readers")
    _create_topic(acl_cluster, topic)
    errors = _produce(acl_cluster, topic, n=2)
    assert errors == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2

    acl_cluster.grant(Rt.TOPIC, topic, Op.WRITE)
    for broker in acl_cluster.cluster.brokers:  # both: a client's metadata may come from either
        _until(lambda: _produce(acl_cluster, topic, n=1, **{"bootstrap.servers": broker.bootstrap}) == [None],
               f"WRITE to reach broker {broker.broker_id}")
    assert _produce(acl_cluster, topic, n=3) == [None] * 3

    consumer = confluent_kafka.Consumer({"bootstrap.servers": acl_cluster.bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        message = _until(lambda: consumer.poll(0.2), "an answer to the consumer")
        assert message.error() is not None
        assert message.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    finally:
        consumer.close()

    acl_cluster.grant(Rt.GROUP, group, Op.READ)
    acl_cluster.grant(Rt.TOPIC, topic, Op.READ)
    time.sleep(0)  # the notification travels; the consumer below retries until it is granted
    consumer = confluent_kafka.Consumer({"bootstrap.servers": acl_cluster.bootstrap, "group.id": group,
                                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        values = []

        def read_all():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) >= 5
        _until(read_all, "the 5 records")
        assert sorted(values) == [b"v0", b"v0", b"v0", b"v1", b"v2"]  # the denied produces left nothing
    finally:
        consumer.close()


def test_metadata_hides_topics_the_principal_may_not_describe(acl_cluster):
    visible, hidden = _name("visible"), _name("hidden")
    _create_topic(acl_cluster, visible)
    _create_topic(acl_cluster, hidden)
    acl_cluster.grant(Rt.TOPIC, hidden, Op.DESCRIBE, permission=Perm.DENY)
    acl_cluster.grant(Rt.TOPIC, visible, Op.READ)  # READ implies DESCRIBE

    def listed():
        names = set(_admin(acl_cluster).list_topics(timeout=WAIT_S).topics)
        return names if visible in names and hidden not in names else None
    _until(listed, "the hidden topic to disappear from Metadata")
    topic = _admin(acl_cluster).list_topics(topic=hidden, timeout=WAIT_S).topics[hidden]
    assert topic.error is not None and topic.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_transactional_id_needs_write(acl_cluster):
    topic, txn_id = _name("txn-out"), _name("txn")
    _create_topic(acl_cluster, topic)
    acl_cluster.grant(Rt.TOPIC, topic, Op.WRITE)
    producer = confluent_kafka.Producer({"bootstrap.servers": acl_cluster.bootstrap, "transactional.id": txn_id,
                                         "transaction.timeout.ms": 10000})
    with pytest.raises(KafkaException) as caught:
        producer.init_transactions(WAIT_S)
    assert caught.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    acl_cluster.grant(Rt.TRANSACTIONAL_ID, txn_id[:4], Op.WRITE, pattern=PatternType.PREFIXED)
    producer = _until(lambda: _init_transactions(acl_cluster, txn_id), "WRITE on the transactional id")
    producer.begin_transaction()
    producer.produce(topic, b"in-txn")
    producer.commit_transaction(WAIT_S)


def _init_transactions(acl_cluster, txn_id: str):
    producer = confluent_kafka.Producer({"bootstrap.servers": acl_cluster.bootstrap, "transactional.id": txn_id,
                                         "transaction.timeout.ms": 10000})
    try:
        producer.init_transactions(WAIT_S)
        return producer
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return None
        raise


def test_acl_admin_apis_need_alter_and_describe_on_the_cluster(acl_cluster):
    admin = _admin(acl_cluster)
    topic = _name("acl-admin")
    binding = CkAclBinding(CkType.TOPIC, topic, CkPattern.LITERAL, "User:bob", "*", CkOp.READ, CkPerm.ALLOW)
    everything = CkAclBindingFilter(CkType.ANY, None, CkPattern.ANY, None, None, CkOp.ANY, CkPerm.ANY)
    with pytest.raises(KafkaException) as caught:
        admin.create_acls([binding])[binding].result(timeout=WAIT_S)
    assert caught.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The broker answers CLUSTER_AUTHORIZATION_FAILED (test_server_request_auth.py), but librdkafka's
    # rd_kafka_DescribeAclsResponse_parse drops a DescribeAcls error: an empty listing, as against Kafka.
    assert admin.describe_acls(everything).result(timeout=WAIT_S) == []
    assert acl_cluster.store.read_pattern(ResourcePattern(Rt.TOPIC, topic))[1] == -1  # nothing stored

    acl_cluster.grant(Rt.CLUSTER, "kafka-cluster", Op.ALTER)  # ALTER implies DESCRIBE

    def created():
        try:
            admin.create_acls([binding])[binding].result(timeout=WAIT_S)
            return True
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
                return False
            raise
    _until(created, "ALTER on the cluster")
    mine = CkAclBindingFilter(CkType.TOPIC, topic, CkPattern.MATCH, None, None, CkOp.ANY, CkPerm.ANY)
    assert admin.describe_acls(mine).result(timeout=WAIT_S) == [binding]
    deleted = admin.delete_acls([mine])[mine].result(timeout=WAIT_S)
    assert deleted == [binding]
    assert admin.describe_acls(mine).result(timeout=WAIT_S) == []
    assert acl_cluster.store.read_pattern(ResourcePattern(Rt.TOPIC, topic))[1] == -1


def test_pylog_acls_tool_through_zookeeper_and_the_api(acl_cluster):
    """``pylog acls``: kafka-acls' options and output; --zookeeper writes ZooKeeper (how the
    first ACLs of a closed cluster are made), --bootstrap-server the ACL APIs (ANONYMOUS holds
    ALTER on the cluster from the test above, or gets it here)."""
    import argparse
    import io

    from broker.tools.acls import add_acls_parser, run_acls

    acl_cluster.grant(Rt.CLUSTER, "kafka-cluster", Op.ALTER)
    parser = argparse.ArgumentParser()
    add_acls_parser(parser.add_subparsers(dest="command"))

    def pylog_acls(*argv: str) -> str:
        out = io.StringIO()
        assert run_acls(parser.parse_args(["acls", *argv]), out) == 0
        return out.getvalue()

    topic, txn = _name("tool"), _name("tool-txn")
    zk = ("--zookeeper", acl_cluster.cluster.zk_connect)
    api = ("--bootstrap-server", acl_cluster.bootstrap)
    added = pylog_acls("--add", *zk, "--producer", "--topic", topic, "--transactional-id", txn,
                       "--allow-principal", "User:bob")
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`:\n" in added
    expected = (f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`:\n"
                "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)\n"
                "\t(principal=User:bob, host=*, operation=CREATE, permissionType=ALLOW)\n"
                "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n")
    assert pylog_acls("--list", *zk, "--topic", topic) == expected
    _until(lambda: pylog_acls("--list", *api, "--topic", topic) == expected, "the broker to learn the tool's ACLs")
    # the transactional id's ACLs reach the broker by their own notification, maybe after the topic's
    listed = _until(lambda: pylog_acls("--list", *api, "--transactional-id", txn),
                    "the broker to learn the tool's transactional-id ACLs")
    assert "operation=WRITE" in listed and "operation=DESCRIBE" in listed and "operation=CREATE" not in listed

    pylog_acls("--remove", *api, "--force", "--topic", topic, "--allow-principal", "User:bob", "--operation", "Create")
    assert "CREATE" not in pylog_acls("--list", *zk, "--topic", topic)
    pylog_acls("--remove", *api, "--force", "--topic", topic)
    pylog_acls("--remove", *zk, "--force", "--transactional-id", txn)
    assert pylog_acls("--list", *zk, "--topic", topic) == ""
    _until(lambda: pylog_acls("--list", *api, "--transactional-id", txn, "--topic", topic) == "",
           "the broker to learn the removal written to ZooKeeper")


def test_pylog_client_gets_kafkas_errors(acl_cluster):
    """pylog's own client: a topic it may not write is TOPIC_AUTHORIZATION_FAILED, a group it may
    not read GROUP_AUTHORIZATION_FAILED; after the grants, the same calls work."""
    from broker.client import Consumer, KafkaError as PylogKafkaError, Producer

    topic, group = _name("pylog-client"), _name("pylog-group")
    _create_topic(acl_cluster, topic)

    def send_code():
        with Producer(acl_cluster.bootstrap, enable_idempotence=False, acks=1, delivery_timeout_ms=5000) as producer:
            try:
                producer.send(topic, b"from-pylog").get(timeout_ms=10000)
                return None
            except PylogKafkaError as exc:
                return exc.code
    assert send_code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    acl_cluster.grant(Rt.TOPIC, topic, Op.WRITE, Op.READ)
    _until(lambda: send_code() is None, "WRITE for pylog's producer", timeout_s=WAIT_S)

    with Consumer(acl_cluster.bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        with pytest.raises(PylogKafkaError) as caught:
            _until(lambda: consumer.poll(timeout_ms=200), "an answer to pylog's consumer")
        assert caught.value.code == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_every_broker_follows_acl_changes_and_replication_runs(acl_cluster):
    """An ACL created through one broker's CreateAcls reaches the other broker's cache through
    the change notification, and a removal through the other one comes back; an RF-2 topic
    replicates (the follower's Fetch needs CLUSTER_ACTION) so acks=all produce succeeds."""
    import argparse
    import io

    from broker.tools.acls import add_acls_parser, run_acls

    acl_cluster.grant(Rt.CLUSTER, "kafka-cluster", Op.ALTER)
    parser = argparse.ArgumentParser()
    add_acls_parser(parser.add_subparsers(dest="command"))

    def pylog_acls(broker, *argv: str) -> str:
        out = io.StringIO()
        try:
            run_acls(parser.parse_args(["acls", "--bootstrap-server", broker.bootstrap, *argv]), out)
        except ValueError as exc:  # CLUSTER_AUTHORIZATION_FAILED until ALTER reaches this broker
            return f"refused: {exc}"
        return out.getvalue()

    first, second = acl_cluster.cluster.brokers
    topic = _name("everywhere")
    _until(lambda: not pylog_acls(first, "--add", "--allow-principal", "User:carol", "--operation", "Read",
                                  "--topic", topic).startswith("refused"), "ALTER on the first broker")
    _until(lambda: "User:carol" in pylog_acls(second, "--list", "--topic", topic), "the second broker to see it")
    _until(lambda: not pylog_acls(second, "--remove", "--force", "--topic", topic).startswith("refused"),
           "the removal through the second broker")
    _until(lambda: pylog_acls(first, "--list", "--topic", topic) == "", "the first broker to see the removal")

    replicated = _name("replicated")
    acl_cluster.grant(Rt.TOPIC, replicated, Op.CREATE, Op.WRITE)
    admin = _admin(acl_cluster)

    def created():
        try:
            admin.create_topics([NewTopic(replicated, 1, 2)], operation_timeout=10)[replicated].result(timeout=WAIT_S)
            return True
        except KafkaException as exc:
            return exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    _until(created, "the RF-2 topic")
    _until(lambda: _produce(acl_cluster, replicated, n=1, acks="all") == [None], "an acks=all produce")
