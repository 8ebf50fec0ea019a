"""The Spark source and sink over SASL_SSL with SCRAM and ACLs (issue 17): the security options
pass through as Spark's Kafka connector passes them (``kafka.security.protocol``, ``kafka.sasl.*``,
``kafka.ssl.*``), to the driver's and the executors' clients. The cluster runs the ACL authorizer
(``super.users=User:admin``, nothing else granted but bob's READ/WRITE/DESCRIBE on the topic):
bob writes and reads back; alice, granted nothing, is refused with TOPIC_AUTHORIZATION_FAILED by
the sink and the source (the other refusals are the integration tier's)."""

from __future__ import annotations

import sys

import pytest

from spark_helpers import unique

pytestmark = pytest.mark.integration
pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def secure(zookeeper, tmp_path_factory):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "integration"))
    from secure_cluster import start_secure_cluster
    cluster = start_secure_cluster(tmp_path_factory.mktemp("secure-spark"), zookeeper.connect_string,
                                   sys.modules["pylog_integration_fixtures"], overrides={
                                       "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                       "super.users": "User:admin"})
    try:
        _grant_bob(cluster)
        yield cluster
    finally:
        cluster.stop()


def _grant_bob(cluster) -> None:
    """bob's ACLs through CreateAcls (as admin); then bob writes to both partitions (one led by
    each broker) so both brokers are known to have the ACLs before Spark starts."""
    import time

    import confluent_kafka
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    bindings = [AclBinding(ResourceType.TOPIC, cluster.topic, ResourcePatternType.LITERAL, "User:bob", "*", op,
                           AclPermissionType.ALLOW)
                for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)]
    admin = AdminClient(cluster.confluent())  # kept: the futures fail if the client is collected
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result()
    deadline = time.monotonic() + 30
    while True:
        producer = confluent_kafka.Producer(cluster.confluent("bob", "bob-secret", "SCRAM-SHA-512",
                                                              **{"message.timeout.ms": 10000}))
        codes = []
        for partition in (0, 1):
            producer.produce(cluster.topic, b"acl-probe", partition=partition,
                             on_delivery=lambda err, _m: codes.append(err and err.code()))
        producer.flush(30)
        if codes == [None, None]:
            return
        assert time.monotonic() < deadline, f"bob's ACLs did not reach both brokers: {codes}"
        time.sleep(0.1)


def _options(secure, user: str, password: str, mechanism: str) -> dict:
    return {"kafka.bootstrap.servers": secure.sasl_bootstrap, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": mechanism, "kafka.ssl.truststore.location": secure.ca,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      f'username="{user}" password="{password}";'}


def test_spark_sink_and_source_over_sasl_ssl_scram(spark, secure):
    options = _options(secure, "bob", "bob-secret", "SCRAM-SHA-512")
    marker = unique("spark")
    rows = [(f"k{i}", f"{marker}-{i}") for i in range(100)]
    writer = spark.createDataFrame(rows, "key string, value string").write.format("pylog").mode("append")
    writer.options(**options).option("topic", secure.topic).save()
    back = (spark.read.format("pylog").options(**options).option("subscribe", secure.topic).load()
            .selectExpr("CAST(value AS STRING) AS value").where(f"value LIKE '{marker}-%'"))
    assert sorted(r.value for r in back.collect()) == sorted(v for _, v in rows)


def test_spark_sink_and_source_refused_without_acls(spark, secure):
    """alice logs in (SCRAM-SHA-256) but holds no ACL: the sink's write and the source's read
    fail with Kafka's TOPIC_AUTHORIZATION_FAILED (the sink's tasks before sending anything: the
    partition count lookup is refused)."""
    options = _options(secure, "alice", "alice-secret", "SCRAM-SHA-256")
    marker = unique("denied")
    writer = spark.createDataFrame([("k", marker)], "key string, value string").write.format("pylog")
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED") as refused:
        writer.mode("append").options(**options).option("topic", secure.topic).save()
    # the driver's listing hides the topic; named, it is refused (not read as an empty topic)
    with pytest.raises(Exception, match=rf"TOPIC_AUTHORIZATION_FAILED \(29\): Not authorized to access "
                                        rf"topics: \[{secure.topic}\]"):
        (spark.read.format("pylog").options(**options).option("subscribe", secure.topic)
         .option("fetchOffset.numRetries", "0").load().collect())
