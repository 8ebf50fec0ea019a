"""OffsetCommit / OffsetFetch / OffsetDelete and retention in the pure group coordinator: the
checks of Kafka's OffsetMetadataManager + ClassicGroup.validateOffsetCommit, the cache changing
only on a successful append, and the error mapping of a failed append."""

import pytest

from broker.coordinator.group.core import GroupSettings
from broker.coordinator.group.group import GroupState
from broker.coordinator.group.records import (
    GroupMetadataKey, OffsetCommitKey, decode_key, decode_offset_commit_value,
)
from broker.wire.apis.offset_delete import OffsetDeleteRequest
from broker.wire.apis.offset_fetch import OffsetFetchRequest
from group_helpers import FETCH, GROUP, OFFSET_DELETE, Harness, commit_codes, fetched, subscription
from test_group_membership import _partition, form_group

S = GroupState


def test_simple_commit_creates_group_and_is_fetched():
    h = Harness()
    r = h.answer(h.commit({("t", 0): 5, ("t", 1): 7}))
    assert commit_codes(r) == {("t", 0): 0, ("t", 1): 0}
    assert fetched(h.answer(h.fetch({"t": [0, 1, 2]}))) == {("t", 0): 5, ("t", 1): 7, ("t", 2): -1}
    assert h.group().state is S.EMPTY and h.group().protocol_type is None
    key, value = h.log[_partition(h)][0]
    assert decode_key(key) == OffsetCommitKey(GROUP, "t", 0)
    v = decode_offset_commit_value(value)
    assert (v.offset, v.leader_epoch, v.commit_timestamp) == (5, 3, h.now)
    assert value[:2] == b"\x00\x03"  # value version 3


def test_fetch_null_topics_returns_all_committed():
    h = Harness()
    h.commit({("a", 0): 1, ("b", 2): 3})
    assert fetched(h.answer(h.fetch(None))) == {("a", 0): 1, ("b", 2): 3}


def test_fetch_unknown_group_answers_minus_one_without_error():
    h = Harness()
    r = h.answer(h.fetch({"t": [0]}, group_id="nobody"))
    assert r.error_code == 0 and fetched(r) == {("t", 0): -1}
    assert r.topics[0].partitions[0].metadata == ""


def test_fetch_v8_multiple_groups_with_routing_errors():
    h = Harness(load_all=False)
    h.run(h.core.load_partition(_partition(h), [], h.now))
    h.commit({("t", 0): 9})
    other = next(g for g in (f"x{i}" for i in range(100)) if _p(h, g) != _partition(h))
    cls = OffsetFetchRequest.OffsetFetchRequestGroup
    tcls = OffsetFetchRequest.OffsetFetchRequestTopics
    req = OffsetFetchRequest(groups=[cls(group_id=GROUP, topics=[tcls(name="t", partition_indexes=[0])]),
                                     cls(group_id=other, topics=None), cls(group_id="", topics=None)])
    r = h.answer(h.request(FETCH, 8, req))
    assert [(g.group_id, g.error_code) for g in r.groups] == [(GROUP, 0), (other, 16), ("", 24)]
    assert r.groups[0].topics[0].partitions[0].committed_offset == 9


def _p(h, group_id):
    from broker.coordinator.group.core import partition_for
    return partition_for(group_id, h.settings.num_partitions)


def test_fetch_errors_v1_per_partition_v2_top_level():
    h = Harness(load_all=False)
    r1 = h.answer(h.fetch({"t": [0]}, version=1))
    assert r1.topics[0].partitions[0].error_code == 16
    r2 = h.answer(h.fetch({"t": [0]}, version=2))
    assert r2.error_code == 16 and r2.topics == []


def test_member_commit_checks():
    h = Harness()
    ids = form_group(h)
    ok = h.answer(h.commit({("t", 0): 1}, member_id=ids[0], generation=1))
    assert commit_codes(ok) == {("t", 0): 0}
    cases = [
        (dict(member_id=ids[0], generation=2), 22),
        (dict(member_id="ghost", generation=1), 25),
        (dict(member_id="", generation=-1), 25),        # simple commit vs a group with members
        (dict(member_id=ids[0], generation=1, instance_id="unknown-instance"), 25),
    ]
    for kwargs, expected in cases:
        assert commit_codes(h.answer(h.commit({("t", 0): 2}, **kwargs))) == {("t", 0): expected}, kwargs


def test_commit_during_completing_rebalance_is_refused_but_preparing_accepted():
    h = Harness()
    ids = form_group(h)
    h.join(member_id=ids[0])  # leader rejoins: PreparingRebalance
    assert h.group().state is S.PREPARING_REBALANCE
    assert commit_codes(h.answer(h.commit({("t", 0): 3}, member_id=ids[1], generation=1))) == {("t", 0): 0}
    h.join(member_id=ids[1])  # everyone rejoined: CompletingRebalance, generation 2
    assert h.group().state is S.COMPLETING_REBALANCE
    assert commit_codes(h.answer(h.commit({("t", 0): 4}, member_id=ids[1], generation=2))) == {("t", 0): 27}


@pytest.mark.parametrize("version,expected", [(8, 22), (9, 69)])
def test_commit_with_generation_to_missing_group(version, expected):
    h = Harness()
    r = h.answer(h.commit({("t", 0): 1}, member_id="m", generation=3, version=version))
    assert commit_codes(r) == {("t", 0): expected}


def test_offset_metadata_too_large_per_partition():
    h = Harness(GroupSettings(num_partitions=4, offset_metadata_max_bytes=4))
    r = h.answer(h.commit({("t", 0): 1}, metadata="12345"))
    assert commit_codes(r) == {("t", 0): 12}
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): -1}


@pytest.mark.parametrize("append_error,client_error", [
    (19, 15), (20, 15), (7, 15), (3, 15), (6, 16), (56, 16), (10, -1), (18, -1), (4, -1), (13, 14), (-1, -1)])
def test_failed_append_maps_error_and_leaves_cache(append_error, client_error):
    h = Harness()
    h.commit({("t", 0): 1})
    h.fail_code = append_error
    r = h.answer(h.commit({("t", 0): 2}))
    assert commit_codes(r) == {("t", 0): client_error}
    h.fail_code = 0
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): 1}


def test_commit_answer_waits_for_append():
    h = Harness()
    h.auto_write = False
    t = h.commit({("t", 0): 1})
    assert h.answer(t) is None
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): -1}
    h.flush()
    assert commit_codes(h.answer(t)) == {("t", 0): 0}


def test_unload_answers_pending_commit_not_coordinator_and_ignores_late_write_done():
    h = Harness()
    h.auto_write = False
    t = h.commit({("t", 0): 1})
    append = h.pending.pop()
    h.run(h.core.unload_partition(_partition(h)))
    assert commit_codes(h.answer(t)) == {("t", 0): 16}
    assert h.core.write_done(append.write_id, 0, h.now) == []


def test_offsets_and_group_survive_reload_last_record_wins_and_tombstones_delete():
    h = Harness()
    h.commit({("t", 0): 1, ("t", 1): 1})
    h.commit({("t", 0): 5})
    od = OffsetDeleteRequest(group_id=GROUP, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name="t", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=1)])])
    r = h.answer(h.request(OFFSET_DELETE, 0, od))
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == 0
    h.reload()
    assert fetched(h.answer(h.fetch(None))) == {("t", 0): 5}


def test_offset_delete_refused_for_subscribed_topic():
    h = Harness()
    ids = form_group(h, protocols=(("range", subscription("t")),))
    h.commit({("t", 0): 1, ("u", 0): 1}, member_id=ids[0], generation=1)
    tcls, pcls = OffsetDeleteRequest.OffsetDeleteRequestTopic, OffsetDeleteRequest.OffsetDeleteRequestPartition
    od = OffsetDeleteRequest(group_id=GROUP, topics=[tcls(name=n, partitions=[pcls(partition_index=0)]) for n in ("t", "u")])
    r = h.answer(h.request(OFFSET_DELETE, 0, od))
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("t", 86), ("u", 0)]
    assert fetched(h.answer(h.fetch(None))) == {("t", 0): 1}
    od2 = OffsetDeleteRequest(group_id="missing", topics=[])
    assert h.answer(h.request(OFFSET_DELETE, 0, od2)).error_code == 69


def test_retention_of_simple_group_from_commit_time_then_group_tombstone():
    day = 24 * 3_600_000
    h = Harness(GroupSettings(num_partitions=4, offsets_retention_ms=day,
                              offsets_retention_check_interval_ms=60_000))
    h.commit({("t", 0): 1})
    h.advance(day - 60_000)
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): 1}
    h.advance(120_000)
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): -1}
    assert h.group() is None
    tail = [(decode_key(k), v) for k, v in h.log[_partition(h)][-2:]]
    assert tail == [(OffsetCommitKey(GROUP, "t", 0), None), (GroupMetadataKey(GROUP), None)]


def test_retention_counts_from_when_group_became_empty():
    day = 24 * 3_600_000
    h = Harness(GroupSettings(num_partitions=4, initial_rebalance_delay_ms=0, offsets_retention_ms=day,
                              offsets_retention_check_interval_ms=60_000))
    ids = form_group(h, n=1, session=1_800_000, protocols=(("range", subscription("t")),))
    h.commit({("t", 0): 1, ("gone", 0): 1}, member_id=ids[0], generation=1)
    for _ in range(78):  # 26 hours as a live member subscribed to "t"
        h.advance(1_200_000)
        assert h.answer(h.heartbeat(ids[0], 1)).error_code == 0
    # the subscribed topic's offset is kept; the unsubscribed one expired from its commit time
    assert fetched(h.answer(h.fetch(None))) == {("t", 0): 1}
    h.leave([(ids[0], None)])
    assert h.group().state is S.EMPTY
    h.advance(day - 120_000)
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): 1}
    h.advance(240_000)
    assert fetched(h.answer(h.fetch({"t": [0]}))) == {("t", 0): -1}
    assert h.group() is None


def test_commit_v1_timestamp_and_v2_retention_become_the_record():
    from broker.wire.apis.offset_commit import OffsetCommitRequest
    h = Harness()
    tcls, pcls = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    v1 = OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[
        tcls(name="t", partitions=[pcls(partition_index=0, committed_offset=4, commit_timestamp=123,
                                        committed_metadata=None)])])
    assert commit_codes(h.answer(h.request(8, 1, v1))) == {("t", 0): 0}
    v2 = OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                             retention_time_ms=60_000, topics=[
        tcls(name="t", partitions=[pcls(partition_index=1, committed_offset=5, committed_metadata="x")])])
    assert commit_codes(h.answer(h.request(8, 2, v2))) == {("t", 1): 0}
    (_, first), (_, second) = h.log[_partition(h)][-2:]
    a, b = decode_offset_commit_value(first), decode_offset_commit_value(second)
    assert (first[:2], a.commit_timestamp, a.metadata) == (b"\x00\x03", 123, "")
    assert (second[:2], b.commit_timestamp, b.expire_timestamp) == (b"\x00\x01", h.now, h.now + 60_000)
