"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup of the pure group coordinator, per state and
version, with the error codes Kafka's GroupMetadataManager (classic part) returns."""

import re

import pytest

from broker.coordinator.group.core import GroupSettings
from broker.coordinator.group.group import GroupState
from broker.coordinator.group.records import GroupMetadataKey, decode_group_metadata_value, decode_key
from group_helpers import GROUP, Harness, subscription

S = GroupState


def form_group(h, n=2, version=5, **kw):
    """n members joined and synced (leader assigns b'a<i>'); returns their member ids."""
    tokens = [h.join_new(version=version, client_id=f"c{i}", **kw) for i in range(n)]
    h.tick()  # the initial delay (0 ms here) completes the join
    answers = [h.answer(t) for t in tokens]
    assert all(a is not None and a.error_code == 0 for a in answers), answers
    ids = [a.member_id for a in answers]
    gen = answers[0].generation_id
    leader = answers[0].leader
    followers = [i for i in ids if i != leader]
    sync_tokens = {m: h.sync(m, gen) for m in followers}
    assert all(h.answer(t) is None for t in sync_tokens.values())  # parked until the leader syncs
    lt = h.sync(leader, gen, {m: f"a{i}".encode() for i, m in enumerate(ids)})
    sync_tokens[leader] = lt
    for i, m in enumerate(ids):
        assert h.answer(sync_tokens[m]).error_code == 0
        assert h.answer(sync_tokens[m]).assignment == f"a{i}".encode()
    assert h.group().state is S.STABLE
    return ids


def test_member_id_required_handshake_v4():
    h = Harness()
    t = h.join(version=4, client_id="client-x")
    a = h.answer(t)
    assert a.error_code == 79
    assert re.fullmatch(r"client-x-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", a.member_id)
    t2 = h.join(version=4, member_id=a.member_id)
    h.tick()
    assert h.answer(t2).error_code == 0 and h.answer(t2).member_id == a.member_id


def test_member_ids_are_deterministic_per_seed():
    ids = []
    for _ in range(2):
        h = Harness(seed=7)
        ids.append(h.answer(h.join(version=4)).member_id)
    assert ids[0] == ids[1]


def test_v3_join_has_no_handshake_and_leader_gets_members():
    h = Harness()
    t1, t2 = h.join(version=3, client_id="a"), h.join(version=3, client_id="b")
    assert h.answer(t1) is None  # parked
    h.tick()
    a1, a2 = h.answer(t1), h.answer(t2)
    assert (a1.error_code, a2.error_code) == (0, 0)
    assert a1.generation_id == a2.generation_id == 1
    assert a1.leader == a1.member_id and a2.leader == a1.member_id
    assert [m.member_id for m in a1.members] == [a1.member_id, a2.member_id]
    assert a2.members == [] and a1.protocol_name == "range"


def test_sync_writes_group_record_before_answering():
    h = Harness()
    h.auto_write = False
    tokens = [h.join_new(client_id=f"c{i}") for i in range(2)]
    h.tick()
    leader = h.answer(tokens[0]).member_id
    follower = h.answer(tokens[1]).member_id
    ft = h.sync(follower, 1)
    lt = h.sync(leader, 1, {leader: b"L", follower: b"F"})
    assert h.answer(lt) is None and h.answer(ft) is None and len(h.pending) == 1
    (key, value), = h.pending[0].records
    assert decode_key(key) == GroupMetadataKey(GROUP)
    v = decode_group_metadata_value(value)
    assert (v.generation, v.protocol, v.leader) == (1, "range", leader)
    assert {m.member_id: bytes(m.assignment) for m in v.members} == {leader: b"L", follower: b"F"}
    h.flush()
    assert h.answer(lt).assignment == b"L" and h.answer(ft).assignment == b"F"
    assert h.group().state is S.STABLE


@pytest.mark.parametrize("append_error,client_error", [(19, 15), (6, 16), (10, -1), (7, 15), (56, 16)])
def test_sync_append_failure_maps_error_and_rebalances(append_error, client_error):
    h = Harness()
    h.auto_write = False
    tokens = [h.join_new(client_id=f"c{i}") for i in range(2)]
    h.tick()
    ids = [h.answer(t).member_id for t in tokens]
    ft = h.sync(ids[1], 1)
    lt = h.sync(ids[0], 1, {ids[0]: b"x"})
    h.flush(append_error)
    assert h.answer(lt).error_code == client_error and h.answer(ft).error_code == client_error
    assert h.group().state is S.PREPARING_REBALANCE


def test_sync_errors():
    h = Harness()
    ids = form_group(h)
    assert h.answer(h.sync(ids[0], 99)).error_code == 22
    assert h.answer(h.sync("nobody", 1)).error_code == 25
    assert h.answer(h.sync("x", 1, group_id="other")).error_code == 25
    assert h.answer(h.sync("x", 1, group_id="")).error_code == 24
    h.join(member_id=ids[1], protocols=(("range", subscription("t", "u")),))  # metadata change
    assert h.group().state is S.PREPARING_REBALANCE
    assert h.answer(h.sync(ids[0], 1)).error_code == 27


@pytest.mark.parametrize("case,expected", [
    ("empty_group_id", 24), ("unknown_group", 25), ("unknown_member", 25),
    ("wrong_generation", 22), ("stable", 0), ("preparing", 27)])
def test_heartbeat_table(case, expected):
    h = Harness()
    ids = form_group(h)
    member, gen, group_id = ids[0], 1, GROUP
    if case == "empty_group_id":
        group_id = ""
    elif case == "unknown_group":
        group_id = "nope"
    elif case == "unknown_member":
        member = "ghost"
    elif case == "wrong_generation":
        gen = 7
    elif case == "preparing":
        h.join_new(client_id="late")
    assert h.answer(h.heartbeat(member, gen, group_id=group_id)).error_code == expected


def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    ids = form_group(h)
    for _ in range(3):  # member 0 keeps heartbeating, member 1 went quiet
        h.advance(4_000)
        assert h.answer(h.heartbeat(ids[0], 1)).error_code in (0, 27)
    assert ids[1] not in h.group().members
    assert h.answer(h.heartbeat(ids[0], 1)).error_code == 27
    t = h.join(member_id=ids[0])
    a = h.answer(t)
    assert a.error_code == 0 and a.generation_id == 2 and [m.member_id for m in a.members] == [ids[0]]


def test_rebalance_timeout_removes_members_that_do_not_rejoin():
    h = Harness()
    ids = form_group(h, rebalance=20_000)
    t0 = h.join(member_id=ids[0], rebalance=20_000)  # the leader asks for a rebalance
    assert h.answer(t0) is None
    for _ in range(4):  # ids[1] heartbeats (gets REBALANCE_IN_PROGRESS) but never rejoins
        h.advance(5_000)
        h.heartbeat(ids[1], 1)
    a = h.answer(t0)
    assert a.error_code == 0 and a.generation_id == 2
    assert list(h.group().members) == [ids[0]]


def test_initial_delay_extends_per_join_capped_by_rebalance_timeout():
    h = Harness(GroupSettings(num_partitions=4, initial_rebalance_delay_ms=3_000))
    t1 = h.join_new(client_id="a", rebalance=7_000)
    h.advance(2_000)
    t2 = h.join_new(client_id="b", rebalance=7_000)
    h.advance(1_000)   # first delay over, a member was added: extended by min(3000, remaining 4000)
    assert h.answer(t1) is None
    h.advance(2_000)
    t3 = h.join_new(client_id="c", rebalance=7_000)
    h.advance(1_000)   # second delay over, extended again by min(3000, remaining 1000)
    assert h.answer(t1) is None
    h.advance(1_000)
    answers = [h.answer(t) for t in (t1, t2, t3)]
    assert all(a.error_code == 0 and a.generation_id == 1 for a in answers)


def test_static_member_rejoin_replaces_id_without_rebalance_and_fences_old():
    h = Harness()
    tokens = [h.join(version=5, instance_id=f"i{i}", client_id=f"c{i}") for i in range(2)]
    h.tick()
    ids = [h.answer(t).member_id for t in tokens]
    assert ids[0].startswith("i0-")
    h.sync(ids[1], 1)
    h.sync(ids[0], 1, {ids[0]: b"A", ids[1]: b"B"})
    t = h.join(version=5, instance_id="i1", client_id="c1")  # restarted, lost its member id
    a = h.answer(t)
    assert a.error_code == 0 and a.generation_id == 1 and a.member_id not in ids
    assert h.group().state is S.STABLE
    assert h.answer(h.heartbeat(ids[1], 1, instance_id="i1")).error_code == 82
    assert h.answer(h.sync(a.member_id, 1, instance_id="i1")).assignment == b"B"


def test_static_leader_rejoin_v9_skips_assignment():
    h = Harness()
    t = h.join(version=9, instance_id="i0")
    h.tick()
    mid = h.answer(t).member_id
    h.sync(mid, 1, {mid: b"A"}, version=5)
    a = h.answer(h.join(version=9, instance_id="i0"))
    assert a.error_code == 0 and a.skip_assignment and len(a.members) == 1


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_v0_2_single_member_error_at_top_level(version):
    h = Harness()
    ids = form_group(h)
    assert h.answer(h.leave([("ghost", None)], version=version)).error_code == 25
    assert h.answer(h.leave([(ids[1], None)], version=version)).error_code == 0
    assert list(h.group().members) == [ids[0]]


def test_leave_batched_v3_per_member_results_and_admin_removal_by_instance():
    h = Harness()
    t = h.join(version=5, instance_id="static-1")
    h.tick()
    sid = h.answer(t).member_id
    h.sync(sid, 1, {sid: b""})
    r = h.answer(h.leave([("", "static-1"), ("ghost", None), ("", "nope")], version=3))
    assert r.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("", "static-1", 0), ("ghost", None, 25), ("", "nope", 25)]
    assert h.group().state is S.EMPTY and h.group().generation_id == 2


def test_last_member_leaving_empties_group_and_writes_empty_record():
    h = Harness()
    ids = form_group(h, n=1)
    h.leave([(ids[0], None)])
    g = h.group()
    assert g.state is S.EMPTY and g.generation_id == 2
    key, value = h.log[h.core.owned_partitions()[0] if False else _partition(h)][-1]
    v = decode_group_metadata_value(value)
    assert v.members == [] and v.generation == 2 and v.protocol is None


def _partition(h):
    from broker.coordinator.group.core import partition_for
    return partition_for(GROUP, h.settings.num_partitions)


@pytest.mark.parametrize("kwargs,expected", [
    (dict(group_id=""), 24),
    (dict(session=1_000), 26),
    (dict(session=2_000_000), 26),
    (dict(member_id="unknown-member"), 25),
    (dict(protocol_type=""), 23),
    (dict(protocols=()), 23),
])
def test_join_errors(kwargs, expected):
    h = Harness()
    assert h.answer(h.join(**kwargs)).error_code == expected


def test_join_inconsistent_protocol_against_existing_group():
    h = Harness()
    form_group(h, n=1)
    a = h.answer(h.join(protocols=(("roundrobin", b""),)))
    assert a.error_code == 23
    a = h.answer(h.join(protocol_type="connect"))
    assert a.error_code == 23


def test_group_max_size():
    h = Harness(GroupSettings(num_partitions=4, initial_rebalance_delay_ms=0, max_size=2))
    form_group(h, n=2)
    a = h.answer(h.join(version=3, client_id="third"))
    assert a.error_code == 81 and a.member_id == ""


def test_protocol_vote_and_leader_selection():
    h = Harness()
    t1 = h.join(version=3, protocols=(("roundrobin", b"1"), ("range", b"1")))
    t2 = h.join(version=3, protocols=(("range", b"2"), ("roundrobin", b"2")))
    t3 = h.join(version=3, protocols=(("range", b"3"), ("sticky", b"3")))
    h.tick()
    assert {h.answer(t).protocol_name for t in (t1, t2, t3)} == {"range"}
    assert h.answer(t1).leader == h.answer(t1).member_id
    assert [bytes(m.metadata) for m in h.answer(t1).members] == [b"1", b"2", b"3"]


def test_join_v0_protocol_name_not_null_on_error():
    h = Harness()
    a = h.answer(h.join(version=0, session=1))
    assert a.error_code == 26 and a.protocol_name == ""


def test_follower_rejoin_in_stable_with_same_metadata_gets_current_generation():
    h = Harness()
    ids = form_group(h)
    a = h.answer(h.join(member_id=ids[1]))
    assert a.error_code == 0 and a.generation_id == 1 and a.members == []
    assert h.group().state is S.STABLE


def test_pending_member_expires_after_session_timeout():
    h = Harness()
    h.join(version=4, session=6_000)
    assert h.group().pending_members
    h.advance(6_000)
    assert not h.group().pending_members


def test_unload_answers_parked_requests_not_coordinator_and_load_restores_stable_group():
    h = Harness()
    ids = form_group(h)
    t = h.join(member_id=ids[0])   # parked (rebalance)
    h.reload()
    assert h.answer(t).error_code == 16
    g = h.group()
    assert g.state is S.STABLE and g.generation_id == 1 and list(g.members) == ids
    assert h.answer(h.heartbeat(ids[1], 1)).error_code == 0
    assert h.answer(h.sync(ids[1], 1)).assignment == b"a1"


def test_requests_for_partitions_not_led_or_loading():
    h = Harness(load_all=False)
    assert h.answer(h.join()).error_code == 16
    h.core.begin_load(_partition(h))
    assert h.answer(h.join()).error_code == 14
    assert h.answer(h.heartbeat("m", 1)).error_code == 14
    h.run(h.core.load_partition(_partition(h), [], h.now))
    assert h.answer(h.join(version=3)) is None  # parked: joining


def test_repeated_join_while_parked_answers_the_first_rebalance_in_progress():
    h = Harness()
    ids = form_group(h)
    first = h.join(member_id=ids[0])
    second = h.join(member_id=ids[0])
    assert h.answer(first).error_code == 27 and h.answer(second) is None
    h.join(member_id=ids[1])
    assert h.answer(second).error_code == 0 and h.answer(second).generation_id == 2


def test_new_member_join_is_bounded_by_the_new_member_timeout():
    """A new member whose first JoinGroup is parked is dropped after 5 minutes (Kafka's
    group.classic.new.member.join.timeout), and its JoinGroup is answered UNKNOWN_MEMBER_ID."""
    h = Harness()
    ids = form_group(h, n=1, session=1_800_000, rebalance=1_800_000)
    late = h.join_new(client_id="late", session=1_800_000, rebalance=1_800_000)
    assert h.group().state is S.PREPARING_REBALANCE and h.answer(late) is None
    h.advance(300_000)
    assert h.answer(late).error_code == 25
    assert len(h.group().members) == 1 and ids[0] in h.group().members


def test_static_member_rejoin_during_completing_rebalance_starts_a_new_generation():
    h = Harness()
    tokens = [h.join(version=5, instance_id=f"i{i}") for i in range(2)]
    h.tick()
    old = h.answer(tokens[1]).member_id
    parked_sync = h.sync(old, 1, instance_id="i1")
    t = h.join(version=5, instance_id="i1")  # restarted before the leader synced
    assert h.answer(parked_sync).error_code == 82
    assert h.group().state is S.PREPARING_REBALANCE
    leader_rejoin = h.join(version=5, member_id=h.answer(tokens[0]).member_id, instance_id="i0")
    assert h.answer(t).generation_id == 2 and h.answer(leader_rejoin).generation_id == 2


def test_commit_keeps_a_member_session_alive():
    h = Harness()
    ids = form_group(h, n=1)
    for _ in range(5):
        h.advance(8_000)
        assert h.answer(h.commit({("t", 0): 1}, member_id=ids[0], generation=1)).topics[0].partitions[0].error_code == 0
    assert ids[0] in h.group().members


def test_group_max_size_during_rebalance_counts_rejoined_members():
    h = Harness(GroupSettings(num_partitions=4, initial_rebalance_delay_ms=0, max_size=2))
    ids = form_group(h, n=2)
    h.join(member_id=ids[0])  # rebalance: one of two rejoined
    third = h.answer(h.join(version=3, client_id="third"))
    assert third is None or third.error_code != 81  # 1 rejoined < 2: accepted, parked
    assert h.answer(h.join(version=3, client_id="fourth")).error_code == 81


@pytest.mark.parametrize("rebalance_ms", [0, -1])
def test_zero_or_negative_rebalance_timeout_does_not_spin_the_timers(rebalance_ms):
    """Kafka does not bound the rebalance timeout; a deadline of "now" must still end."""
    h = Harness()
    t = h.join(version=5, instance_id="s", rebalance=rebalance_ms)
    h.tick()
    mid = h.answer(t).member_id
    h.sync(mid, 1, {mid: b""})
    h.join(version=5, member_id=mid, instance_id="s", rebalance=rebalance_ms)  # leader: rebalance
    for _ in range(5):
        h.advance(1)
    assert h.core.next_deadline() > h.now


def test_heartbeats_and_commits_do_not_grow_the_timer_heap():
    h = Harness()
    ids = form_group(h)
    shard = next(iter(h.core._shards.values())) if len(h.core._shards) == 1 else h.core._shards[_partition(h)]
    for i in range(5_000):
        h.heartbeat(ids[i % 2], 1)
        h.commit({("t", 0): i}, member_id=ids[0], generation=1)
        if i % 500 == 0:
            h.advance(1_000)
    assert len(shard._timers) < 20
    assert h.group().state is S.STABLE and len(h.group().members) == 2


def test_group_over_a_lowered_max_size_rebalances_at_load_and_refuses_the_last_rejoiner():
    h = Harness()
    ids = form_group(h, n=3)
    log = list(h.log[_partition(h)])
    small = Harness(GroupSettings(num_partitions=4, initial_rebalance_delay_ms=0, max_size=2), load_all=False)
    small.run(small.core.load_partition(_partition(h), log, small.now))
    assert small.group().state is S.PREPARING_REBALANCE
    t0, t1 = small.join(member_id=ids[0]), small.join(member_id=ids[1])
    refused = small.answer(small.join(member_id=ids[2]))
    assert refused.error_code == 81 and ids[2] not in small.group().members
    small.advance(30_000)  # the rebalance timeout completes the join without it
    assert small.answer(t0).error_code == 0 and small.answer(t1).generation_id == 2
    assert sorted(small.group().members) == sorted(ids[:2])


def test_added_deadline_reports_what_was_scheduled_since_the_last_call():
    """The shell wakes its timer only when ``added_deadline`` is earlier than its sleep: it must
    see the deadline a join schedules, and nothing for a call that schedules nothing."""
    h = Harness()
    h.core.added_deadline()  # the load's retention deadline
    assert h.core.added_deadline() is None
    h.join(version=5)
    added = h.core.added_deadline()
    assert added is not None and added == h.core.next_deadline()
    assert h.core.added_deadline() is None
