"""Client quotas, differential (issue 18 item 3): Kafka's own ``kafka-configs`` alters and
describes client-id and user quotas on Apache Kafka and on pylog with the same output, and
refuses the same bad input with the same exception; ``pylog configs`` describes what
``kafka-configs`` describes. Entities are named per run (the peers are the session's shared ones).
"""

from __future__ import annotations

import argparse
import io
import re
import uuid

import pytest

from broker.tools.configs import add_configs_parser, run_configs
from test_peer_kafka_tools import on_both, tool

_CAUSE = re.compile(r"(?P<exception>org\.apache\.kafka\.common\.errors\.\w+): ?(?P<message>.*)$", re.M)


def _kafka_configs(peer, *args: str):
    return tool("kafka-configs", ["--bootstrap-server", peer.bootstrap, *args])


def _pylog_describe(peer, *entity: str) -> str:
    parser = argparse.ArgumentParser()
    add_configs_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["configs", "--bootstrap-server", peer.bootstrap, "--describe", *entity])
    out, err = io.StringIO(), io.StringIO()
    assert run_configs(args, out, err) == 0, err.getvalue()
    return out.getvalue()


def test_kafka_configs_client_quotas_alike(peers):
    client = f"quota-{uuid.uuid4().hex[:8]}"
    entity = ["--entity-type", "clients", "--entity-name", client]
    altered = on_both(peers, lambda p: _kafka_configs(p, "--alter", *entity, "--add-config",
                                                      "producer_byte_rate=1048576,consumer_byte_rate=2048"))
    assert altered["pylog"].out == altered["kafka"].out and altered["pylog"].returncode == 0, altered
    described = on_both(peers, lambda p: _kafka_configs(p, "--describe", *entity).out)
    assert described["pylog"] == described["kafka"]
    assert "producer_byte_rate=1048576.0" in described["kafka"]
    assert _pylog_describe(peers[0], *entity) == _pylog_describe(peers[1], *entity) == described["kafka"]


@pytest.mark.parametrize("config", ["producer_byte_rat=10", "producer_byte_rate=-5"],
                         ids=["unknown-key", "negative-rate"])
def test_kafka_configs_refuses_bad_quotas_alike(peers, config):
    entity = ["--entity-type", "clients", "--entity-name", f"bad-{uuid.uuid4().hex[:8]}"]

    def run(peer):
        result = _kafka_configs(peer, "--alter", *entity, "--add-config", config)
        matches = list(_CAUSE.finditer(result.err + result.out))
        cause = (matches[-1]["exception"], matches[-1]["message"].strip()) if matches else (result.err + result.out)[-300:]
        return result.returncode, cause, _kafka_configs(peer, "--describe", *entity).out
    refused = on_both(peers, run)
    assert refused["pylog"] == refused["kafka"]
    assert refused["kafka"][0] != 0 and refused["kafka"][2] == ""
