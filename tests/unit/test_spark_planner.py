"""The pure offset planner of the pylog connector, table-driven against Spark's rules
(KafkaOffsetRangeCalculator, KafkaMicroBatchStream.rateLimit/delayBatch,
KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets). No broker, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_log.options import BATCH, STREAM, OptionError, Subscription, parse_source_options
from spark_log.planner import (
    DataLossError,
    LogSnapshot,
    OffsetRange,
    check_data_loss,
    delay_batch,
    plan_batch,
    rate_limit,
    report_data_loss,
    resolve_offsets,
    resolve_subscription,
    split_ranges,
    timestamp_queries,
)


def R(tp, a, b):
    return OffsetRange(tp[0], tp[1], a, b)


T1, T2, T3 = ("t", 1), ("t", 2), ("t", 3)


# ------------------------------------------------------------------ splitting (KafkaOffsetRangeCalculatorSuite)

@pytest.mark.parametrize("name, ranges, m, r, expected", [
    ("no options: one task per partition", [R(T1, 1, 2), R(T2, 1, 2)], None, None,
     [R(T1, 1, 2), R(T2, 1, 2)]),
    ("enough partitions: unchanged", [R(T1, 1, 2), R(T2, 1, 2), R(T3, 1, 2)], 3, None,
     [R(T1, 1, 2), R(T2, 1, 2), R(T3, 1, 2)]),
    ("minPartitions=1", [R(T1, 1, 2)], 1, None, [R(T1, 1, 2)]),
    ("one partition to four", [R(T1, 1, 5)], 4, None,
     [R(T1, 1, 2), R(T1, 2, 3), R(T1, 3, 4), R(T1, 4, 5)]),
    ("skewed: small stays whole, large takes the rest", [R(T1, 1, 5), R(T2, 1, 21)], 3, None,
     [R(T1, 1, 5), R(T2, 1, 11), R(T2, 11, 21)]),
    ("SPARK-30656: empty ranges are ignored", [R(T1, 1, 1), R(T2, 1, 21)], 4, None,
     [R(T2, 1, 6), R(T2, 6, 11), R(T2, 11, 16), R(T2, 16, 21)]),
    ("SPARK-30656: very skewed", [R(T1, 1, 2), R(T2, 1, 1021)], 4, None,
     [R(T1, 1, 2), R(T2, 1, 341), R(T2, 341, 681), R(T2, 681, 1021)]),
    ("negative and empty ranges are dropped", [R(T1, 5, 3), R(T2, 4, 4), R(T3, 0, 2)], None, None,
     [R(T3, 0, 2)]),
    ("last piece takes the remainder", [R(T1, 0, 10)], 3, None,
     [R(T1, 0, 3), R(T1, 3, 6), R(T1, 6, 10)]),
    ("maxRecordsPerPartition cuts into ceil(size/r)", [R(T1, 0, 10)], None, 3,
     [R(T1, 0, 2), R(T1, 2, 4), R(T1, 4, 7), R(T1, 7, 10)]),
    ("maxRecordsPerPartition: small ranges untouched", [R(T1, 0, 3), R(T2, 0, 4)], None, 3,
     [R(T1, 0, 3), R(T2, 0, 2), R(T2, 2, 4)]),
    ("both: split by records, then again up to minPartitions", [R(T1, 0, 10)], 4, 5,
     [R(T1, 0, 2), R(T1, 2, 5), R(T1, 5, 7), R(T1, 7, 10)]),
    ("both: enough pieces after the records split", [R(T1, 0, 10)], 2, 5, [R(T1, 0, 5), R(T1, 5, 10)]),
    ("Scala rounding: half rounds up", [R(T1, 0, 1), R(T2, 0, 3)], 2, None,
     [R(T1, 0, 1), R(T2, 0, 3)]),
])
def test_split_ranges(name, ranges, m, r, expected):
    assert split_ranges(ranges, m, r) == expected, name


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=8), st.integers(1, 40),
       st.one_of(st.none(), st.integers(1, 3000)))
def test_split_covers_every_offset_exactly_once(sizes, m, r):
    ranges = [R(("t", i), 100, 100 + size) for i, size in enumerate(sizes)]
    pieces = split_ranges(ranges, m, r)
    for i, size in enumerate(sizes):
        mine = sorted((p for p in pieces if p.partition == i), key=lambda p: p.from_offset)
        covered = [o for p in mine for o in range(p.from_offset, p.until_offset)]
        assert covered == list(range(100, 100 + size))
        assert all(p.size > 0 for p in mine)
        if r is not None:
            assert all(p.size <= r for p in mine)


# ------------------------------------------------------------------ rate limit (maxOffsetsPerTrigger)

@pytest.mark.parametrize("limit, start, latest, new, expected", [
    ("proportional, small partitions not starved", {T1: 0, T2: 0, T3: 0}, {T1: 100, T2: 10, T3: 1}, {},
     {T1: 9, T2: 1, T3: 1}),
    ("enough room: up to latest", {T1: 0, T2: 0}, {T1: 3, T2: 4}, {}, {T1: 3, T2: 4}),
    ("nothing new: latest", {T1: 7}, {T1: 7}, {}, {T1: 7}),
    ("new partition starts at its earliest", {T1: 0}, {T1: 50, T2: 150}, {T2: 50}, {T1: 3, T2: 56}),
    ("partition with no backlog keeps latest", {T1: 0, T2: 9}, {T1: 100, T2: 9}, {}, {T1: 10, T2: 9}),
    ("offsets that went back are left for the data-loss check", {T1: 20, T2: 0}, {T1: 5, T2: 100}, {},
     {T1: 5, T2: 10}),
])
def test_rate_limit(limit, start, latest, new, expected):
    assert rate_limit(10, start, latest, new) == expected, limit


def test_rate_limit_overflow_guard():
    big = 2**63 - 10
    assert rate_limit(2**62, {T1: big}, {T1: 2**63 - 1}, {}) == {T1: 2**63 - 1}


@given(st.dictionaries(st.integers(0, 6), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1),
       st.integers(1, 500))
def test_rate_limit_never_passes_latest_nor_goes_back(parts, limit):
    start = {("t", p): a for p, (a, _) in parts.items()}
    latest = {("t", p): a + b for p, (a, b) in parts.items()}
    end = rate_limit(limit, start, latest, {})
    for tp in latest:
        assert start[tp] <= end[tp] <= latest[tp]
    backlog = sum(latest[tp] - start[tp] for tp in latest)
    taken = sum(end[tp] - start[tp] for tp in latest)
    assert taken <= max(limit, 0) + len(latest)  # rounding up small shares adds at most 1 each
    if backlog <= limit:
        assert end == latest


# ------------------------------------------------------------------ delay (minOffsetsPerTrigger + maxTriggerDelay)

@pytest.mark.parametrize("case, latest, start, now, last, expected", [
    ("first trigger never waits (last = 0)", {T1: 1}, {T1: 0}, 1_000_000, 0, (False, 1_000_000)),
    ("too few rows: skip", {T1: 5}, {T1: 0}, 1000, 900, (True, 900)),
    ("enough rows: fire", {T1: 10}, {T1: 0}, 1000, 900, (False, 1000)),
    ("delay passed: fire with few rows", {T1: 1}, {T1: 0}, 1500, 900, (False, 1500)),
    ("new partitions count from 0", {T1: 3, T2: 7}, {T1: 0}, 1000, 900, (False, 1000)),
])
def test_delay_batch(case, latest, start, now, last, expected):
    assert delay_batch(10, latest, start, now, last, 500) == expected, case


# ------------------------------------------------------------------ data loss (the four driver checks)

@pytest.mark.parametrize("case, start, end, earliest_new, begin, kinds", [
    ("nothing wrong", {T1: 0}, {T1: 5}, {}, {T1: 0}, []),
    ("(a) new partition deleted before its earliest offset was read", {T1: 0}, {T1: 5, T2: 3}, {},
     {T1: 0}, ["new_partition_gone"]),
    ("(b) new partition does not start at 0", {T1: 0}, {T1: 5, T2: 9}, {T2: 4}, {T1: 0, T2: 4},
     ["new_partition_not_from_zero"]),
    ("new partition from 0 is fine", {T1: 0}, {T1: 5, T2: 9}, {T2: 0}, {T1: 0, T2: 0}, []),
    ("(c) partition gone", {T1: 0, T2: 4}, {T1: 5}, {}, {T1: 0}, ["partition_gone"]),
    ("(d) offsets went back", {T1: 10}, {T1: 4}, {}, {T1: 10}, ["offset_went_back"]),
    ("all at once", {T1: 10, T3: 1}, {T1: 4, T2: 1, ("u", 0): 2}, {("u", 0): 2}, {T1: 10, ("u", 0): 2},
     ["new_partition_gone", "new_partition_not_from_zero", "partition_gone", "offset_went_back"]),
])
def test_check_data_loss(case, start, end, earliest_new, begin, kinds):
    got_begin, losses = check_data_loss(start, end, earliest_new)
    assert got_begin == begin, case
    assert [loss.kind for loss in losses] == kinds, case


def test_report_data_loss_fails_or_warns():
    _, losses = check_data_loss({T1: 10}, {T1: 4}, {})
    with pytest.raises(DataLossError, match="t-1's offset was changed from 10 to 4.*'failOnDataLoss' to 'false'"):
        report_data_loss(losses, True, print)
    warned = []
    report_data_loss(losses, False, warned.append)
    assert len(warned) == 1 and "'failOnDataLoss' to 'true'" in warned[0]


# ------------------------------------------------------------------ subscription and offset resolution

TOPICS = {"events": [0, 1], "events-eu": [0], "logs": [0, 1, 2], "ev": [0]}


@pytest.mark.parametrize("sub, expected, missing", [
    (Subscription("subscribe", ("logs", "nope")), [("logs", 0), ("logs", 1), ("logs", 2)], []),
    (Subscription("subscribePattern", (), "ev.*"), [("ev", 0), ("events", 0), ("events", 1), ("events-eu", 0)], []),
    (Subscription("subscribePattern", (), "events"), [("events", 0), ("events", 1)], []),  # whole-name match
    (Subscription("assign", ("events", "logs"), None, (("events", 1), ("logs", 7))), [("events", 1)], [("logs", 7)]),
])
def test_resolve_subscription(sub, expected, missing):
    assert resolve_subscription(sub, TOPICS) == (expected, missing)


SNAP = LogSnapshot(
    partitions=(T1, T2),
    earliest={T1: 10, T2: 0},
    latest={T1: 100, T2: 50},
    by_timestamp={(T1, 1000): 40, (T2, 1000): -1, (T1, 5): 10, (T2, 5): 0},
    committed={T1: 70},
)


def spec(mode=STREAM, **options):
    return parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **options}, mode)


@pytest.mark.parametrize("options, starting, expected", [
    ({"startingOffsets": "earliest"}, True, {T1: 10, T2: 0}),
    ({"startingOffsets": "latest"}, True, {T1: 100, T2: 50}),
    ({"startingOffsets": '{"t":{"1":-2,"2":-1}}'}, True, {T1: 10, T2: 50}),
    ({"startingOffsets": '{"t":{"1":5,"2":7}}'}, True, {T1: 5, T2: 7}),  # below earliest: the executor's problem
    ({"startingTimestamp": "5"}, True, {T1: 10, T2: 0}),
    ({"startingOffsetsByTimestamp": '{"t":{"1":1000,"2":5}}'}, True, {T1: 40, T2: 0}),
    ({"startingTimestamp": "1000", "startingOffsetsByTimestampStrategy": "latest"}, True, {T1: 40, T2: 50}),
    ({"endingTimestamp": "1000"}, False, {T1: 40, T2: 50}),  # no match ends at latest
])
def test_resolve_offsets(options, starting, expected):
    opts = spec(BATCH if not starting else STREAM, **options)
    which = opts.starting if starting else opts.ending
    assert resolve_offsets(which, SNAP, starting=starting) == expected


def test_resolve_group_offsets_falls_back_to_earliest():
    opts = spec(BATCH, **{"startingOffsets": "group", "kafka.group.id": "g", "offsets.store": "zookeeper",
                          "zookeeper.connect": "h:2181"})
    assert resolve_offsets(opts.starting, SNAP, starting=True) == {T1: 70, T2: 0}


@pytest.mark.parametrize("options, fragment", [
    ({"startingOffsets": '{"t":{"1":5}}'}, r"'startingOffsets' must give every assigned topic-partition "
                                           r"\(t-1, t-2\); missing t-2"),
    ({"startingOffsets": '{"t":{"1":5,"2":1,"9":0}}'}, "not assigned or not existing: t-9"),
    ({"startingOffsetsByTimestamp": '{"t":{"1":5}}'}, "'startingOffsetsByTimestamp' must give every"),
    ({"startingTimestamp": "1000"}, "no offset of t-2 has a timestamp at or after 1000"),
])
def test_resolve_offsets_errors(options, fragment):
    opts = spec(STREAM, **options)
    with pytest.raises(OptionError, match=fragment):
        resolve_offsets(opts.starting, SNAP, starting=True)


def test_timestamp_queries():
    assert timestamp_queries(spec(STREAM, startingTimestamp="7").starting, [T1, T2]) == {T1: 7, T2: 7}
    by_tp = spec(STREAM, startingOffsetsByTimestamp='{"t":{"1":3}}').starting
    assert timestamp_queries(by_tp, [T1, T2]) == {T1: 3}
    assert timestamp_queries(spec(STREAM).starting, [T1]) == {}
    assert timestamp_queries(None, [T1]) == {}


# ------------------------------------------------------------------ batch plans

def test_plan_batch_default_reads_earliest_to_latest():
    plan = plan_batch(spec(BATCH), SNAP)
    assert plan.ranges == (R(T1, 10, 100), R(T2, 0, 50))
    assert plan.losses == ()


def test_plan_batch_splits_and_bounds():
    plan = plan_batch(spec(BATCH, endingOffsets='{"t":{"1":40,"2":-1}}', maxRecordsPerPartition="20"), SNAP)
    assert plan.ranges == (R(T1, 10, 25), R(T1, 25, 40), R(T2, 0, 16), R(T2, 16, 33), R(T2, 33, 50))


def test_plan_batch_end_before_start_is_data_loss():
    plan = plan_batch(spec(BATCH, startingOffsets='{"t":{"1":90,"2":0}}', endingOffsets='{"t":{"1":50,"2":-1}}'),
                      SNAP)
    assert [loss.kind for loss in plan.losses] == ["offset_went_back"]
    assert plan.ranges == (R(T2, 0, 50),)


def test_plan_batch_missing_assigned_partition_is_data_loss():
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[1,2,9]}'}, BATCH)
    snap = LogSnapshot((T1, T2), SNAP.earliest, SNAP.latest, missing=(("t", 9),))
    plan = plan_batch(opts, snap)
    assert [loss.kind for loss in plan.losses] == ["partition_gone"]
    assert "t-9 do not exist" in plan.losses[0].message
