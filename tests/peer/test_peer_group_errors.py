"""The group coordinator's answers on the raw wire, Apache Kafka and pylog: the same request bytes
to each, the error codes and fields a client acts on compared through one stated outcome (what
Apache Kafka 4.1 answers, checked when this tier was written).

Each test makes its own group (and topic); a one-broker peer coordinates every group.
"""

from __future__ import annotations

import pytest
from group_clients import group_peer, unique_group  # noqa: F401  (fixture)
from group_wire import GroupWire, consumer_assignment, consumer_subscription, error_name
from peer_support import GROUP_MIN_SESSION_TIMEOUT_MS, unique_topic
from wire_probe import api_version_ranges

from broker.wire import ApiKey


@pytest.fixture
def wire(group_peer):
    with GroupWire(group_peer) as connection:
        yield connection


@pytest.fixture
def topic(group_peer) -> str:
    return group_peer.create_topic(unique_topic("group-wire"), partitions=2)


def new_group(wire: GroupWire, prefix: str) -> str:
    group = unique_group(prefix)
    wire.ready(group)
    return group


# ------------------------------------------------------------------------------- ApiVersions

GROUP_API_RANGES = {  # what Apache Kafka 4.1 advertises for the classic group protocol
    ApiKey.FIND_COORDINATOR: (0, 6), ApiKey.JOIN_GROUP: (0, 9), ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4), ApiKey.LEAVE_GROUP: (0, 5), ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9), ApiKey.OFFSET_DELETE: (0, 0), ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6), ApiKey.DELETE_GROUPS: (0, 2),
}
# Named: versions pylog's codec does not speak yet, so it does not advertise them; every client
# negotiates the highest version in both ranges, so they are never sent to pylog. FindCoordinator
# v5 may answer TRANSACTION_ABORTABLE (KIP-890) and v6 adds the share-group key type (KIP-932).
PYLOG_RANGES = {**GROUP_API_RANGES, ApiKey.FIND_COORDINATOR: (0, 4)}


def test_group_api_versions(group_peer):
    ranges = api_version_ranges(group_peer)
    expected = PYLOG_RANGES if group_peer.name == "pylog" else GROUP_API_RANGES
    assert {key: ranges.get(key) for key in GROUP_API_RANGES} == expected


# ------------------------------------------------------------------------------------ JoinGroup


@pytest.mark.parametrize("version", [4, 5, 9])
def test_first_join_without_member_id_is_member_id_required(wire, version):
    """KIP-394: from v4 a member with no id gets MEMBER_ID_REQUIRED and an id (``clientId-UUID``),
    no generation; joining again with that id makes it the group's leader, generation 1."""
    group = new_group(wire, "member-id")
    first = wire.join(group, version=version)
    assert (error_name(first.error_code), first.generation_id, first.leader, first.members) == (
        "MEMBER_ID_REQUIRED", -1, "", [])
    assert first.member_id.startswith("peer-tier-") and len(first.member_id) > len("peer-tier-")
    second = wire.join(group, first.member_id, version=version)
    assert (error_name(second.error_code), second.generation_id, second.protocol_name, second.leader,
            second.member_id) == ("NONE", 1, "range", first.member_id, first.member_id)
    assert [m.member_id for m in second.members] == [first.member_id]  # the leader gets the members
    assert second.members[0].metadata == consumer_subscription([])


def test_join_of_an_unknown_member_id(wire):
    group = new_group(wire, "unknown-join")
    assert error_name(wire.join(group, "no-such-member").error_code) == "UNKNOWN_MEMBER_ID"


@pytest.mark.parametrize("session_timeout_ms", [GROUP_MIN_SESSION_TIMEOUT_MS - 1, 1_800_001])
def test_session_timeout_out_of_bounds(wire, session_timeout_ms):
    """group.min.session.timeout.ms (the tier's 1 s, set on both) and group.max.session.timeout.ms
    (30 min, the default)."""
    group = new_group(wire, "session")
    answer = wire.join(group, session_timeout_ms=session_timeout_ms)
    assert (error_name(answer.error_code), answer.member_id) == ("INVALID_SESSION_TIMEOUT", "")


def test_join_with_an_empty_group_id(wire):
    answer = wire.join("")
    assert (error_name(answer.error_code), answer.member_id) == ("INVALID_GROUP_ID", "")


@pytest.mark.parametrize("protocol_type,protocols", [
    ("connect", [("range", b"")]),                        # another protocol type
    ("consumer", [("roundrobin", b"")]),                  # no assignor in common
    ("consumer", []),                                     # no assignor at all
])
def test_inconsistent_group_protocol(wire, topic, protocol_type, protocols):
    """A member whose protocol type differs from the group's, or who shares no protocol name with
    its members, is refused; the group goes on (its member still heartbeats)."""
    group = new_group(wire, "inconsistent")
    member = wire.stable_member(group, topic, [0, 1])
    answer = wire.join(group, protocol_type=protocol_type, protocols=protocols)
    assert error_name(answer.error_code) == "INCONSISTENT_GROUP_PROTOCOL"
    assert wire.heartbeat(group, member.member_id, member.generation_id) == "NONE"


def test_empty_protocols_for_a_new_group(wire):
    """An empty group has no protocol yet: a join without protocols (or without a protocol type)
    is inconsistent with any group."""
    group = new_group(wire, "no-protocols")
    assert error_name(wire.join(group, protocols=[]).error_code) == "INCONSISTENT_GROUP_PROTOCOL"
    assert error_name(wire.join(group, protocol_type="").error_code) == "INCONSISTENT_GROUP_PROTOCOL"


# -------------------------------------------------------------------- Heartbeat and SyncGroup


def test_unknown_member_and_wrong_generation(wire, topic):
    group = new_group(wire, "fenced")
    member = wire.stable_member(group, topic, [0, 1])
    assert wire.heartbeat(group, member.member_id, member.generation_id) == "NONE"
    assert wire.heartbeat(group, "no-such-member", member.generation_id) == "UNKNOWN_MEMBER_ID"
    assert wire.heartbeat(group, member.member_id, member.generation_id + 1) == "ILLEGAL_GENERATION"
    assert wire.heartbeat(group, member.member_id, member.generation_id - 1) == "ILLEGAL_GENERATION"
    unknown = wire.sync(group, "no-such-member", member.generation_id)
    assert error_name(unknown.error_code) == "UNKNOWN_MEMBER_ID"
    stale = wire.sync(group, member.member_id, member.generation_id + 1)
    assert error_name(stale.error_code) == "ILLEGAL_GENERATION"
    offsets = {(topic, 0): 3}
    assert wire.commit(group, offsets, "no-such-member", member.generation_id) == {(topic, 0): "UNKNOWN_MEMBER_ID"}
    assert wire.commit(group, offsets, member.member_id, member.generation_id + 1) == {
        (topic, 0): "ILLEGAL_GENERATION"}
    assert wire.commit(group, offsets, member.member_id, member.generation_id) == {(topic, 0): "NONE"}
    # the group went on: its member is still in it, in the same generation
    assert wire.heartbeat(group, member.member_id, member.generation_id) == "NONE"


def test_heartbeat_to_a_group_that_does_not_exist(wire):
    group = new_group(wire, "no-group")
    assert wire.heartbeat(group, "no-such-member", 1) == "UNKNOWN_MEMBER_ID"


def test_sync_assignment_reaches_the_member(wire, topic):
    group = new_group(wire, "sync")
    member_id, joined = wire.join_new_member(group, [topic])
    assignment = consumer_assignment({topic: [1, 0]})
    synced = wire.sync(group, member_id, joined.generation_id, {member_id: assignment})
    assert (error_name(synced.error_code), synced.protocol_type, synced.protocol_name, synced.assignment) == (
        "NONE", "consumer", "range", assignment)


def test_leave_group(wire, topic):
    group = new_group(wire, "leave")
    member = wire.stable_member(group, topic, [0])
    assert wire.leave(group, ["no-such-member", member.member_id]) == (
        "NONE", [("no-such-member", "UNKNOWN_MEMBER_ID"), (member.member_id, "NONE")])
    assert wire.heartbeat(group, member.member_id, member.generation_id) == "UNKNOWN_MEMBER_ID"


# -------------------------------------------------------------------------------- offsets


def test_commit_to_partitions_and_topics_that_do_not_exist(wire, topic):
    """Kafka checks each partition against its metadata before the group: a partition past the
    topic's count, or a topic that does not exist, is UNKNOWN_TOPIC_OR_PARTITION; the other
    partitions of the same request are committed."""
    group = new_group(wire, "commit-unknown")
    answer = wire.commit(group, {(topic, 0): 7, (topic, 5): 7, ("no-such-topic-x", 0): 7})
    assert answer == {(topic, 0): "NONE", (topic, 5): "UNKNOWN_TOPIC_OR_PARTITION",
                      ("no-such-topic-x", 0): "UNKNOWN_TOPIC_OR_PARTITION"}
    assert wire.fetch_offsets(group, [(topic, 0), (topic, 5)]) == (
        "NONE", {(topic, 0): (7, "m7", "NONE"), (topic, 5): (-1, "", "NONE")})


def test_simple_commit_against_a_group_with_active_members(wire, topic):
    """A "simple" commit (generation -1, no member id: an ``assign()`` consumer, an admin tool)
    is accepted while the group is Empty, refused with UNKNOWN_MEMBER_ID while it has members."""
    group = new_group(wire, "simple")
    assert wire.commit(group, {(topic, 0): 4}) == {(topic, 0): "NONE"}  # no group yet: Empty
    member = wire.stable_member(group, topic, [0, 1])
    assert wire.commit(group, {(topic, 0): 5}) == {(topic, 0): "UNKNOWN_MEMBER_ID"}
    assert wire.fetch_offsets(group, [(topic, 0)])[1] == {(topic, 0): (4, "m4", "NONE")}
    wire.leave(group, [member.member_id])
    assert wire.commit(group, {(topic, 0): 6}) == {(topic, 0): "NONE"}  # Empty again
    assert wire.fetch_offsets(group, [(topic, 0)])[1] == {(topic, 0): (6, "m6", "NONE")}


@pytest.mark.parametrize("version,leader_epoch", [(4, -1), (5, 5), (7, 5), (9, 5)])
def test_committed_leader_epoch_and_null_metadata(wire, topic, version, leader_epoch):
    """A commit's leader epoch (OffsetCommit v6+) comes back from OffsetFetch v5+ (-1 before);
    null metadata is stored as ""."""
    group = new_group(wire, "epoch")
    answer = wire.call(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [{
            "name": topic, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                           "committed_leader_epoch": 5, "committed_metadata": None}]}]})
    assert [error_name(p.error_code) for t in answer.topics for p in t.partitions] == ["NONE"]
    body = {"group_id": group, "topics": None}
    fetched = wire.call(ApiKey.OFFSET_FETCH, {"groups": [body]} if version >= 8 else body, version)
    topics = fetched.groups[0].topics if version >= 8 else fetched.topics
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata) for t in topics for p in t.partitions] == [
        (3, leader_epoch, "")]


@pytest.mark.parametrize("version", [1, 7, 9])
def test_offset_fetch_of_an_unknown_group(wire, topic, version):
    """No committed offset is -1 with no error, whatever the group (v1: per partition only;
    v2+ a top-level error code, NONE; v8+ per group)."""
    group = new_group(wire, "fetch-unknown")
    assert wire.fetch_offsets(group, [(topic, 0), (topic, 1)], version=version) == (
        "NONE", {(topic, 0): (-1, "", "NONE"), (topic, 1): (-1, "", "NONE")})


def test_offset_fetch_of_all_partitions(wire, topic):
    """Topics null: every partition the group has an offset for, and nothing for a group without."""
    group = new_group(wire, "fetch-all")
    assert wire.fetch_offsets(group, None) == ("NONE", {})
    wire.commit(group, {(topic, 0): 11, (topic, 1): 12})
    assert wire.fetch_offsets(group, None) == (
        "NONE", {(topic, 0): (11, "m11", "NONE"), (topic, 1): (12, "m12", "NONE")})


# --------------------------------------------------------------- Describe, List, DeleteGroups


def test_describe_stable_then_empty(wire, topic, group_peer):
    group = new_group(wire, "describe")
    member_id, joined = wire.join_new_member(group, [topic])
    assignment = consumer_assignment({topic: [0, 1]})
    wire.sync(group, member_id, joined.generation_id, {member_id: assignment})
    [stable] = wire.describe([group])
    assert (error_name(stable.error_code), stable.group_id, stable.group_state, stable.protocol_type,
            stable.protocol_data) == ("NONE", group, "Stable", "consumer", "range")
    [member] = stable.members
    assert (member.member_id, member.group_instance_id, member.client_id, member.member_metadata,
            member.member_assignment) == (member_id, None, "peer-tier", consumer_subscription([topic]), assignment)

    wire.leave(group, [member_id])
    [empty] = wire.describe([group])
    assert (error_name(empty.error_code), empty.group_state, empty.protocol_type, empty.protocol_data,
            empty.members) == ("NONE", "Empty", "consumer", "", [])


def test_member_client_host_as_java_prints_it(wire, topic):
    """A member's client host is Java's ``InetAddress.toString()`` of the connection's peer,
    ``"/127.0.0.1"`` (no host name): DescribeGroups answers it, kafka-consumer-groups prints it in
    its HOST column and the group metadata record stores it (clientHost), so lag tools show it."""
    group = new_group(wire, "client-host")
    wire.stable_member(group, topic, [0, 1])
    [described] = wire.describe([group])
    assert [m.client_host for m in described.members] == ["/127.0.0.1"]


def test_describe_unknown_group_is_dead(wire):
    """An unknown group (the empty id too: it is routed, not refused) is Dead without error up to
    v5; v6 (KIP-1043) answers GROUP_ID_NOT_FOUND with a message."""
    group = new_group(wire, "describe-dead")
    for version, outcome in [(5, ("NONE", None)), (6, ("GROUP_ID_NOT_FOUND", f"Group {group} not found."))]:
        # by id: Apache Kafka answers the groups of one request in any order (seen: "" first)
        answers = {g.group_id: g for g in wire.call(ApiKey.DESCRIBE_GROUPS, {"groups": [group, ""]}, version).groups}
        dead, empty = answers[group], answers[""]
        assert (error_name(dead.error_code), dead.error_message, dead.group_state, dead.protocol_type,
                dead.protocol_data, dead.members) == (*outcome, "Dead", "", "", [])
        assert (error_name(empty.error_code), empty.group_state) == (outcome[0], "Dead")


def test_list_groups_with_states(wire, topic):
    stable_group, empty_group = new_group(wire, "list-stable"), new_group(wire, "list-empty")
    wire.stable_member(stable_group, topic, [0, 1])
    wire.commit(empty_group, {(topic, 0): 1})  # a group with offsets only: Empty, no protocol type
    listed = wire.list_groups()
    assert listed[stable_group] == ("consumer", "Stable", "classic")
    assert listed[empty_group] == ("", "Empty", "classic")
    only_empty = wire.list_groups(["Empty"])
    assert empty_group in only_empty and stable_group not in only_empty


def test_delete_groups(wire, topic):
    """Only an Empty group can be deleted (its offsets with it); a group with members is
    NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
    active, empty, unknown = (new_group(wire, name) for name in ("del-active", "del-empty", "del-unknown"))
    wire.stable_member(active, topic, [0, 1])
    wire.commit(empty, {(topic, 0): 9})
    assert wire.delete_groups([active, empty, unknown]) == {
        active: "NON_EMPTY_GROUP", empty: "NONE", unknown: "GROUP_ID_NOT_FOUND"}
    assert wire.fetch_offsets(empty, [(topic, 0)])[1] == {(topic, 0): (-1, "", "NONE")}
    [gone] = wire.describe([empty])
    assert gone.group_state == "Dead"
    [still] = wire.describe([active])
    assert still.group_state == "Stable"
