"""The Spark source and sink over SASL_SSL with SCRAM (issue 17): the security options pass
through as Spark's Kafka connector passes them (``kafka.security.protocol``, ``kafka.sasl.*``,
``kafka.ssl.*``), to the driver's and the executors' clients. One test: write, then read back
(refusals are the integration tier's)."""

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
                                   sys.modules["pylog_integration_fixtures"])
    yield cluster
    cluster.stop()


def test_spark_sink_and_source_over_sasl_ssl_scram(spark, secure):
    options = {"kafka.bootstrap.servers": secure.sasl_bootstrap, "kafka.security.protocol": "SASL_SSL",
               "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.ssl.truststore.location": secure.ca,
               "kafka.ssl.truststore.type": "PEM",
               "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="bob" password="bob-secret";'}
    marker = unique("spark")
    rows = [(f"k{i}", f"{marker}-{i}") for i in range(100)]
    writer = spark.createDataFrame(rows, "key string, value string").write.format("pylog").mode("append")
    writer.options(**options).option("topic", secure.topic).save()
    back = (spark.read.format("pylog").options(**options).option("subscribe", secure.topic).load()
            .selectExpr("CAST(value AS STRING) AS value").where(f"value LIKE '{marker}-%'"))
    assert sorted(r.value for r in back.collect()) == sorted(v for _, v in rows)
