"""The cleaner's planner: sections of a log, the choice of log, and segment groups (pure)."""

from __future__ import annotations

from broker.log.cleaner.plan import (
    INT32_MAX,
    CleanableLog,
    SegmentSummary,
    choose_log,
    cleanable_section,
    group_segments,
)

NOW = 1_000_000


def seg(base: int, nxt: int, size: int = 100, ts: int = 0, first_ts: int = 0) -> SegmentSummary:
    return SegmentSummary(base, nxt, size, ts, first_ts)


SEGMENTS = [seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 35, size=50)]  # the last is active


def section(**kw) -> CleanableLog:
    args = dict(log_start_offset=0, checkpoint=None, high_watermark=35, last_stable_offset=35, now_ms=NOW,
                min_compaction_lag_ms=0, max_compaction_lag_ms=2**63 - 1)
    args.update(kw)
    return cleanable_section(args.pop("segments", SEGMENTS), **args)


def test_a_new_log_is_dirty_up_to_the_active_segment():
    s = section()
    assert (s.first_dirty_offset, s.first_uncleanable_offset, s.clean_bytes, s.dirty_bytes) == (0, 30, 0, 300)
    assert s.dirty_ratio == 1.0


def test_the_checkpoint_splits_clean_from_dirty():
    s = section(checkpoint=20)
    assert (s.first_dirty_offset, s.clean_bytes, s.dirty_bytes) == (20, 200, 100)
    assert abs(s.dirty_ratio - 1 / 3) < 1e-9


def test_a_checkpoint_outside_the_log_restarts_at_the_log_start():
    assert section(checkpoint=99).first_dirty_offset == 0
    assert section(checkpoint=3, log_start_offset=10).first_dirty_offset == 10


def test_high_watermark_and_last_stable_offset_stop_cleaning_at_their_segment():
    assert section(high_watermark=25).first_uncleanable_offset == 20
    assert section(last_stable_offset=20).first_uncleanable_offset == 20
    assert section(high_watermark=0).dirty_bytes == 0


def test_records_younger_than_the_min_compaction_lag_are_not_cleaned():
    segments = [seg(0, 10, ts=NOW - 5000), seg(10, 20, ts=NOW - 100), seg(20, 30, ts=NOW - 50), seg(30, 35)]
    s = section(segments=segments, min_compaction_lag_ms=1000)
    assert (s.first_uncleanable_offset, s.dirty_bytes) == (10, 100)


def test_max_compaction_lag_forces_a_log_below_its_ratio():
    segments = [seg(0, 10, first_ts=NOW - 10_000), seg(10, 20), seg(20, 21)]
    forced = section(segments=segments, checkpoint=0, max_compaction_lag_ms=5_000)
    assert forced.max_lag_exceeded
    assert choose_log([("t-0", forced, 1.0)]) == "t-0"
    assert choose_log([("t-0", section(segments=segments, max_compaction_lag_ms=50_000), 1.01)]) is None


def test_the_dirtiest_log_at_or_above_its_ratio_is_chosen():
    a = CleanableLog(0, 0, 10, clean_bytes=100, dirty_bytes=100, max_lag_exceeded=False)  # 0.5
    b = CleanableLog(0, 0, 10, clean_bytes=100, dirty_bytes=300, max_lag_exceeded=False)  # 0.75
    c = CleanableLog(0, 0, 10, clean_bytes=0, dirty_bytes=100, max_lag_exceeded=False)  # 1.0, ratio 1.01 asked
    assert choose_log([("a", a, 0.5), ("b", b, 0.5), ("c", c, 1.01)]) == "b"
    assert choose_log([("a", a, 0.6)]) is None
    assert choose_log([("e", CleanableLog(0, 0, 0, 0, 0, True), 0.0)]) is None  # nothing dirty


def test_groups_fit_one_segment():
    segments = [seg(0, 10, 400), seg(10, 20, 400), seg(20, 30, 400), seg(30, 40, 900), seg(40, 50, 50)]
    groups = group_segments(segments, segment_bytes=1000, index_bytes=10 << 20, index_interval_bytes=4096)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20], [30, 40]]


def test_groups_respect_index_size_and_relative_offsets():
    segments = [seg(0, 10, 4096), seg(10, 20, 4096)]
    assert len(group_segments(segments, segment_bytes=1 << 30, index_bytes=24, index_interval_bytes=4096)) == 2
    wide = [seg(0, 10), seg(INT32_MAX, INT32_MAX + 5)]
    assert len(group_segments(wide, segment_bytes=1 << 30, index_bytes=10 << 20, index_interval_bytes=4096)) == 2
