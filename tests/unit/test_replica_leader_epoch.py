"""The leader epoch cache: OffsetForLeaderEpoch answers (Kafka LeaderEpochFileCache) and its file."""

from __future__ import annotations

import pytest

from broker.replica.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache

# epochs: 0 from offset 0, 2 from 100, 5 from 250; log end 300
ENTRIES = [(0, 0), (2, 100), (5, 250)]


@pytest.mark.parametrize("requested, expected", [
    (5, (5, 300)),      # the latest epoch ends at the log end offset
    (2, (2, 250)),      # an older epoch ends where the next one starts
    (0, (0, 100)),
    (1, (0, 100)),      # an epoch that never led: the largest one below it, the next start
    (3, (2, 250)),
    (6, (-1, -1)),      # above the latest: undefined
    (-1, (-1, -1)),
])
def test_end_offset_for(requested, expected):
    assert LeaderEpochCache(None, ENTRIES).end_offset_for(requested, 300) == expected


def test_below_the_first_epoch():
    assert LeaderEpochCache(None, [(3, 40)]).end_offset_for(1, 90) == (1, 40)


@pytest.mark.parametrize("offset, epoch", [(0, 0), (99, 0), (100, 2), (299, 5), (-1, -1)])
def test_epoch_for_offset(offset, epoch):
    assert LeaderEpochCache(None, ENTRIES).epoch_for_offset(offset) == epoch


def test_assign_ignores_old_epochs_and_replaces_unwritten_ranges():
    cache = LeaderEpochCache(None, [(0, 0), (2, 100)])
    assert cache.assign(2, 120) is False and cache.assign(1, 130) is False
    assert cache.assign(3, 100) is True  # epoch 2 wrote nothing from 100 on
    assert cache.entries == [(0, 0), (3, 100)]


def test_file_round_trip_and_truncation_after_a_lost_tail(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(4, 500)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n4 500\n"
    assert LeaderEpochCache.load(tmp_path, log_end_offset=600).entries == [(0, 0), (4, 500)]
    assert LeaderEpochCache.load(tmp_path, log_end_offset=300).entries == [(0, 0)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n0 0\n"


@pytest.mark.parametrize("text", ["garbage", "0\n3\n0 0\n", "1\n1\n0 0\n", "0\n2\n5 0\n3 10\n"])
def test_malformed_file_is_ignored(tmp_path, text):
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text(text)
    assert LeaderEpochCache.load(tmp_path, 100).entries == []
