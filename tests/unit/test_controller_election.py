"""Leader election as pure functions (Kafka ``PartitionLeaderElectionAlgorithms``), table-driven."""

from __future__ import annotations

import pytest

from broker.controller.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
)

OFFLINE = [
    # assignment, isr, live, unclean, expected
    ((1, 2, 3), (1, 2, 3), {2, 3}, False, Election(2, (2, 3))),
    ((1, 2, 3), (3, 2), {2, 3}, False, Election(2, (3, 2))),  # assignment order decides, ISR order kept
    ((1, 2, 3), (1,), {2, 3}, False, None),  # the only ISR member is dead: offline
    ((1, 2, 3), (1,), {2, 3}, True, Election(2, (2,), unclean=True)),
    ((1, 2, 3), (1, 3), {1, 2, 3}, False, Election(1, (1, 3))),
    ((1, 2, 3), (), {1, 2, 3}, False, None),
    ((1, 2, 3), (2,), set(), True, None),  # nobody alive, even unclean
    ((4, 5), (5, 4), {5}, False, Election(5, (5,))),
]


@pytest.mark.parametrize("assignment, isr, live, unclean, expected", OFFLINE)
def test_offline_partition_leader(assignment, isr, live, unclean, expected):
    assert offline_partition_leader(assignment, isr, live, unclean) == expected


PREFERRED = [
    ((1, 2, 3), (2, 3, 1), {1, 2, 3}, Election(1, (2, 3, 1))),
    ((1, 2, 3), (2, 3), {1, 2, 3}, None),  # preferred not in sync
    ((1, 2, 3), (2, 3, 1), {2, 3}, None),  # preferred dead
    ((), (), {1}, None),
]


@pytest.mark.parametrize("assignment, isr, live, expected", PREFERRED)
def test_preferred_replica_leader(assignment, isr, live, expected):
    assert preferred_replica_leader(assignment, isr, live) == expected


SHUTDOWN = [
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, Election(2, (2, 3))),
    ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, Election(3, (3,))),
    ((1, 2, 3), (1,), {1, 2, 3}, {1}, None),  # no other in-sync replica: stays
    ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1, 2}, Election(3, (3,))),
    ((1, 2, 3), (1, 2, 3), {1, 3}, {1}, Election(3, (2, 3))),  # dead 2 stays in the ISR (offline handling removes it)
]


@pytest.mark.parametrize("assignment, isr, live, shutting_down, expected", SHUTDOWN)
def test_controlled_shutdown_leader(assignment, isr, live, shutting_down, expected):
    assert controlled_shutdown_leader(assignment, isr, live, shutting_down) == expected


def test_elections_are_deterministic_over_set_iteration_order():
    live_a, live_b = {3, 2, 1}, {1, 2, 3}
    assert offline_partition_leader((3, 1, 2), (2, 1), live_a, False) == \
        offline_partition_leader((3, 1, 2), (2, 1), live_b, False) == Election(1, (2, 1))
