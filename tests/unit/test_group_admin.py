"""ListGroups / DescribeGroups / DeleteGroups of the pure group coordinator."""

from broker.coordinator.group.records import GroupMetadataKey, OffsetCommitKey, decode_key
from broker.wire.apis.delete_groups import DeleteGroupsRequest
from broker.wire.apis.describe_groups import DescribeGroupsRequest
from broker.wire.apis.list_groups import ListGroupsRequest
from group_helpers import DELETE, DESCRIBE, GROUP, LIST, Harness
from test_group_membership import _partition, form_group


def listed(h, version=4, states=(), types=()):
    r = h.answer(h.request(LIST, version, ListGroupsRequest(states_filter=list(states), types_filter=list(types))))
    return r.error_code, sorted((g.group_id, g.protocol_type, g.group_state) for g in r.groups)


def test_list_groups_with_state_filter():
    h = Harness()
    form_group(h)
    h.commit({("t", 0): 1}, group_id="simple")
    assert listed(h) == (0, [(GROUP, "consumer", "Stable"), ("simple", "", "Empty")])
    assert listed(h, states=["stable"]) == (0, [(GROUP, "consumer", "Stable")])
    assert listed(h, states=["Empty", "Dead"]) == (0, [("simple", "", "Empty")])
    assert listed(h, version=5, types=["consumer"]) == (0, [])
    assert listed(h, version=5, types=["Classic"])[1] != []


def test_list_groups_while_loading_reports_load_in_progress():
    h = Harness(load_all=False)
    h.core.begin_load(1)
    assert listed(h)[0] == 14


def test_describe_stable_group_shows_members_assignment_and_protocol():
    h = Harness()
    ids = form_group(h)
    r = h.answer(h.request(DESCRIBE, 4, DescribeGroupsRequest(groups=[GROUP, "nobody"])))
    g, missing = r.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_assignment)) for m in g.members] == [
        (ids[0], "c0", "/127.0.0.1", b"a0"), (ids[1], "c1", "/127.0.0.1", b"a1")]
    assert (missing.error_code, missing.group_state, missing.members) == (0, "Dead", [])


def test_describe_rebalancing_group_hides_metadata():
    h = Harness()
    ids = form_group(h)
    h.join(member_id=ids[0])
    g = h.answer(h.request(DESCRIBE, 4, DescribeGroupsRequest(groups=[GROUP]))).groups[0]
    assert g.group_state == "PreparingRebalance" and g.protocol_data == ""
    assert all(bytes(m.member_metadata) == b"" and bytes(m.member_assignment) == b"" for m in g.members)


def test_delete_groups_non_empty_missing_and_empty_with_tombstones():
    h = Harness()
    form_group(h)
    h.commit({("t", 0): 1, ("t", 1): 2}, group_id="simple")
    r = h.answer(h.request(DELETE, 2, DeleteGroupsRequest(groups_names=[GROUP, "simple", "nobody", ""])))
    assert [(x.group_id, x.error_code) for x in r.results] == [
        (GROUP, 68), ("simple", 0), ("nobody", 69), ("", 24)]
    assert listed(h)[1] == [(GROUP, "consumer", "Stable")]
    from broker.coordinator.group.core import partition_for
    tail = h.log[partition_for("simple", 4)][-3:]
    assert [(decode_key(k), v) for k, v in tail] == [
        (OffsetCommitKey("simple", "t", 0), None), (OffsetCommitKey("simple", "t", 1), None),
        (GroupMetadataKey("simple"), None)]


def test_delete_groups_answer_waits_for_every_append():
    h = Harness()
    h.commit({("t", 0): 1}, group_id="a")
    h.commit({("t", 0): 1}, group_id="b")
    h.auto_write = False
    t = h.request(DELETE, 1, DeleteGroupsRequest(groups_names=["a", "b"]))
    assert h.answer(t) is None and len(h.pending) == 2
    h.flush(19)
    assert [(x.group_id, x.error_code) for x in h.answer(t).results] == [("a", 15), ("b", 15)]
    assert h.core.committed_offsets("a")


def test_statistics_count_what_the_core_holds():
    h = Harness()
    form_group(h)
    h.commit({("t", 0): 1, ("t", 1): 1}, group_id="simple")
    h.auto_write = False
    h.commit({("t", 2): 1}, group_id="simple")
    h.join(version=4)
    stats = h.core.statistics()
    assert (stats["groups"], stats["members"], stats["offsets"], stats["pending_writes"],
            stats["pending_members"], stats["partitions_loaded"]) == (2, 2, 2, 1, 1, 4)


def java_hash(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_partition_for_is_kafkas_utils_abs_of_the_java_hash():
    from broker.coordinator.group.core import partition_for
    assert java_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("polygenelubricants", 50) == 0
    negatives = [g for g in (f"group-{i}" for i in range(200)) if java_hash(g) < 0]
    assert negatives
    for g in negatives + ["my-group", "g", "ü-gruppe"]:
        assert partition_for(g, 50) == abs(java_hash(g)) % 50
    # & 0x7fffffff would put some of those elsewhere
    assert any((java_hash(g) & 0x7FFFFFFF) % 50 != partition_for(g, 50) for g in negatives)
