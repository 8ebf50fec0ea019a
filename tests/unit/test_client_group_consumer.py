"""The consumer's side of a classic group (``group_consumer.ConsumerGroupProtocol``): what it
sends in JoinGroup, how the leader's assignment is computed and encoded, and what eager and
cooperative rebalances do to owned partitions and the listener (commit before revoke, lost
without commit, KIP-429's revoke-then-rejoin)."""

from __future__ import annotations

import re

import pytest

from broker.client.group_consumer import ConsumerGroupProtocol, RebalanceListener
from broker.client.group_membership import JoinedMember
from broker.client.group_state import Generation
from broker.client.metadata import TopicMetadata
from broker.wire.consumer_protocol import decode_assignment, decode_subscription, encode_subscription

GEN_1 = Generation(1, "m-a", "range")
LOST = Generation(-1, "m-a", None)


class StubCluster:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def refresh(self, topics=None):
        class Snapshot:
            pass
        snapshot = Snapshot()
        snapshot.topics = {t: TopicMetadata(t, 0, t.startswith("__"), {}) for t in self.counts}
        return snapshot

    def partitions_for(self, topic: str):
        return list(range(self.counts[topic]))


class StubOwner:
    """The Consumer's two hooks, logged in one timeline with the listener's calls."""

    def __init__(self, log: list) -> None:
        self.log = log
        self.assignment: list = []

    def _group_assign(self, tps):
        self.assignment = list(tps)
        self.log.append(("assignment", tuple(tps)))

    def _group_commit_owned(self, tps):
        self.log.append(("commit", tuple(tps)))


class StubMembership:
    def __init__(self) -> None:
        self.rejoins: list[str] = []

    def request_rejoin(self, reason: str) -> None:
        self.rejoins.append(reason)


def protocol(strategies, counts=None, topics=("t",)):
    log: list = []
    p = ConsumerGroupProtocol(StubOwner(log), StubCluster(counts or {"t": 4}), strategies, None)
    p.membership = StubMembership()
    listener = RebalanceListener(on_assign=lambda tps: log.append(("on_assign", tuple(tps))),
                                 on_revoke=lambda tps: log.append(("on_revoke", tuple(tps))),
                                 on_lost=lambda tps: log.append(("on_lost", tuple(tps))))
    p.set_subscription(list(topics), None, listener)
    return p, log


def assignment(*tps) -> bytes:
    from fake_group_coordinator import assignment_bytes

    by_topic: dict[str, list[int]] = {}
    for t, part in tps:
        by_topic.setdefault(t, []).append(part)
    return assignment_bytes(by_topic)


def test_metadata_offers_every_assignor_with_the_subscription():
    p, _ = protocol(["range", "cooperative-sticky"], topics=("b", "a"))
    offered = p.metadata()
    assert [name for name, _ in offered] == ["range", "cooperative-sticky"]
    sub = decode_subscription(offered[0][1])
    assert list(sub.topics) == ["a", "b"] and list(sub.owned_partitions) == []
    assert not p.cooperative


def test_eager_rebalance_commits_then_revokes_everything_then_assigns_the_new_set():
    p, log = protocol(["range"])
    p.on_join_complete(GEN_1, assignment(("t", 0), ("t", 1)))
    log.clear()
    p.on_join_prepare(GEN_1)
    # the listener runs while the partitions are still assigned (it may commit them itself)
    assert log == [("commit", (("t", 0), ("t", 1))), ("on_revoke", (("t", 0), ("t", 1))), ("assignment", ())]
    log.clear()
    p.on_join_complete(Generation(2, "m-a", "range"), assignment(("t", 1), ("t", 2)))
    assert log == [("assignment", (("t", 1), ("t", 2))), ("on_assign", (("t", 1), ("t", 2)))]
    assert p.membership.rejoins == []


def test_cooperative_keeps_owned_partitions_revokes_only_what_moved_and_rejoins():
    p, log = protocol(["cooperative-sticky"])
    assert p.cooperative
    p.on_join_complete(GEN_1, assignment(("t", 0), ("t", 1), ("t", 2), ("t", 3)))
    sub = decode_subscription(p.metadata()[0][1])
    assert [(tp.topic, list(tp.partitions)) for tp in sub.owned_partitions] == [("t", [0, 1, 2, 3])]
    assert sub.generation_id == 1
    log.clear()
    p.on_join_prepare(GEN_1)
    assert log == []  # nothing revoked before the join
    p.on_join_complete(Generation(2, "m-a", "cooperative-sticky"), assignment(("t", 0), ("t", 1)))
    assert log == [("commit", (("t", 2), ("t", 3))), ("on_revoke", (("t", 2), ("t", 3))),
                   ("assignment", (("t", 0), ("t", 1))), ("assignment", (("t", 0), ("t", 1))),
                   ("on_assign", ())]
    assert len(p.membership.rejoins) == 1


def test_cooperative_revokes_partitions_of_topics_no_longer_subscribed_before_joining():
    p, log = protocol(["cooperative-sticky"], counts={"t": 2, "u": 2}, topics=("t", "u"))
    p.on_join_complete(GEN_1, assignment(("t", 0), ("u", 0)))
    p.set_subscription(["t"], None, p.listener)
    log.clear()
    p.on_join_prepare(GEN_1)
    assert ("on_revoke", (("u", 0),)) in log and ("commit", (("u", 0),)) in log


def test_a_lost_generation_reports_lost_without_committing():
    p, log = protocol(["range"])
    p.on_join_complete(GEN_1, assignment(("t", 0)))
    log.clear()
    p.on_join_prepare(LOST)
    assert log == [("on_lost", (("t", 0),)), ("assignment", ())]


def test_on_lost_defaults_to_on_revoke():
    revoked = []
    RebalanceListener(on_revoke=revoked.append).lost([("t", 0)])
    assert revoked == [[("t", 0)]]


def test_leader_assigns_from_every_members_subscription():
    p, _ = protocol(["range"], counts={"t": 4, "u": 2})
    members = [JoinedMember("m-b", None, encode_subscription({"topics": ["t", "u"], "owned_partitions": []}, 1)),
               JoinedMember("m-a", None, encode_subscription({"topics": ["t"], "owned_partitions": []}, 3))]
    out = p.perform_assignment("range", members)
    decoded = {m: sorted((tp.topic, q) for tp in decode_assignment(b).assigned_partitions for q in tp.partitions)
               for m, b in out.items()}
    assert decoded == {"m-a": [("t", 0), ("t", 1)], "m-b": [("t", 2), ("t", 3), ("u", 0), ("u", 1)]}
    assert all(b[:2] == b"\x00\x01" for b in out.values())  # the lowest subscription version


def test_pattern_matches_whole_names_and_never_internal_topics():
    p, _ = protocol(["range"], counts={"orders-1": 1, "orders-2": 1, "x-orders-3": 1, "__consumer_offsets": 50})
    changed = p.set_subscription([], re.compile("orders-.*|__.*"), p.listener)
    assert changed and p.topics == ["orders-1", "orders-2"]
    assert p.metadata_changed() is None
    p._cluster.counts["orders-9"] = 1
    assert p.metadata_changed() is not None and "orders-9" in p.topics


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_every_assignor_runs_for_the_leader(strategy):
    p, _ = protocol([strategy], counts={"t": 3})
    members = [JoinedMember(m, None, encode_subscription({"topics": ["t"], "owned_partitions": []}, 3))
               for m in ("m-a", "m-b")]
    out = p.perform_assignment(strategy, members)
    total = sorted(q for b in out.values() for tp in decode_assignment(b).assigned_partitions for q in tp.partitions)
    assert total == [0, 1, 2]


def test_consumer_subscribe_argument_rules():
    from broker.client.consumer import Consumer

    with pytest.raises(ValueError, match="group_id"):
        Consumer("127.0.0.1:1").subscribe(["t"])
    with pytest.raises(ValueError, match="group_id"):
        Consumer("127.0.0.1:1").commit({("t", 0): 1})
    consumer = Consumer("127.0.0.1:1", group_id="g")
    with pytest.raises(ValueError, match="topics or a pattern"):
        consumer.subscribe(["t"], pattern="t.*")
    with pytest.raises(ValueError, match="topics or a pattern"):
        consumer.subscribe()
    consumer.subscribe("single-topic")
    assert consumer.subscription() == ["single-topic"]
    with pytest.raises(ValueError, match="unsubscribe"):
        consumer.assign([("t", 0)])
    with pytest.raises(ValueError, match=">= 0"):
        consumer._commit_offsets({("t", 0): -1})
    for bad in ({"partition_assignment_strategy": "sticky-ish"}, {"auto_commit_interval_ms": 0},
                {"default_api_timeout_ms": 0}, {"heartbeat_interval_ms": 50_000}):
        with pytest.raises(ValueError):
            Consumer("127.0.0.1:1", group_id="g", **bad)


def test_consumer_properties_with_kafka_group_names():
    from broker.client.properties import consumer_options_from_properties

    assert consumer_options_from_properties({
        "group.id": "g", "group.instance.id": "i", "session.timeout.ms": "10000",
        "heartbeat.interval.ms": "1000", "max.poll.interval.ms": "60000",
        "partition.assignment.strategy": "cooperative-sticky", "enable.auto.commit": "false",
        "auto.commit.interval.ms": "100", "default.api.timeout.ms": "5000"}) == {
        "group_id": "g", "group_instance_id": "i", "session_timeout_ms": 10000, "heartbeat_interval_ms": 1000,
        "max_poll_interval_ms": 60000, "partition_assignment_strategy": "cooperative-sticky",
        "enable_auto_commit": False, "auto_commit_interval_ms": 100, "default_api_timeout_ms": 5000}
