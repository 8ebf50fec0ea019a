"""Self-fencing after an unclean shutdown (``broker.replica.fencing``)."""

from __future__ import annotations

import pytest
from test_controller_core import World

from broker.cluster.layout import PartitionState
from broker.replica.fencing import fence_after_unclean_shutdown, fenced_state

CASES = [
    (PartitionState(2, 5, (2, 1, 3), 1), 1, PartitionState(2, 5, (2, 3), 1)),  # follower leaves the ISR
    (PartitionState(1, 5, (1, 2), 1), 1, PartitionState(-1, 6, (2,), 1)),  # leader steps down, new epoch
    (PartitionState(1, 5, (1,), 1), 1, None),  # the last ISR member stays
    (PartitionState(-1, 5, (1,), 1), 1, None),
    (PartitionState(2, 5, (2, 3), 1), 1, None),  # not in sync anyway
]


@pytest.mark.parametrize("state, broker, expected", CASES)
def test_fenced_state(state, broker, expected):
    assert fenced_state(state, broker) == expected


def test_fencing_writes_conditionally_and_tells_the_controller_who_elects_elsewhere():
    world = World()
    world.topic("t", {0: (1, 2, 3), 1: (2, 1, 3), 2: (3, 2)})
    core, _ = world.controller(3)
    world.kill(1)
    world.zk.controller = None  # as if broker 1 had been the controller too: nobody noticed its death
    client = world.start(1)
    assert fence_after_unclean_shutdown(client, 1) == [("t", 0), ("t", 1)]
    assert world.state("t", 0) == PartitionState(-1, 1, (2, 3), 1)
    assert world.state("t", 1) == PartitionState(2, 0, (2, 3), 1)
    assert len(world.zk.isr_notifications) == 1
    sends = core.on_isr_change()
    assert world.state("t", 0) == PartitionState(2, 2, (2, 3), 1)  # elected at a new epoch
    told = {tp: l.state for s in sends if s.broker_id == 2 and type(s.request).__name__ == "LeaderAndIsr"
            for tp, l, _ in s.request.partitions}
    assert told[("t", 1)].isr == (2, 3)  # the leader of t-1 learns the ISR changed behind its back
