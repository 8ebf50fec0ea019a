"""Replica assignment for new topics (Kafka's rack-unaware AdminUtils.assignReplicasToBrokers)."""

from __future__ import annotations

from collections import Counter
from random import Random

import pytest

from broker.server.replica_assignment import assign_replicas


def test_matches_kafkas_documented_example():
    # AdminUtils' doc: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, Random(0), start_index=0)
    assert got[0] == [0, 1, 2] and got[4] == [4, 0, 1]
    assert got[5] == [0, 2, 3] and got[9] == [4, 1, 2]


@pytest.mark.parametrize("brokers, partitions, factor", [([1], 6, 1), ([1, 2, 3], 6, 3), ([5, 7, 9, 11], 12, 2)])
def test_leaders_spread_and_replicas_distinct(brokers, partitions, factor):
    got = assign_replicas(brokers, partitions, factor, Random(7))
    assert sorted(got) == list(range(partitions))
    assert all(len(set(r)) == factor and set(r) <= set(brokers) for r in got.values())
    leaders = Counter(r[0] for r in got.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1 and len(leaders) == min(len(brokers), partitions)
