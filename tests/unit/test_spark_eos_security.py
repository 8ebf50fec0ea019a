"""The exactly-once sink's driver-side clients carry the sink's kafka.security/sasl/ssl options.

Every client the commit path builds (the committer's Cluster and its borrowed ones, the commit
log's producer, reader and admin) goes through ``Cluster.__init__``; a recording wrapper collects
their configs. SASL_PLAINTEXT keeps the test free of certificate files; nothing connects.
"""

from __future__ import annotations

import pickle

import pytest

from broker.client.metadata import Cluster
from spark_log import recover, transactions
from spark_log.options import parse_sink_options
from spark_log.sink import _txn_settings

SECURE = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "deliveryGuarantee": "exactly-once",
          "transactionalIdPrefix": "p", "kafka.security.protocol": "SASL_PLAINTEXT",
          "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "bob", "kafka.sasl.password": "pw"}


class _Built(Exception):
    """Raised by the recording Cluster.__init__ once the config is seen: no network."""


def test_driver_side_clients_use_the_tasks_security(monkeypatch, tmp_path):
    options = parse_sink_options(SECURE)
    settings = _txn_settings(options, options.transactional_id_prefix)
    task_security = options.producer["config"].security
    assert task_security.mechanism == "SCRAM-SHA-512" and settings.security == task_security
    assert pickle.loads(pickle.dumps(settings)) == settings  # shipped like the tasks' options

    clients = transactions._DriverClients(settings)
    try:
        assert clients.cluster.config.security == task_security
        assert clients.borrow().config.security == task_security
        assert clients.producer._cluster.config.security == task_security
    finally:
        clients.close()

    seen = []
    original = Cluster.__init__

    def recording(self, bootstrap_servers, config=None, *args, **kwargs):
        seen.append(config)
        original(self, bootstrap_servers, config, *args, **kwargs)
        if config.client_id in ("pylog-spark-commit-log-reader", "pylog-spark-commit-log-admin"):
            raise _Built

    monkeypatch.setattr(Cluster, "__init__", recording)
    with pytest.raises(_Built):
        transactions.read_commit_log(settings)
    with pytest.raises(_Built):
        transactions.Committer(settings)._ensure_topic()
    assert [c.client_id for c in seen] == ["pylog-spark-commit-log-reader", "pylog-spark-commit-log-admin"]
    assert all(c.security == task_security for c in seen)

    # python -m spark_log.recover --command-config: Kafka's property names, no kafka. prefix
    props = tmp_path / "client.properties"
    props.write_text("# written by an operator\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism: SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
                     "    username=\"bob\" password=\"pw\";\n")
    assert recover._command_security(str(props)) == task_security
    assert recover._command_security(None) is None


def test_plaintext_sink_has_no_security():
    options = parse_sink_options({k: v for k, v in SECURE.items() if not k.startswith(("kafka.s"))})
    settings = _txn_settings(options, "p")
    assert settings.security is None and settings.client_config("x").security is None
