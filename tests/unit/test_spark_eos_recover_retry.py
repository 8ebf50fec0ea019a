"""The exactly-once sink's recovery (run when Spark builds a stream's writer) retries retriable
errors: a query restarted right after a broker died must wait for it, not fail at once (CI saw
four restarts fail within seconds while a SIGKILLed sink leader came back)."""
from __future__ import annotations

import pytest

from broker.client import KafkaError
from broker.wire import ErrorCode
from spark_log import transactions
from spark_log.options import parse_sink_options
from spark_log.sink import _txn_settings

OPTIONS = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "deliveryGuarantee": "exactly-once",
           "transactionalIdPrefix": "p"}


def committer(monkeypatch, outcomes):
    options = parse_sink_options(OPTIONS)
    c = transactions.Committer(_txn_settings(options, "p"))
    calls = []

    def once():
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(c, "_recover_once", once)
    monkeypatch.setattr(transactions.time, "sleep", lambda s: None)
    return c, calls


def test_a_broker_coming_back_is_waited_for(monkeypatch):
    down = KafkaError(ErrorCode.NETWORK_EXCEPTION, "connection refused")
    c, calls = committer(monkeypatch, [down, down, {"committed": 1, "aborted": 0}])
    assert c.recover() == {"committed": 1, "aborted": 0}
    assert len(calls) == 3


def test_a_fatal_error_is_raised_at_once(monkeypatch):
    c, calls = committer(monkeypatch, [KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)])
    with pytest.raises(KafkaError):
        c.recover()
    assert len(calls) == 1
