"""A classic group's life on the raw wire, Apache Kafka and pylog: a second member's join moves a
Stable group through PreparingRebalance and CompletingRebalance back to Stable (what each member
is answered in each state), static membership (KIP-345: a restarted instance takes its place, the
old member id is fenced), expiry of a member that stops heartbeating, OffsetDelete, and the
offset metadata bound. One stated outcome per scenario: what Apache Kafka 4.1 answers.

Members are raw connections (``GroupWire``): a JoinGroup or SyncGroup the coordinator parks is
sent on the member's own connection and received later, while another connection asks.
"""

from __future__ import annotations

import time

import pytest
from group_clients import group_peer, unique_group, wait_until  # noqa: F401  (fixture)
from group_wire import (
    GroupWire,
    consumer_assignment,
    consumer_subscription,
    error_name,
    join_body,
    sync_body,
)
from peer_support import unique_topic

from broker.wire import ApiKey

PARTITIONS = 4
EXPIRY_SESSION_TIMEOUT_MS = 1_500  # above the tier's group.min.session.timeout.ms (peer_support)


@pytest.fixture
def topic(group_peer) -> str:
    return group_peer.create_topic(unique_topic("group-rebalance"), partitions=PARTITIONS)


@pytest.fixture
def connections(group_peer):
    """Three connections: member A's, member B's, and one for the test's own questions."""
    opened = [GroupWire(group_peer) for _ in range(3)]
    try:
        yield opened
    finally:
        for connection in opened:
            connection.raw.close()


def state(wire: GroupWire, group: str) -> tuple[str, list[str]]:
    [described] = wire.describe([group])
    return described.group_state, sorted(m.member_id for m in described.members)


def test_a_second_member_rebalances_the_group(connections, topic):
    a, b, admin = connections
    group = unique_group("rebalance")
    admin.ready(group)
    subscription = [("range", consumer_subscription([topic]))]
    member_a = a.stable_member(group, topic, list(range(PARTITIONS)))
    first_b = b.join(group, protocols=subscription)
    assert error_name(first_b.error_code) == "MEMBER_ID_REQUIRED"
    b_id = first_b.member_id
    assert state(admin, group) == ("Stable", [member_a.member_id])  # a pending member is no member yet

    # B joins with its id: the coordinator parks it and the group prepares a rebalance
    b_join = b.send(ApiKey.JOIN_GROUP, join_body(group, b_id, protocols=subscription))
    wait_until(lambda: state(admin, group)[0] == "PreparingRebalance", f"{group} PreparingRebalance")
    gen1 = member_a.generation_id
    assert admin.heartbeat(group, member_a.member_id, gen1) == "REBALANCE_IN_PROGRESS"
    assert error_name(admin.sync(group, member_a.member_id, gen1).error_code) == "REBALANCE_IN_PROGRESS"
    # a commit of the current generation is still taken while the group prepares
    assert admin.commit(group, {(topic, 0): 1}, member_a.member_id, gen1) == {(topic, 0): "NONE"}

    # A rejoins: everyone has, the rebalance completes; A stays leader and alone gets the members
    a_join = a.send(ApiKey.JOIN_GROUP, join_body(group, member_a.member_id, protocols=subscription))
    joined_a, joined_b = a.receive(ApiKey.JOIN_GROUP, a_join), b.receive(ApiKey.JOIN_GROUP, b_join)
    gen2 = gen1 + 1
    for joined, member_id in ((joined_a, member_a.member_id), (joined_b, b_id)):
        assert (error_name(joined.error_code), joined.generation_id, joined.protocol_name, joined.leader,
                joined.member_id) == ("NONE", gen2, "range", member_a.member_id, member_id)
    assert sorted((m.member_id, m.metadata) for m in joined_a.members) == sorted(
        [(member_a.member_id, subscription[0][1]), (b_id, subscription[0][1])])
    assert joined_b.members == []
    assert state(admin, group)[0] == "CompletingRebalance"
    assert admin.heartbeat(group, member_a.member_id, gen2) == "NONE"
    assert admin.commit(group, {(topic, 0): 2}, member_a.member_id, gen2) == {(topic, 0): "REBALANCE_IN_PROGRESS"}

    # B's SyncGroup waits for the leader's, which carries everyone's assignment
    b_sync = b.send(ApiKey.SYNC_GROUP, sync_body(group, b_id, gen2))
    assignments = {member_a.member_id: consumer_assignment({topic: [0, 1]}), b_id: consumer_assignment({topic: [2, 3]})}
    synced_a = a.sync(group, member_a.member_id, gen2, assignments)
    synced_b = b.receive(ApiKey.SYNC_GROUP, b_sync)
    assert (error_name(synced_a.error_code), synced_a.assignment) == ("NONE", assignments[member_a.member_id])
    assert (error_name(synced_b.error_code), synced_b.assignment) == ("NONE", assignments[b_id])
    assert state(admin, group) == ("Stable", sorted([member_a.member_id, b_id]))
    assert admin.heartbeat(group, member_a.member_id, gen1) == "ILLEGAL_GENERATION"
    assert admin.commit(group, {(topic, 2): 7}, b_id, gen2) == {(topic, 2): "NONE"}

    # B leaves: A is told to rejoin, and alone makes the next generation at once
    assert admin.leave(group, [b_id]) == ("NONE", [(b_id, "NONE")])
    assert admin.heartbeat(group, member_a.member_id, gen2) == "REBALANCE_IN_PROGRESS"
    rejoined = a.join(group, member_a.member_id, protocols=subscription)
    assert (error_name(rejoined.error_code), rejoined.generation_id, rejoined.leader) == (
        "NONE", gen2 + 1, member_a.member_id)
    assert [m.member_id for m in rejoined.members] == [member_a.member_id]


def test_static_member_restart_fences_the_old_member_id(connections, topic):
    """KIP-345: a member with ``group.instance.id`` joins without the member-id round trip; a
    restart of the same instance (a join with an empty member id) gets a new member id and takes
    the old one's place in the same generation (no rebalance: its metadata did not change); the
    old member id is fenced (FENCED_INSTANCE_ID). A LeaveGroup naming the instance removes it."""
    wire, restarted, admin = connections
    group, instance = unique_group("static"), "instance-1"
    admin.ready(group)
    subscription = [("range", consumer_subscription([topic]))]
    joined = wire.join(group, protocols=subscription, group_instance_id=instance)
    assert (error_name(joined.error_code), joined.generation_id, joined.leader) == ("NONE", 1, joined.member_id)
    old_id = joined.member_id
    synced = wire.sync(group, old_id, 1, {old_id: consumer_assignment({topic: [0, 1, 2, 3]})}, instance)
    assert error_name(synced.error_code) == "NONE"

    again = restarted.join(group, protocols=subscription, group_instance_id=instance)
    new_id = again.member_id
    assert new_id != old_id
    assert (error_name(again.error_code), again.generation_id, again.leader, again.skip_assignment) == (
        "NONE", 1, new_id, True)  # KIP-814: the static leader is not asked to assign again
    assert admin.heartbeat(group, old_id, 1, instance) == "FENCED_INSTANCE_ID"
    assert admin.heartbeat(group, new_id, 1, instance) == "NONE"
    assert admin.commit(group, {(topic, 0): 3}, old_id, 1, group_instance_id=instance) == {
        (topic, 0): "FENCED_INSTANCE_ID"}
    [described] = admin.describe([group])
    assert (described.group_state, [(m.member_id, m.group_instance_id) for m in described.members]) == (
        "Stable", [(new_id, instance)])

    left = admin.call(ApiKey.LEAVE_GROUP, {"group_id": group, "members": [
        {"member_id": "", "group_instance_id": instance}]})
    assert (error_name(left.error_code), [(m.member_id, m.group_instance_id, error_name(m.error_code))
                                          for m in left.members]) == ("NONE", [("", instance, "NONE")])
    assert state(admin, group) == ("Empty", [])


def test_a_member_that_stops_heartbeating_is_expelled(connections, topic):
    """No heartbeat for session.timeout.ms (1.5 s, the tier's brokers allow from 1 s): the member
    is removed, the group is Empty, and the member's next heartbeat is UNKNOWN_MEMBER_ID."""
    wire, _, admin = connections
    group = unique_group("expiry")
    admin.ready(group)
    member = wire.stable_member(group, topic, [0, 1], session_timeout_ms=EXPIRY_SESSION_TIMEOUT_MS)
    last_heartbeat = time.monotonic()
    assert admin.heartbeat(group, member.member_id, member.generation_id) == "NONE"
    wait_until(lambda: state(admin, group) == ("Empty", []), f"{group} Empty",
               timeout_s=EXPIRY_SESSION_TIMEOUT_MS / 1000 + 10)
    expelled_after_s = time.monotonic() - last_heartbeat
    assert expelled_after_s >= EXPIRY_SESSION_TIMEOUT_MS / 1000 - 0.5  # not before its session timed out
    assert admin.heartbeat(group, member.member_id, member.generation_id) == "UNKNOWN_MEMBER_ID"


def test_offset_delete(connections, topic, group_peer):
    """OffsetDelete (KIP-496): refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) for a topic an
    active member subscribes to, done for other topics and once the group is Empty; an unknown
    group is GROUP_ID_NOT_FOUND."""
    wire, _, admin = connections
    group = unique_group("offset-delete")
    other = group_peer.create_topic(unique_topic("group-other"), partitions=1)
    admin.ready(group)
    member = wire.stable_member(group, topic, [0, 1, 2, 3])
    committed = {(topic, 0): 5, (other, 0): 6}
    assert admin.commit(group, committed, member.member_id, member.generation_id) == {
        (topic, 0): "NONE", (other, 0): "NONE"}
    assert admin.delete_offsets(group, [(topic, 0)]) == ("NONE", {(topic, 0): "GROUP_SUBSCRIBED_TO_TOPIC"})
    assert admin.delete_offsets(group, [(other, 0)]) == ("NONE", {(other, 0): "NONE"})
    assert admin.fetch_offsets(group, None) == ("NONE", {(topic, 0): (5, "m5", "NONE")})
    admin.leave(group, [member.member_id])
    assert admin.delete_offsets(group, [(topic, 0)]) == ("NONE", {(topic, 0): "NONE"})
    assert admin.fetch_offsets(group, None) == ("NONE", {})
    assert admin.delete_offsets(unique_group("no-such"), [(topic, 0)])[0] == "GROUP_ID_NOT_FOUND"


def test_offset_metadata_larger_than_the_limit(connections, topic):
    """offset.metadata.max.bytes (4096): longer metadata is OFFSET_METADATA_TOO_LARGE for that
    partition; 4096 is accepted."""
    _, _, admin = connections
    group = unique_group("metadata")
    admin.ready(group)
    assert admin.commit(group, {(topic, 0): 1}, metadata="x" * 4097) == {(topic, 0): "OFFSET_METADATA_TOO_LARGE"}
    assert admin.commit(group, {(topic, 1): 2}, metadata="y" * 4096) == {(topic, 1): "NONE"}
    assert admin.fetch_offsets(group, [(topic, 0), (topic, 1)])[1] == {
        (topic, 0): (-1, "", "NONE"), (topic, 1): (2, "y" * 4096, "NONE")}


def test_a_group_record_too_large_for_the_offsets_topic(connections, topic):
    """A member's metadata of 1.2 MB joins (requests may be that large), but the group record
    SyncGroup must write exceeds message.max.bytes (1 MiB): the sync is UNKNOWN_SERVER_ERROR with
    no assignment, the group goes back to PreparingRebalance (its member is told to rejoin), and
    the generation's commits are still taken."""
    wire, _, admin = connections
    group = unique_group("huge-metadata")
    admin.ready(group)
    protocols = [("range", b"\0" * 1_200_000)]
    first = wire.join(group, protocols=protocols)
    joined = wire.join(group, first.member_id, protocols=protocols)
    assert (error_name(joined.error_code), joined.generation_id) == ("NONE", 1)
    synced = wire.sync(group, first.member_id, 1, {first.member_id: consumer_assignment({topic: [0]})})
    assert (error_name(synced.error_code), synced.assignment) == ("UNKNOWN_SERVER_ERROR", b"")
    assert state(admin, group) == ("PreparingRebalance", [first.member_id])
    assert admin.heartbeat(group, first.member_id, 1) == "REBALANCE_IN_PROGRESS"
    assert admin.commit(group, {(topic, 0): 1}, first.member_id, 1) == {(topic, 0): "NONE"}
