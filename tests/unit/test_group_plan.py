"""``pylog groups``' pure half (``broker.tools.group_plan``): reset plans as Kafka's
ConsumerGroupCommand computes them, describe rows in its order, the tables, and the argument
parsing of --to-datetime / --by-duration / --topic. The cluster side runs in
tests/peer/test_peer_groups_tool.py against Apache Kafka and pylog."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from broker.tools.group_plan import (
    MemberRow, ResetSpec, describe_table, members_table, offset_rows, parse_datetime_ms, parse_duration_ms,
    parse_topic_partitions, plan_reset, reset_table,
)

T0, T1 = ("t", 0), ("t", 1)
STARTS = {T0: 10, T1: 0}
ENDS = {T0: 50, T1: 20}


@pytest.mark.parametrize("spec, committed, expected", [
    (ResetSpec("earliest"), {}, {T0: 10, T1: 0}),
    (ResetSpec("latest"), {}, {T0: 50, T1: 20}),
    (ResetSpec("offset", 15), {}, {T0: 15, T1: 15}),
    (ResetSpec("offset", 5), {}, {T0: 10, T1: 5}),  # below the log start: clamped up
    (ResetSpec("offset", 45), {}, {T0: 45, T1: 20}),  # past the log end: clamped down
    (ResetSpec("shift", -5), {T0: 30, T1: 3}, {T0: 25, T1: 0}),
    (ResetSpec("shift", 10), {T0: 45, T1: 3}, {T0: 50, T1: 13}),
])
def test_reset_plans(spec, committed, expected):
    assert plan_reset([T1, T0, T0], spec, committed, STARTS, ENDS).offsets == expected


def test_clamping_warns_like_kafka():
    plan = plan_reset([T0], ResetSpec("offset", 99), {}, STARTS, ENDS)
    assert plan.warnings == ("New offset (99) is higher than latest offset for topic partition t-0. "
                             "Value will be set to 50",)
    assert plan_reset([T0], ResetSpec("offset", 20), {}, STARTS, ENDS).warnings == ()


def test_timestamp_without_a_record_falls_back_to_the_log_end():
    plan = plan_reset([T0, T1], ResetSpec("timestamp", 1_000), {}, STARTS, ENDS, {T0: 33, T1: -1})
    assert plan.offsets == {T0: 33, T1: 20}
    assert plan.warnings == ("Warn: Partition 1 from topic t is empty. Falling back to latest known offset.",)


def test_shift_needs_a_committed_offset():
    with pytest.raises(ValueError, match="no current committed offset"):
        plan_reset([T0, T1], ResetSpec("shift", 1), {T0: 12}, STARTS, ENDS)


def test_a_partition_the_cluster_lacks_is_refused():
    with pytest.raises(ValueError, match="t-7 does not exist"):
        plan_reset([("t", 7)], ResetSpec("earliest"), {}, STARTS, ENDS)


@pytest.mark.parametrize("text, expected", [
    ("2024-01-31T08:00:00.000", datetime(2024, 1, 31, 8, tzinfo=timezone.utc)),  # no zone: UTC
    ("2024-01-31T08:00:00.250Z", datetime(2024, 1, 31, 8, 0, 0, 250_000, tzinfo=timezone.utc)),
    ("2024-01-31T09:00:00.000+01:00", datetime(2024, 1, 31, 8, tzinfo=timezone.utc)),
    ("2024-01-31T03:00:00.000-0500", datetime(2024, 1, 31, 8, tzinfo=timezone.utc)),
    ("2024-01-31T08:00:00", datetime(2024, 1, 31, 8, tzinfo=timezone.utc)),
])
def test_datetimes(text, expected):
    assert parse_datetime_ms(text) == int(expected.timestamp() * 1000)


@pytest.mark.parametrize("text", ["2024-01-31", "yesterday", "2024-13-01T00:00:00.000", "2024-01-31T25:00:00"])
def test_bad_datetimes(text):
    with pytest.raises(ValueError, match="--to-datetime"):
        parse_datetime_ms(text)


@pytest.mark.parametrize("text, ms", [
    ("PT15M", 900_000), ("P1D", 86_400_000), ("P1DT2H", 93_600_000), ("PT0.5S", 500), ("pt1h", 3_600_000),
    ("PT1H-30M", 1_800_000),
])
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["15m", "P", "PT", "-PT1M", "PT0S", "P1W"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="--by-duration"):
        parse_duration_ms(text)


def test_topic_arguments():
    assert parse_topic_partitions(["a", "b:0,2", "c:1"]) == (["a"], [("b", 0), ("b", 2), ("c", 1)])
    for bad in ["b:", ":1", "b:x", "b:1:2"]:
        with pytest.raises(ValueError, match="invalid"):
            parse_topic_partitions([bad])


def member(cid, *tps, instance=None):
    return MemberRow("g", cid, instance, "/127.0.0.1", cid.split("-")[0], tuple(tps))


def test_describe_rows_follow_kafka_order():
    # Members with most partitions first, each by partition number; unowned committed last.
    members = [member("a-1", ("t", 2)), member("b-1", ("t", 1), ("u", 0)), member("c-1")]
    committed = {("t", 1): 5, ("t", 2): 7, ("t", 0): 1, ("s", 3): 9}
    ends = {("t", 0): 4, ("t", 1): 8, ("t", 2): 7, ("u", 0): 2}
    rows = offset_rows("g", members, committed, ends)
    assert [(r.topic, r.partition, r.committed, r.log_end, r.lag, r.consumer_id) for r in rows] == [
        ("u", 0, None, 2, None, "b-1"),  # owned, never committed: CURRENT-OFFSET and LAG "-"
        ("t", 1, 5, 8, 3, "b-1"),
        ("t", 2, 7, 7, 0, "a-1"),
        ("s", 3, 9, None, None, None),  # a partition that is gone: no log end
        ("t", 0, 1, 4, 3, None),
    ]


def test_describe_table_columns():
    rows = offset_rows("g", [member("a-1", ("t", 0))], {("t", 0): 3, ("t", 1): 4}, {("t", 0): 5, ("t", 1): 4})
    lines = describe_table(rows).splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[1].split() == ["g", "t", "0", "3", "5", "2", "a-1", "/127.0.0.1", "a"]
    assert lines[2].split() == ["g", "t", "1", "4", "4", "0", "-", "-", "-"]
    tagged = describe_table([r.__class__(**{**r.__dict__, "store": "kafka"}) for r in rows], with_store=True)
    assert tagged.splitlines()[0].split()[-1] == "STORE" and tagged.splitlines()[1].split()[-1] == "kafka"


def test_members_table():
    rows = [member("a-1", ("t", 1), ("t", 0), ("u", 2)), member("b-1")]
    lines = members_table(rows, verbose=True).splitlines()
    assert lines[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert lines[1].split() == ["g", "a-1", "/127.0.0.1", "a", "3", "t:0,1;u:2"]
    assert lines[2].split() == ["g", "b-1", "/127.0.0.1", "b", "0", "-"]
    static = members_table([member("a-1", instance="i-1"), member("b-1")]).splitlines()
    assert static[0].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert static[1].split()[2] == "i-1"


def test_reset_table():
    assert reset_table("g", {("t", 1): 7, ("t", 0): 0}).splitlines() == [
        "GROUP  TOPIC  PARTITION  NEW-OFFSET",
        "g      t      0          0",
        "g      t      1          7",
    ]
