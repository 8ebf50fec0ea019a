"""Replication throttles (KIP-73): the quota math, the throttled-replica lists, and the
follower's fetch decisions (broker.server.replication_quota, broker.replica.fetcher)."""

import pytest

from broker.server.config_entries import describe_topic_configs, validate_topic_configs
from broker.server.config import BrokerConfig
from broker.server.replication_quota import (
    ALL_REPLICAS, ReplicationQuota, ReplicationQuotas, ReplicationQuotaSettings, SimpleRate,
    parse_throttled_replicas)


def test_simple_rate_divides_by_the_elapsed_time_but_at_least_one_window():
    rate = SimpleRate(11, 1000, 0)
    rate.record(1000, 0)
    assert rate.measure(100) == 1000  # 1,000 B over less than one window: one window
    rate.record(3000, 2500)
    assert rate.measure(4000) == 1000  # 4,000 B over 4 s
    assert rate.measure(10_000) == 400
    assert rate.measure(11_000) == pytest.approx(3000 / 8.5)  # the first sample expired
    assert rate.measure(20_000) == 0  # every sample older than 11 windows is gone


def test_quota_exceeded_only_above_the_rate_and_only_when_a_rate_is_set():
    quota = ReplicationQuota(ReplicationQuotaSettings(11, 1000))
    quota.record(50_000_000, 0)
    assert not quota.is_quota_exceeded(500)  # no rate: unthrottled, though the bytes count
    quota.update_rate(10_000_000)
    assert quota.is_quota_exceeded(500)
    assert not quota.is_quota_exceeded(5_000)  # 50 MB over 5 s = the rate: acceptable
    assert quota.is_quota_exceeded(4_999)
    assert quota.ms_until_under(1_000) == 4_000  # the follower waits this long, not a whole backoff
    quota.record(30_000_000, 4_000)
    assert quota.ms_until_under(4_000) == 4_000 and quota.is_quota_exceeded(7_999)
    assert not quota.is_quota_exceeded(8_000)


def test_only_throttled_replicas_out_of_sync_are_held_back():
    quota = ReplicationQuota(ReplicationQuotaSettings(), rate_bytes_per_s=1000)
    quota.set_throttled("t", frozenset({0}))
    quota.set_throttled("all", ALL_REPLICAS)
    quota.record(10_000, 0)
    assert quota.should_throttle("t", 0, in_sync=False, now_ms=10)
    assert not quota.should_throttle("t", 0, in_sync=True, now_ms=10)  # the ISR is never slowed
    assert not quota.should_throttle("t", 1, in_sync=False, now_ms=10)  # not listed
    assert quota.should_throttle("all", 7, in_sync=False, now_ms=10)
    assert not quota.should_throttle("other", 0, in_sync=False, now_ms=10)


@pytest.mark.parametrize("value, broker, expected", [
    ("*", 1, ALL_REPLICAS),
    ("0:1,1:2,2:1", 1, frozenset({0, 2})),
    (" 0:1 , 1:2 ", 2, frozenset({1})),
    ("0:1", 3, frozenset()),
    ("", 1, frozenset()),
    ("0:x", 1, frozenset()),  # invalid (another tool wrote it): nothing throttled
])
def test_a_broker_takes_the_partitions_that_name_it(value, broker, expected):
    assert parse_throttled_replicas(value, broker) == expected


def test_topic_configs_mark_and_clear_throttles():
    quotas = ReplicationQuotas(2)
    quotas.on_topic_configs({"t": {"leader.replication.throttled.replicas": "0:1,0:2",
                                   "follower.replication.throttled.replicas": "0:3"}})
    assert quotas.leader.is_throttled("t", 0) and not quotas.follower.is_throttled("t", 0)
    quotas.on_topic_configs({"t": {"follower.replication.throttled.replicas": "*"}})
    assert not quotas.leader.is_throttled("t", 0) and quotas.follower.is_throttled("t", 5)
    quotas.on_topic_configs({})
    assert not quotas.follower.throttled and not quotas.leader.throttled


def test_topic_config_validation_and_description_as_kafka():
    assert validate_topic_configs({"leader.replication.throttled.replicas": "0:1, 1:2"}) is None
    assert validate_topic_configs({"follower.replication.throttled.replicas": "*"}) is None
    assert validate_topic_configs({"leader.replication.throttled.replicas": "0:1,x"}) == (
        "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
        "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the "
        "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    config = BrokerConfig.from_properties({"broker.id": "1", "zookeeper.connect": "z:2181"})
    entries = {e.name: e for e in describe_topic_configs({"leader.replication.throttled.replicas": "0:1, 0:2"},
                                                         config)}
    assert entries["leader.replication.throttled.replicas"].value == "0:1,0:2"
    default = entries["follower.replication.throttled.replicas"]
    assert (default.value, default.is_default, default.synonym) == ("", True, None)


def test_the_follower_leaves_a_throttled_lagging_partition_out_until_it_is_in_sync():
    from test_replication_partition import Clock, append, follow, lead, partition

    from broker.replica.fetcher import FetchedPartition, FetcherSettings, FetchSession

    clock = Clock()
    leader, _ = partition(1, clock)
    follower, _ = partition(2, clock)
    lead(leader, isr=(1,))
    follow(follower, 1, isr=(1,))
    append(leader, ["a"]), append(leader, ["b"])
    quota = ReplicationQuota(rate_bytes_per_s=1)
    quota.set_throttled("t", frozenset({0}))
    session = FetchSession(2, 1, lambda t, p: follower, FetcherSettings(), quota)
    session.add(("t", 0), 0)
    assert session.epoch_requests(clock.now) == []  # an empty log: straight to fetching

    def fetch(max_bytes: int) -> None:
        (query,) = session.fetch_requests(clock.now)
        read = leader.read(query.fetch_offset, max_bytes, 0, True, replica_id=2)
        session.on_fetch_responses({("t", 0): FetchedPartition(
            read.error_code, read.high_watermark, read.log_start_offset, read.records)}, clock.now)

    fetch(1)  # one batch of two: lagging, and the bytes put the rate over 1 B/s
    assert follower.log.log_end_offset == 1 and quota.is_quota_exceeded(clock.now)
    assert session.fetch_requests(clock.now) == []
    assert session.throttled_until_ms == clock.now + quota.ms_until_under(clock.now) > clock.now
    clock.now += 12_000  # the samples expire: under the rate again
    fetch(1 << 20)  # caught up with the high watermark: in sync, never held back again
    clock.now += 1
    assert quota.is_quota_exceeded(clock.now) and len(session.fetch_requests(clock.now)) == 1


@pytest.mark.parametrize("kind", ["Rate", "SimpleRate"])
def test_a_rate_records_again_after_an_idle_spell_longer_than_its_samples(kind):
    from broker.server.quota import Rate
    rate = (Rate if kind == "Rate" else SimpleRate)(11, 1000, 0)
    rate.record(5000, 0)
    assert rate.measure(20_000) == 0  # purged (a quota'd client idle for 20 s crashed here once)
    rate.record(5000, 20_000)
    assert rate.measure(20_500) > 0


def test_reassign_throttles_name_sources_as_leaders_and_new_replicas_as_followers():
    """kafka-reassign-partitions' calculateProposedMoveMap and its two lists."""
    from broker.tools.reassign_throttle import follower_throttles, leader_throttles, move_map

    moves = move_map({("t", 1): ([1, 2, 4], [4], [1])},  # in progress: adding 4, sources 1,2
                     {("t", 0): [2, 3], ("t", 1): [2, 3], ("u", 0): [1]},
                     {("t", 0): [1, 2], ("t", 1): [1, 2, 4], ("u", 0): [1]})
    assert leader_throttles(moves) == {"t": "0:1,0:2,1:1,1:2", "u": "0:1"}
    assert follower_throttles(moves) == {"t": "0:3,1:3", "u": ""}
    with pytest.raises(ValueError, match="with 0 replicas"):
        move_map({}, {("v", 0): [1]}, {})
