"""Where a follower cuts its log (KIP-101/279), table-driven over epoch histories."""

from __future__ import annotations

import pytest

from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.truncation import Truncation, truncation_offset

CASES = [
    # follower epochs, follower log end, follower HW, leader's answer (epoch, end) -> (offset, complete)
    pytest.param([(0, 0), (1, 50)], 80, 40, (1, 80), Truncation(80, True), id="same history"),
    pytest.param([(0, 0), (1, 50)], 80, 40, (1, 70), Truncation(70, True), id="leader has less of our epoch"),
    pytest.param([(0, 0), (1, 50)], 60, 40, (1, 70), Truncation(60, True), id="we have less: nothing to cut"),
    pytest.param([(0, 0), (2, 50)], 80, 40, (1, 70), Truncation(50, False),
                 id="leader never saw our epoch: cut where it started, ask again"),
    pytest.param([(0, 0), (2, 50)], 50, 40, (0, 45), Truncation(45, True), id="second round"),
    pytest.param([(3, 10)], 30, 20, (1, 5), Truncation(5, True), id="we know nothing as old as its answer"),
    pytest.param([(0, 0)], 30, 20, (-1, -1), Truncation(20, True), id="leader without epochs: to our HW"),
    pytest.param([(0, 0)], 30, 20, (-1, 25), Truncation(25, True), id="old leader answers no epoch"),
]


@pytest.mark.parametrize("entries, log_end, hw, answer, expected", CASES)
def test_truncation_offset(entries, log_end, hw, answer, expected):
    cache = LeaderEpochCache(None, entries)
    assert truncation_offset(answer[0], answer[1], cache, log_end, hw) == expected
