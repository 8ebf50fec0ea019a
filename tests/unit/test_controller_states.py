"""The controller's state machines: legal transitions are a table; anything else is a bug."""

from __future__ import annotations

import itertools

import pytest

from broker.controller.states import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    IllegalStateTransition,
    PartitionStateName as P,
    ReplicaStateName as R,
    check_transition,
)

LEGAL_PARTITION = {
    (P.NON_EXISTENT, P.NEW), (P.NEW, P.ONLINE), (P.ONLINE, P.ONLINE), (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE), (P.ONLINE, P.OFFLINE), (P.OFFLINE, P.OFFLINE), (P.OFFLINE, P.NON_EXISTENT),
}
LEGAL_REPLICA = {
    (R.NON_EXISTENT, R.NEW),
    (R.NEW, R.ONLINE), (R.ONLINE, R.ONLINE), (R.OFFLINE, R.ONLINE), (R.DELETION_INELIGIBLE, R.ONLINE),
    (R.NEW, R.OFFLINE), (R.ONLINE, R.OFFLINE), (R.OFFLINE, R.OFFLINE), (R.DELETION_INELIGIBLE, R.OFFLINE),
    (R.OFFLINE, R.DELETION_STARTED), (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE), (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


@pytest.mark.parametrize("current, target", list(itertools.product(P, P)))
def test_partition_transitions_are_exactly_kafkas(current, target):
    if (current, target) in LEGAL_PARTITION:
        check_transition(current, target, "p")
    else:
        with pytest.raises(IllegalStateTransition, match="illegal transition"):
            check_transition(current, target, "p")


@pytest.mark.parametrize("current, target", list(itertools.product(R, R)))
def test_replica_transitions_are_exactly_kafkas(current, target):
    if (current, target) in LEGAL_REPLICA:
        check_transition(current, target, "r")
    else:
        with pytest.raises(IllegalStateTransition):
            check_transition(current, target, "r")


def test_tables_cover_every_target_state():
    assert set(PARTITION_TRANSITIONS) == set(P) and set(REPLICA_TRANSITIONS) == set(R)
    assert issubclass(IllegalStateTransition, AssertionError)  # a bug stops the process loudly
