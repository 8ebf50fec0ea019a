"""The classic protocol's assignors (broker.client.assignors): Java's results on fixed cases,
and properties over random groups: every partition assigned exactly once, balance within 1 with
identical subscriptions, stickiness, and cooperative-sticky never handing a partition to a new
member in the same generation its old owner still holds it (KIP-429)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.assignors import (
    Subscription,
    assignor_names,
    cooperative_sticky_assign,
    range_assign,
    roundrobin_assign,
)


def subs(topics_by_member: dict[str, tuple[str, ...]], owned=None, instances=None, generation=1):
    owned, instances = owned or {}, instances or {}
    return {m: Subscription(tuple(t), tuple(owned.get(m, ())), generation, instances.get(m))
            for m, t in topics_by_member.items()}


# ---------------------------------------------------------------------- fixed cases (Java's)

def test_range_gives_the_first_members_the_extra_partitions_per_topic():
    result = range_assign({"t0": 3, "t1": 3}, subs({"c0": ("t0", "t1"), "c1": ("t0", "t1")}))
    assert result == {"c0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
                      "c1": [("t0", 2), ("t1", 2)]}


def test_range_only_among_members_subscribed_to_the_topic():
    result = range_assign({"t0": 3, "t1": 2}, subs({"c0": ("t0",), "c1": ("t0", "t1"), "c2": ("t1",)}))
    assert result == {"c0": [("t0", 0), ("t0", 1)], "c1": [("t0", 2), ("t1", 0)], "c2": [("t1", 1)]}


def test_roundrobin_deals_partitions_across_topics():
    result = roundrobin_assign({"t0": 3, "t1": 3}, subs({"c0": ("t0", "t1"), "c1": ("t0", "t1")}))
    assert result == {"c0": [("t0", 0), ("t0", 2), ("t1", 1)], "c1": [("t0", 1), ("t1", 0), ("t1", 2)]}


def test_roundrobin_skips_members_not_subscribed():
    # Java RoundRobinAssignorTest.testMultipleConsumersMixedTopics
    result = roundrobin_assign({"t1": 3, "t2": 2},
                               subs({"c0": ("t1",), "c1": ("t1", "t2"), "c2": ("t1",)}))
    assert result == {"c0": [("t1", 0)], "c1": [("t1", 1), ("t2", 0), ("t2", 1)], "c2": [("t1", 2)]}


def test_static_members_come_first_by_instance_id():
    group = subs({"z-member": ("t",), "a-member": ("t",)}, instances={"z-member": "instance-a"})
    assert range_assign({"t": 3}, group) == {"z-member": [("t", 0), ("t", 1)], "a-member": [("t", 2)]}


def test_unknown_topic_and_no_members():
    assert range_assign({}, subs({"c0": ("missing",)})) == {"c0": []}
    assert roundrobin_assign({"t": 2}, {}) == {}
    assert cooperative_sticky_assign({"t": 2}, {}) == {}


def test_cooperative_sticky_keeps_what_is_owned_and_withholds_what_moves():
    owned = {"c0": [("t", p) for p in range(6)]}
    first = cooperative_sticky_assign({"t": 6}, subs({"c0": ("t",), "c1": ("t",)}, owned))
    assert first["c0"] == [("t", 0), ("t", 1), ("t", 2)]
    assert first["c1"] == []  # 3, 4, 5 are withheld until c0 revokes them
    second = cooperative_sticky_assign({"t": 6}, subs({"c0": ("t",), "c1": ("t",)}, first, generation=2))
    assert second == {"c0": [("t", 0), ("t", 1), ("t", 2)], "c1": [("t", 3), ("t", 4), ("t", 5)]}


def test_cooperative_sticky_drops_claims_of_topics_no_longer_subscribed():
    owned = {"c0": [("old", 0), ("t", 0)]}
    result = cooperative_sticky_assign({"t": 2, "old": 1}, subs({"c0": ("t",)}, owned))
    assert result == {"c0": [("t", 0), ("t", 1)]}


def test_cooperative_sticky_two_claims_the_newer_generation_wins():
    group = {"c0": Subscription(("t",), (("t", 0),), 3), "c1": Subscription(("t",), (("t", 0),), 4)}
    result = cooperative_sticky_assign({"t": 2}, group)
    assert ("t", 0) in result["c1"] and ("t", 0) not in result["c0"]


def test_assignor_names_accepts_java_class_names_and_refuses_unknown_ones():
    assert assignor_names("org.apache.kafka.clients.consumer.RangeAssignor, cooperative-sticky") == \
        ["range", "cooperative-sticky"]
    assert assignor_names(["roundrobin"]) == ["roundrobin"]
    with pytest.raises(ValueError, match="sticky-ish"):
        assignor_names("sticky-ish")
    with pytest.raises(ValueError):
        assignor_names("")


# ---------------------------------------------------------------------- properties

topic_counts = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1)
member_ids = st.lists(st.text("xyz0123", min_size=1, max_size=4), min_size=1, max_size=7, unique=True)


def _check_exactly_once(partitions_per_topic, group, result, *, complete=True):
    seen = [tp for tps in result.values() for tp in tps]
    assert len(seen) == len(set(seen)), "a partition given to two members"
    for member_id, tps in result.items():
        for topic, _ in tps:
            assert topic in group[member_id].topics, "a partition of a topic the member did not ask for"
    if complete:
        subscribed = {t for s in group.values() for t in s.topics}
        wanted = {(t, p) for t, n in partitions_per_topic.items() if t in subscribed for p in range(n)}
        assert set(seen) == wanted


def _spread(result) -> int:
    counts = [len(tps) for tps in result.values()]
    return max(counts) - min(counts)


@settings(max_examples=150, deadline=None)
@given(topic_counts, member_ids, st.data())
def test_every_assignor_assigns_each_partition_once(partitions_per_topic, members, data):
    topics = sorted(partitions_per_topic)
    group = {m: Subscription(tuple(data.draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))))
             for m in members}
    for assign in (range_assign, roundrobin_assign, cooperative_sticky_assign):
        result = assign(partitions_per_topic, group)
        assert set(result) == set(group)
        _check_exactly_once(partitions_per_topic, group, result)


@settings(max_examples=150, deadline=None)
@given(topic_counts, member_ids)
def test_identical_subscriptions_are_balanced_within_one(partitions_per_topic, members):
    group = {m: Subscription(tuple(sorted(partitions_per_topic))) for m in members}
    assert _spread(roundrobin_assign(partitions_per_topic, group)) <= 1
    assert _spread(cooperative_sticky_assign(partitions_per_topic, group)) <= 1


def _cooperative_rounds(partitions_per_topic, topics_by_member, owned, rounds_max=4):
    """Rebalance as KIP-429 members do: each keeps what it is assigned, revokes what it is not,
    and the group rebalances again while anything was withheld. Returns every generation's result."""
    history, generation = [], 1
    for _ in range(rounds_max):
        group = subs(topics_by_member, owned, generation=generation)
        result = cooperative_sticky_assign(partitions_per_topic, group)
        for member_id, tps in result.items():
            for tp in tps:
                holder = [m for m, o in owned.items() if tp in o and m != member_id and m in result]
                assert not holder, f"{tp} handed to {member_id} while {holder} still owns it"
        history.append(result)
        generation += 1
        if result == {m: sorted(o) for m, o in owned.items() if m in result} | {
                m: [] for m in result if m not in owned or not owned[m]}:
            break
        owned = {m: list(tps) for m, tps in result.items()}
    return history


@settings(max_examples=150, deadline=None)
@given(topic_counts, member_ids, st.integers(0, 6), st.data())
def test_cooperative_sticky_converges_and_moves_only_the_surplus(partitions_per_topic, members, leavers, data):
    """A stable group (balanced, as the previous generation left it) loses some members and gains
    others: the survivors keep at least the new minimum share of what they owned, nothing is
    owned twice at any step, and the second generation is complete and balanced."""
    topics = tuple(sorted(partitions_per_topic))
    before = cooperative_sticky_assign(partitions_per_topic, {m: Subscription(topics) for m in members})
    stayers = members[: max(len(members) - leavers, 0)]
    joiners = data.draw(st.lists(st.text("pq", min_size=1, max_size=3), max_size=3, unique=True))
    now = {m: topics for m in [*stayers, *joiners]}
    if not now:
        return
    owned = {m: before[m] for m in stayers}
    history = _cooperative_rounds(partitions_per_topic, now, owned)
    total = sum(partitions_per_topic.values())
    floor_share = total // len(now)
    for member_id in stayers:
        kept = set(history[0][member_id]) & set(owned[member_id])
        assert len(kept) >= min(len(owned[member_id]), floor_share), "an owner lost more than its surplus"
    final = history[-1]
    _check_exactly_once(partitions_per_topic, {m: Subscription(t) for m, t in now.items()}, final)
    assert _spread(final) <= 1
    assert len(history) <= 3
