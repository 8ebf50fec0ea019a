"""Consumer groups as clients see them, on Apache Kafka and on pylog: ``subscribe()`` with a
``group.id`` (confluent-kafka, kafka-python, and both in one group), the range assignor's split,
cooperative-sticky's incremental moves, commits, and a new member resuming at the committed
offsets.

Each scenario's expected outcome is stated once (what Apache Kafka 4.1 does) and asserted on
each system (``group_peer``), so the two are compared through the same literal; both systems'
halves run at once (``on_both_peers``), so their waits overlap.
"""

from __future__ import annotations

import pytest
from group_clients import (
    GroupMember,
    open_consumer,
    produce_spread,
    unique_group,
    wait_for_coordinator,
    wait_until,
)
from peer_support import on_both_peers, unique_topic

PARTITIONS = 6
PER_PARTITION = 50


def stable_split(members: list[GroupMember], partitions: int) -> list[frozenset[int]] | None:
    """The members' partitions, once every member has some and together they hold each of the
    topic's partitions exactly once (the group is Stable and every member has its assignment)."""
    held = [sorted(p for _, p in member.assignment) for member in members]
    flat = sorted(p for partitions_of in held for p in partitions_of)
    if all(held) and flat == list(range(partitions)):
        return sorted((frozenset(h) for h in held), key=min)
    return None


@pytest.mark.parametrize("clients", [("confluent", "confluent"), ("kafka-python", "kafka-python"),
                                     ("confluent", "kafka-python")])
@on_both_peers("group_peer")
def test_two_members_split_a_topic_and_read_each_record_once(group_peer, clients):
    """Two members of one group over a 6-partition topic: the range assignor gives each three
    consecutive partitions; records produced after the group is stable are read exactly once
    between them, each by the member holding its partition. Mixed clients share a group: both
    send protocol type ``consumer`` and the assignor name ``range``."""
    topic, group = unique_topic("group-split"), unique_group("split")
    group_peer.create_topic(topic, partitions=PARTITIONS)
    wait_for_coordinator(group_peer, group)
    members = [GroupMember(client, group_peer.bootstrap, group, [topic]) for client in clients]
    try:
        split = wait_until(lambda: stable_split(members, PARTITIONS), f"a stable split of {topic}")
        assert split == [frozenset({0, 1, 2}), frozenset({3, 4, 5})]
        produce_spread(group_peer, topic, PARTITIONS, PER_PARTITION)
        total = PARTITIONS * PER_PARTITION
        wait_until(lambda: sum(len(m.records) for m in members) >= total, f"{total} records read")
        polls = [member.polls for member in members]  # two polls more: a record too many shows
        wait_until(lambda: all(m.polls >= n + 2 for m, n in zip(members, polls)), "two more polls")
        held = [{p for _, p in member.assignment} for member in members]
        records = [member.records for member in members]
        assert sorted(held, key=min) == split  # no rebalance while reading
    finally:
        for member in members:
            member.stop_polling()
        for member in members:
            member.stop()
    read = sorted((p, offset) for seen in records for _, p, offset, _ in seen)
    assert read == [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]  # once each
    for seen, partitions in zip(records, held):
        assert {p for _, p, _, _ in seen} == partitions
        assert all(value == b"p%d-%d" % (p, o) for _, p, o, value in seen)


def read_until(consumer, count: int) -> list[tuple]:
    records: list[tuple] = []
    wait_until(lambda: records.extend(consumer.poll()) or len(records) >= count, f"{count} records")
    return records


@pytest.mark.parametrize("committer,resumer", [("confluent", "kafka-python"), ("kafka-python", "confluent")])
@on_both_peers("group_peer")
def test_a_new_member_resumes_at_the_committed_offsets(group_peer, committer, resumer):
    """A member reads everything, commits explicit offsets (a different one per partition) and
    closes; a new member of the group, of the other client, sees the same ``committed()`` values
    and starts at them: it reads exactly the records from each committed offset on."""
    topic, group = unique_topic("group-resume"), unique_group("resume")
    partitions, per_partition = 3, 10
    group_peer.create_topic(topic, partitions=partitions)
    produce_spread(group_peer, topic, partitions, per_partition)
    wait_for_coordinator(group_peer, group)
    commits = {(topic, p): 2 + 3 * p for p in range(partitions)}  # 2, 5, 8
    first = open_consumer(committer, group_peer.bootstrap, group)
    try:
        first.subscribe([topic])
        assert len(read_until(first, partitions * per_partition)) == partitions * per_partition
        first.commit(commits)
        assert first.committed(sorted(commits)) == commits
    finally:
        first.close()

    second = open_consumer(resumer, group_peer.bootstrap, group)
    try:
        assert second.committed(sorted(commits)) == commits  # before joining: an OffsetFetch only
        second.subscribe([topic])
        expected = sorted((p, o) for (_, p), start in commits.items() for o in range(start, per_partition))
        records = read_until(second, len(expected))
        records += second.poll()  # one more poll: a record before a committed offset would show
        assert sorted((p, o) for _, p, o, _ in records) == expected
        assert second.committed(sorted(commits)) == commits  # reading alone commits nothing
    finally:
        second.close()


@on_both_peers("group_peer")
def test_committed_is_none_for_a_group_without_commits(group_peer):
    """``committed()`` of a group that never committed: no offset (OffsetFetch answers -1 and no
    error), on both clients."""
    topic, group = unique_topic("group-none"), unique_group("none")
    group_peer.create_topic(topic, partitions=2)
    wait_for_coordinator(group_peer, group)
    for client in ("confluent", "kafka-python"):
        consumer = open_consumer(client, group_peer.bootstrap, group)
        try:
            assert consumer.committed([(topic, 0), (topic, 1)]) == {(topic, 0): None, (topic, 1): None}
        finally:
            consumer.close()


@on_both_peers("group_peer")
def test_cooperative_sticky_moves_only_what_must_move(group_peer):
    """KIP-429, all on the client side: a second member joins a group whose first member holds all
    6 partitions; with cooperative-sticky the first member gives up exactly 3 (an incremental
    revoke) and keeps the other 3 throughout, and the second gets the 3 given up. The coordinator
    only has to run two rebalances in a row with correct generations."""
    topic, group = unique_topic("group-coop"), unique_group("coop")
    group_peer.create_topic(topic, partitions=PARTITIONS)
    wait_for_coordinator(group_peer, group)
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    first = GroupMember("confluent", group_peer.bootstrap, group, [topic], **config)
    second = None
    try:
        wait_until(lambda: len(first.assignment) == PARTITIONS, "the first member holds every partition")
        second = GroupMember("confluent", group_peer.bootstrap, group, [topic], **config)
        members = [first, second]
        split = wait_until(lambda: stable_split(members, PARTITIONS), f"a stable split of {topic}")
        kept = {p for _, p in first.assignment}
        moved = {p for _, p in second.assignment}
        first_events, second_events = first.events, second.events
    finally:
        for member in (first, second):
            if member is not None:
                member.stop_polling()
        for member in (first, second):
            if member is not None:
                member.stop()
    assert [len(half) for half in split] == [3, 3]
    nonempty = [(kind, partitions) for kind, partitions in first_events if partitions]
    assert nonempty == [("assign", list(range(PARTITIONS))), ("revoke", sorted(moved))], first_events
    assert [(kind, p) for kind, p in second_events if p] == [("assign", sorted(moved))], second_events
    assert kept | moved == set(range(PARTITIONS)) and not kept & moved
