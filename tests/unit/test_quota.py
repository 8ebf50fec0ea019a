"""Client quotas' core (broker/server/quota.py): Kafka's precedence of entities, the sampled rate
and its throttle time, validation of quota values."""

from __future__ import annotations

import pytest

from broker.server.quota import DEFAULT, FETCH, PRODUCE, ClientQuotas, QuotaSettings, Rate, sanitize, validate_quota
from broker.server.quota_store import entity_of_path


def test_precedence_follows_kafka_order():
    quotas = ClientQuotas()
    levels = [(None, DEFAULT), (None, "app"), (DEFAULT, None), (DEFAULT, DEFAULT), (DEFAULT, "app"),
              ("alice", None), ("alice", DEFAULT), ("alice", "app")]
    # each level added overrides the ones before it: the later, the more specific
    for value, (user, client) in enumerate(levels, start=1):
        quotas.set_entity(user, client, {PRODUCE: str(value * 100)})
        assert quotas.resolve(PRODUCE, "alice", "app")[0] == value * 100
    assert quotas.resolve(PRODUCE, "bob", "other")[0] == 400  # users/<default>/clients/<default>
    assert quotas.resolve(FETCH, "alice", "app") is None  # no consumer_byte_rate anywhere


def test_rate_is_shared_by_the_matched_level():
    quotas = ClientQuotas()
    quotas.set_entity("alice", None, {PRODUCE: "1000"})
    quotas.set_entity(None, DEFAULT, {PRODUCE: "1000"})
    assert quotas.resolve(PRODUCE, "alice", "a")[1] == quotas.resolve(PRODUCE, "alice", "b")[1]
    assert quotas.resolve(PRODUCE, "bob", "a")[1] != quotas.resolve(PRODUCE, "bob", "b")[1]


def test_throttle_brings_the_rate_back_to_the_quota():
    quotas = ClientQuotas(QuotaSettings(window_num=3, window_size_ms=1000))
    quotas.set_entity(None, "app", {PRODUCE: "1000"})
    assert quotas.record(PRODUCE, "u", "app", 1500, now_ms=0) == 0  # 1500 / 2 s
    assert quotas.record(PRODUCE, "u", "app", 1500, now_ms=100) == 900  # 3000 / 2.1 s: 3/7 over
    rate = Rate(3, 1000, 0)
    for at in (0, 1000, 2000):
        rate.record(1000, at)
    assert rate.measure(2500) == pytest.approx(1200)  # 3000 / 2.5 s: throttle 0.2 * 2.5 s
    assert rate.measure(3000) == pytest.approx(1000)  # 500 ms later: at the quota again


def test_throttle_is_not_capped():
    quotas = ClientQuotas(QuotaSettings(window_num=3, window_size_ms=1000))
    quotas.set_entity(None, "app", {PRODUCE: "10"})
    assert quotas.record(PRODUCE, "u", "app", 100_000, now_ms=0) == 9_998_000  # (50,000 - 10) / 10 * 2 s


def test_old_samples_expire():
    rate = Rate(3, 1000, 0)
    rate.record(3000, 0)
    rate.record(0, 3500)
    assert rate.measure(3500) == 0


def test_a_changed_quota_applies_and_a_removed_one_stops_throttling():
    quotas = ClientQuotas(QuotaSettings(window_num=3, window_size_ms=1000))
    quotas.set_entity(None, "app", {PRODUCE: "1000"})
    assert quotas.record(PRODUCE, "u", "app", 5000, 0) > 0
    quotas.set_entity(None, "app", {PRODUCE: "1000000"})
    assert quotas.record(PRODUCE, "u", "app", 5000, 1) == 0
    quotas.set_entity(None, "app", {})
    assert not quotas.active and quotas.record(PRODUCE, "u", "app", 10**9, 2) == 0


def test_window_bytes_caps_a_fetch():
    quotas = ClientQuotas(QuotaSettings(window_num=11, window_size_ms=1000))
    quotas.set_entity(None, DEFAULT, {FETCH: "1000"})
    assert quotas.window_bytes(FETCH, "u", "c") == 10_000
    assert quotas.window_bytes(PRODUCE, "u", "c") is None


@pytest.mark.parametrize("key, value, message", [
    ("producer_byte_rat", "1", "Unknown quota key"),
    (PRODUCE, "-5", "must be greater than 0"),
    (PRODUCE, "abc", "Invalid value abc"),
    (PRODUCE, "1.5", "must be an integer"),
])
def test_validation_refuses_bad_values(key, value, message):
    with pytest.raises(ValueError, match=message):
        validate_quota(key, value)


def test_bad_values_in_zookeeper_and_other_keys_are_ignored():
    quotas = ClientQuotas()
    quotas.set_entity("alice", None, {PRODUCE: "-1", "SCRAM-SHA-256": "salt=..."})
    assert not quotas.active


def test_names_are_sanitized_as_kafka_and_entity_paths_parsed():
    assert sanitize("user@example.com") == "user%40example.com"
    assert sanitize("a*b c~") == "a%2Ab%20c%7E"
    assert entity_of_path("users", "alice/clients/app") == ("alice", "app")
    assert entity_of_path("users", "alice") == ("alice", None)
    assert entity_of_path("clients", "<default>") == (None, DEFAULT)
    assert entity_of_path("topics", "t") is None


def test_an_unchanged_entity_keeps_the_rates():
    quotas = ClientQuotas(QuotaSettings(window_num=3, window_size_ms=1000))
    quotas.set_entity("alice", None, {PRODUCE: "1000"})
    assert quotas.record(PRODUCE, "alice", "app", 1500, 0) == 0
    quotas.set_entity("alice", None, {PRODUCE: "1000", "SCRAM-SHA-256": "salt=..."})  # a credential added
    assert quotas.record(PRODUCE, "alice", "app", 1500, 100) > 0  # the first 1500 B still count
