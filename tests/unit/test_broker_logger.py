"""Log levels at runtime (BROKER_LOGGER, resource type 8) through the real codec and dispatcher:
DescribeConfigs lists the broker's loggers with their effective levels in Kafka's names,
IncrementalAlterConfigs sets and unsets them in the process, and bad input gets Kafka 4.1's
errors with nothing changed (broker/server/logger_levels.py)."""

from __future__ import annotations

import logging

import pytest
from test_server_harness import Harness, run

from broker.wire import ErrorCode

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
BROKER_LOGGER = 8
SET, DELETE, APPEND = 0, 1, 2
LOGGER = "broker.server.network"


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1)
    saved = {name: logging.getLogger(name).level for name in ("", LOGGER)}
    yield h
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    h.close()


def describe(h: Harness, name: str = "1", keys=None):
    response = run(h.call(DESCRIBE_CONFIGS, 4, {"resources": [{"resource_type": BROKER_LOGGER, "resource_name": name,
                                                                "configuration_keys": keys}],
                                                 "include_synonyms": True}))
    return response.results[0]


def alter(h: Harness, ops, name: str = "1", validate_only: bool = False):
    response = run(h.call(INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER_LOGGER, "resource_name": name,
                       "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": validate_only}))
    result = response.responses[0]
    return result.error_code, result.error_message


def levels(h: Harness) -> dict[str, str]:
    return {c.name: c.value for c in describe(h).configs}


def test_describe_lists_every_logger_with_its_effective_level(harness):
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger(LOGGER).setLevel(logging.NOTSET)
    result = describe(harness)
    assert result.error_code == ErrorCode.NONE
    found = {c.name: c for c in result.configs}
    assert found["root"].value == "INFO" and found[LOGGER].value == "INFO"  # inherited from root
    assert {(c.config_source, c.is_sensitive, c.read_only, len(c.synonyms)) for c in result.configs} == {(6, False, False, 0)}
    assert [c.name for c in describe(harness, keys=["root"]).configs] == ["root"]
    for name, message in (("", "Broker id must not be empty"),
                          ("x", "Broker id must be an integer, but it is: x"),
                          ("2", "Unexpected broker id, expected 1 but received 2")):
        refused = describe(harness, name)
        assert (refused.error_code, refused.error_message, refused.configs) == (ErrorCode.INVALID_REQUEST, message, [])


def test_set_and_unset_a_level_at_runtime(harness):
    logging.getLogger().setLevel(logging.INFO)
    assert alter(harness, [(LOGGER, SET, "DEBUG")], validate_only=True) == (ErrorCode.NONE, None)
    assert levels(harness)[LOGGER] == "INFO"  # validate only: nothing changed
    assert alter(harness, [(LOGGER, SET, "DEBUG"), ("root", SET, "WARN")]) == (ErrorCode.NONE, None)
    assert logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)
    assert (levels(harness)["root"], levels(harness)[LOGGER]) == ("WARN", "DEBUG")
    assert alter(harness, [(LOGGER, SET, "TRACE")]) == (ErrorCode.NONE, None)
    assert levels(harness)[LOGGER] == "TRACE"
    assert alter(harness, [(LOGGER, DELETE, None)]) == (ErrorCode.NONE, None)
    assert levels(harness)[LOGGER] == "WARN"  # inherits the root's again


@pytest.mark.parametrize("ops, name, code, message", [
    ([("root", SET, "LOUD")], "1", ErrorCode.INVALID_CONFIG,
     "Cannot set the log level of root to LOUD as it is not a supported log level. "
     "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
    ([("no.such.logger", SET, "INFO")], "1", ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!"),
    ([("root", DELETE, None)], "1", ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
    ([("root", APPEND, "INFO")], "1", ErrorCode.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
    ([(LOGGER, SET, "DEBUG"), ("root", SET, None)], "1", ErrorCode.INVALID_REQUEST, "Null value not supported for : root"),
    ([(LOGGER, SET, "DEBUG")], "2", ErrorCode.INVALID_REQUEST, "Unexpected node id. Expected 1, but received 2"),
    ([(LOGGER, SET, "DEBUG")], "b", ErrorCode.INVALID_REQUEST, "Node id must be an integer, but it is: b"),
], ids=["bad-level", "unknown-logger", "delete-root", "append", "null-value", "other-node", "not-a-node-id"])
def test_bad_input_gets_kafkas_error_and_changes_nothing(harness, ops, name, code, message):
    logging.getLogger(LOGGER).setLevel(logging.NOTSET)
    before = levels(harness)
    assert alter(harness, ops, name) == (code, message)
    assert levels(harness) == before


def test_legacy_alter_configs_refuses_broker_loggers(harness):
    response = run(harness.call(ALTER_CONFIGS, 2, {"resources": [{
        "resource_type": BROKER_LOGGER, "resource_name": "1", "configs": [{"name": "root", "value": "DEBUG"}]}],
        "validate_only": False}))
    assert (response.responses[0].error_code, response.responses[0].error_message) == (
        ErrorCode.INVALID_REQUEST, "AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER")
