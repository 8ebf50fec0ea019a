"""Retention under ``cleanup.policy``: retention.ms/retention.bytes delete segments only when the
policy includes ``delete``; segments wholly below the log start offset go whatever the policy
(Kafka's ``UnifiedLog.deleteOldSegments``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log import Log, LogConfig
from broker.records import Record, encode_batch

T0 = 1_700_000_000_000
DAY_MS = 86_400_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def filled_log(tmp_path: Path, policy: str, clock: Clock, **overrides: str) -> Log:
    """Ten old keyed batches of ~150 bytes in segments of 300 bytes: several inactive segments."""
    config = LogConfig(segment_bytes=300).with_overrides({"cleanup.policy": policy, **overrides})
    log = Log.open(tmp_path / "t-0", config, clock)
    for i in range(10):
        log.append_as_leader(encode_batch([Record(0, T0 + i, b"key-%d" % (i % 3), b"v" * 60)]), 0)
    assert len(log.segments) >= 4
    return log


@pytest.mark.parametrize("policy, by_time_and_size", [
    ("delete", True), ("compact,delete", True), ("delete, compact", True),
    ("compact", False), ("", False),  # Kafka 4.1's empty policy: neither retention nor compaction
])
def test_retention_by_time_applies_only_with_delete(tmp_path, policy, by_time_and_size):
    clock = Clock()
    log = filled_log(tmp_path, policy, clock, **{"retention.ms": str(DAY_MS)})
    segments = len(log.segments)
    clock.now = T0 + 2 * DAY_MS  # every batch is past retention.ms
    deleted = log.delete_old_segments()
    if by_time_and_size:
        assert deleted == segments - 1 and len(log.segments) == 1  # all but the active segment
        assert log.log_start_offset == log.active_segment.base_offset > 0
    else:
        assert deleted == 0 and len(log.segments) == segments and log.log_start_offset == 0
    log.close()


@pytest.mark.parametrize("policy, by_time_and_size", [("delete", True), ("compact,delete", True), ("compact", False)])
def test_retention_by_size_applies_only_with_delete(tmp_path, policy, by_time_and_size):
    log = filled_log(tmp_path, policy, Clock(), **{"retention.bytes": "400"})
    size, first = log.size_in_bytes, log.segments[0].base_offset
    deleted = log.delete_old_segments()
    assert (deleted > 0) == by_time_and_size
    if by_time_and_size:
        assert log.size_in_bytes - log.segments[0].size < 400 and log.log_start_offset > first
    else:
        assert log.size_in_bytes == size and log.segments[0].base_offset == first
    log.close()


@pytest.mark.parametrize("policy", ["delete", "compact", "compact,delete", ""])
def test_segments_below_the_log_start_offset_go_whatever_the_policy(tmp_path, policy):
    """DeleteRecords (or a leader's log start offset on a follower) moves the log start offset;
    retention then removes the segments wholly below it, compacted topic or not."""
    log = filled_log(tmp_path, policy, Clock())
    third = log.segments[2].base_offset
    assert log.increment_log_start_offset(third + 1)  # inside the third segment
    deleted = log.delete_old_segments()
    assert deleted == 2 and log.segments[0].base_offset == third
    assert log.log_start_offset == third + 1
    assert log.delete_old_segments() == 0  # the third segment still holds readable offsets
    log.close()


def test_a_policy_change_takes_effect_on_the_next_retention_run(tmp_path):
    clock = Clock()
    log = filled_log(tmp_path, "compact", clock, **{"retention.ms": str(DAY_MS)})
    clock.now = T0 + 2 * DAY_MS
    assert log.delete_old_segments() == 0
    log.update_config(log.config.with_overrides({"cleanup.policy": "compact,delete"}))
    assert log.delete_old_segments() > 0 and len(log.segments) == 1
    log.close()
