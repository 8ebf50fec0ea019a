"""Rules for a new topic's replica assignment and config (``AdminZkClient.validateTopicCreate``)."""

from __future__ import annotations

import pytest

from broker.cluster.assignment import validate_config, validate_new_assignment
from broker.cluster.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

GOOD = [
    {0: [1]},
    {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]},
    {1: (0,), 0: (0,)},  # order of keys does not matter; tuples are fine
]

BAD = [
    # (assignment, error class, Kafka error code, message fragment)
    ({}, InvalidPartitionsError, 37, "larger than 0"),
    ({1: [1], 2: [1]}, InvalidReplicaAssignmentError, 39, "consecutive 0-based"),
    ({0: [1], 2: [1]}, InvalidReplicaAssignmentError, 39, "consecutive 0-based"),
    ({-1: [1], 0: [1]}, InvalidReplicaAssignmentError, 39, "consecutive 0-based"),
    ({"0": [1]}, InvalidReplicaAssignmentError, 39, "consecutive 0-based"),
    ({0: [1, 2], 1: [1]}, InvalidReplicationFactorError, 38, "same number of replicas"),
    ({0: [], 1: []}, InvalidReplicationFactorError, 38, "larger than 0"),
    ({0: [1, 1]}, InvalidReplicaAssignmentError, 39, "Duplicate replica assignment"),
    ({0: [1, -2]}, InvalidReplicaAssignmentError, 39, "non-negative integers"),
    ({0: [1, True]}, InvalidReplicaAssignmentError, 39, "non-negative integers"),
    ({0: ["1"]}, InvalidReplicaAssignmentError, 39, "non-negative integers"),
]


@pytest.mark.parametrize("assignment", GOOD)
def test_good_assignments_pass(assignment):
    validate_new_assignment(assignment)


@pytest.mark.parametrize("assignment, error, code, fragment", BAD)
def test_bad_assignments_are_refused(assignment, error, code, fragment):
    with pytest.raises(error) as info:
        validate_new_assignment(assignment)
    assert info.value.kafka_error_code == code
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "config, fragment",
    [
        ({"retention.ms": 1000}, "values must be strings"),
        ({"retention.ms": None}, "values must be strings"),
        ({"": "x"}, "non-empty strings"),
        ({1: "x"}, "non-empty strings"),
    ],
)
def test_bad_config_is_refused(config, fragment):
    with pytest.raises(InvalidConfigurationError, match=fragment) as info:
        validate_config(config)
    assert info.value.kafka_error_code == 40


def test_string_config_passes():
    validate_config({"retention.ms": "1000", "cleanup.policy": "compact"})
    validate_config({})
