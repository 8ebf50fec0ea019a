"""Topic name rules (Kafka's ``Topic.validate``) and the "." / "_" collision rule."""

from __future__ import annotations

import pytest

from broker.cluster.errors import InvalidTopicError
from broker.cluster.names import (
    COLLISION_WARNING,
    TOPIC_NAME_LENGTH_MAX,
    colliding_topics,
    collides,
    has_collision_chars,
    validate_topic_name,
)

VALID = [
    "a",
    "orders",
    "Orders-2024_v1.0",
    "__consumer_offsets",
    "...",  # only "." and ".." are reserved
    "-",
    "x" * TOPIC_NAME_LENGTH_MAX,
    "0123456789",
]

INVALID = [
    # (name, fragment of the message that names the broken rule)
    ("", "can't be empty"),
    (".", 'cannot be "." or ".."'),
    ("..", 'cannot be "." or ".."'),
    ("x" * (TOPIC_NAME_LENGTH_MAX + 1), "can't be longer than 249 characters"),
    ("a/b", "contains a character other than ASCII alphanumerics"),
    ("a b", "' '"),
    ("topic!", "'!'"),
    ("tópico", "'ó'"),
    ("a\x00b", "contains a character other than"),
    ("a:b", "':'"),
]


@pytest.mark.parametrize("name", VALID)
def test_valid_names_pass(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name, fragment", INVALID)
def test_invalid_names_say_which_rule(name, fragment):
    with pytest.raises(InvalidTopicError) as info:
        validate_topic_name(name)
    assert fragment in str(info.value)
    assert info.value.kafka_error_code == 17


def test_rules_apply_in_kafkas_order():
    """An over-long name of illegal characters is reported as too long (length is checked first)."""
    with pytest.raises(InvalidTopicError, match="longer than"):
        validate_topic_name("!" * 300)


def test_non_string_is_refused():
    with pytest.raises(InvalidTopicError, match="must be a string"):
        validate_topic_name(17)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("a.b", "a_b", True),
        ("a_b", "a.b", True),
        ("a.b_c", "a_b.c", True),
        ("a.b", "a.b", True),  # a name collides with itself; colliding_topics excludes it
        ("a.b", "a-b", False),
        ("ab", "a_b", False),
        ("a.b", "A_b", False),  # case matters
    ],
)
def test_collides(a, b, expected):
    assert collides(a, b) is expected


@pytest.mark.parametrize("name, expected", [("a.b", True), ("a_b", True), ("a-b", False), ("ab", False)])
def test_has_collision_chars(name, expected):
    assert has_collision_chars(name) is expected


def test_colliding_topics_lists_others_sorted():
    existing = ["metrics_cpu", "metrics.cpu", "metrics-cpu", "other", "metrics_cpu2"]
    assert colliding_topics("metrics.cpu", existing) == ["metrics_cpu"]
    assert colliding_topics("metrics_cpu", existing) == ["metrics.cpu"]
    assert colliding_topics("metrics-cpu", existing) == []  # no collision chars: nothing to check


def test_warning_text_is_kafkas():
    assert "period ('.') or underscore ('_')" in COLLISION_WARNING
