"""The controller's event handlers against the simulator's in-memory ZooKeeper (which keeps
Kafka 2.x's znodes, versions, sessions and the controller-epoch fencing of ``KafkaZkClient``).

Each test sets up brokers and topics, runs one or more events, and checks the partition states
written to ZooKeeper and the requests the controller wants sent.
"""

from __future__ import annotations

from random import Random

import pytest

from broker.cluster.errors import ControllerMovedError
from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState, TopicAssignment
from broker.controller import ControllerCore, ControllerSettings, LeaderAndIsr, StopReplica, UpdateMetadata
from broker.sim.network import Network
from broker.sim.scheduler import Scheduler
from broker.sim.zookeeper import FakeZooKeeper, SimZkClient


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "h", 9090 + broker_id, "PLAINTEXT"),), 0)


class World:
    def __init__(self, brokers=(1, 2, 3)) -> None:
        self.scheduler = Scheduler()
        self.network = Network(self.scheduler, Random(0))
        self.zk = FakeZooKeeper(self.scheduler, self.network)
        self.clients: dict[int, SimZkClient] = {}
        for broker in brokers:
            self.start(broker)

    def start(self, broker: int) -> SimZkClient:
        self.network.attach(broker, lambda src, message: None)
        client = SimZkClient(self.zk, self.network, broker, 6000)
        client.register_broker(registration(broker))
        self.clients[broker] = client
        return client

    def kill(self, broker: int) -> None:
        self.zk.close_session(self.clients[broker].session_id)

    def topic(self, name: str, assignment: dict, config: dict | None = None) -> None:
        self.zk.topics[name] = TopicAssignment(assignment)
        self.zk.configs[name] = dict(config or {})

    def state(self, topic: str, partition: int) -> PartitionState:
        return self.zk.states[(topic, partition)][0]

    def controller(self, broker: int = 1, **settings) -> tuple[ControllerCore, list]:
        core = ControllerCore(broker, self.clients[broker], ControllerSettings(**settings))
        epoch, version = self.clients[broker].register_controller(broker, 0)
        return core, core.on_elected(epoch, version)


def requests(sends, kind, broker=None) -> list:
    return [s.request for s in sends if isinstance(s.request, kind) and broker in (None, s.broker_id)]


def leaders(sends, broker: int) -> dict:
    return {tp: (l.state.leader, l.state.leader_epoch, tuple(l.state.isr))
            for r in requests(sends, LeaderAndIsr, broker) for tp, l, _ in r.partitions}


# ------------------------------------------------------------------------------ election


def test_election_creates_states_for_new_partitions_and_tells_every_broker():
    world = World()
    world.topic("t", {0: (2, 1, 3), 1: (3, 2, 1)})
    core, sends = world.controller(1)
    assert core.active and core.epoch == 1
    assert world.state("t", 0) == PartitionState(2, 0, (2, 1, 3), 1)
    assert world.state("t", 1) == PartitionState(3, 0, (3, 2, 1), 1)
    for broker in (1, 2, 3):
        assert leaders(sends, broker) == {("t", 0): (2, 0, (2, 1, 3)), ("t", 1): (3, 0, (3, 2, 1))}
        kinds = [type(s.request) for s in sends if s.broker_id == broker]
        assert kinds.index(LeaderAndIsr) < kinds.index(UpdateMetadata)  # leaders learn first
    update = requests(sends, UpdateMetadata, 2)[0]
    assert {r.broker_id for r in update.live_brokers} == {1, 2, 3}
    assert all(s.request.controller_epoch == 1 for s in sends)


def test_new_partitions_lead_on_the_first_live_replica_with_live_replicas_in_sync():
    world = World(brokers=(1, 2))
    world.topic("t", {0: (3, 2, 1)})
    world.controller(1)
    assert world.state("t", 0) == PartitionState(2, 0, (2, 1), 1)


def test_a_new_controller_elects_leaders_for_partitions_whose_leader_died():
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    world.zk.states[("t", 0)] = (PartitionState(3, 4, (3, 2), 1), 7)
    world.kill(3)
    core, sends = world.controller(1)
    assert world.state("t", 0) == PartitionState(2, 5, (2,), 1)  # written at controller epoch 1
    assert leaders(sends, 2)[("t", 0)] == (2, 5, (2,))


# --------------------------------------------------------------------- broker failures


def test_failed_leader_is_replaced_from_the_isr_and_leaves_every_isr():
    world = World()
    world.topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    core, _ = world.controller(3)
    world.kill(1)
    sends = core.on_broker_change()
    assert world.state("t", 0) == PartitionState(2, 1, (2, 3), 1)  # elected, 1 left the ISR
    assert world.state("t", 1) == PartitionState(2, 1, (2, 3), 1)  # follower 1 removed, epoch bumped
    assert leaders(sends, 2) == {("t", 0): (2, 1, (2, 3)), ("t", 1): (2, 1, (2, 3))}
    assert 1 not in {s.broker_id for s in sends}


def test_the_last_isr_member_stays_in_the_isr_with_no_leader():
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    world.zk.states[("t", 0)] = (PartitionState(1, 3, (1,), 1), 0)
    core, _ = world.controller(2)
    world.kill(1)
    core.on_broker_change()
    assert world.state("t", 0) == PartitionState(-1, 4, (1,), 1)  # offline, waits for broker 1
    world.start(1)
    sends = core.on_broker_change()
    assert world.state("t", 0) == PartitionState(1, 5, (1,), 1)  # back: it had all the data
    assert leaders(sends, 1)[("t", 0)] == (1, 5, (1,))


def test_unclean_election_is_off_by_default_and_a_topic_can_turn_it_on():
    world = World()
    world.topic("safe", {0: (1, 2, 3)})
    world.topic("lossy", {0: (1, 2, 3)}, {"unclean.leader.election.enable": "true"})
    for topic in ("safe", "lossy"):
        world.zk.states[(topic, 0)] = (PartitionState(1, 0, (1,), 1), 0)
    core, _ = world.controller(2)
    world.kill(1)
    core.on_broker_change()
    assert world.state("safe", 0).leader == -1
    assert world.state("lossy", 0) == PartitionState(2, 1, (2,), 1)


def test_a_bounced_broker_fails_then_starts():
    """Same id, new registration (epoch): its old incarnation's leaderships and ISR places go."""
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    core, _ = world.controller(3)
    world.kill(1)
    world.start(1)  # both before the controller looks: it sees only a changed epoch
    sends = core.on_broker_change()
    assert world.state("t", 0) == PartitionState(2, 1, (2, 3), 1)
    assert ("t", 0) in leaders(sends, 1)  # the new incarnation follows
    assert requests(sends, LeaderAndIsr, 1)[0].broker_epoch == world.zk.brokers[1][1]


# -------------------------------------------------------------------- fencing and races


def test_a_deposed_controller_cannot_write():
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    core, _ = world.controller(1)
    world.zk.controller = None
    world.clients[2].register_controller(2, 0)  # broker 2 took over: /controller_epoch moved
    world.kill(3)  # a change that needs a write (3 leaves the ISR)
    with pytest.raises(ControllerMovedError):
        core.on_broker_change()
    assert world.state("t", 0) == PartitionState(1, 0, (1, 2, 3), 1)  # nothing written


def test_a_lost_race_with_a_leaders_isr_write_is_decided_again():
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    core, _ = world.controller(3)
    # the leader shrinks its ISR behind the controller's back (znode version 0 -> 1)
    world.clients[1].set_partition_state("t", 0, PartitionState(1, 0, (1, 2), 1), 0)
    world.kill(1)
    core.on_broker_change()
    assert world.state("t", 0) == PartitionState(2, 1, (2,), 1)  # from the re-read ISR (1, 2)


# ----------------------------------------------------------------- controlled shutdown


def test_controlled_shutdown_moves_leadership_and_stops_following():
    world = World()
    world.topic("t", {0: (1, 2, 3), 1: (2, 1, 3), 2: (1,)})
    core, _ = world.controller(3)
    result = core.on_controlled_shutdown(1, world.zk.brokers[1][1])
    assert result.error_code == 0 and result.remaining == []  # t-2 has one replica: not counted
    assert world.state("t", 0) == PartitionState(2, 1, (2, 3), 1)
    assert world.state("t", 1) == PartitionState(2, 1, (2, 3), 1)
    stops = requests(result.sends, StopReplica, 1)[0]
    assert {tp for tp, _, delete in stops.partitions if not delete} == {("t", 0), ("t", 1)}
    kinds = [type(s.request) for s in result.sends if s.broker_id == 1]
    assert kinds.index(LeaderAndIsr) < kinds.index(StopReplica)  # it stops leading, then fetching


def test_controlled_shutdown_reports_what_cannot_move():
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    world.zk.states[("t", 0)] = (PartitionState(1, 0, (1,), 1), 0)
    core, _ = world.controller(3)
    result = core.on_controlled_shutdown(1, world.zk.brokers[1][1])
    assert result.remaining == [("t", 0)] and world.state("t", 0).leader == 1


def test_controlled_shutdown_fencing():
    world = World()
    core, _ = world.controller(1)
    assert core.on_controlled_shutdown(7, -1).error_code == 8  # BROKER_NOT_AVAILABLE
    assert core.on_controlled_shutdown(2, world.zk.brokers[2][1] - 1).error_code == 77  # STALE_BROKER_EPOCH
    core.on_resigned()
    assert core.on_controlled_shutdown(2, -1).error_code == 41  # NOT_CONTROLLER


# ---------------------------------------------------------------------- other events


def test_auto_rebalance_moves_leadership_back_to_preferred_replicas():
    world = World()
    world.topic("t", {0: (1, 2, 3), 1: (1, 3, 2)})
    for p in (0, 1):
        world.zk.states[("t", p)] = (PartitionState(2, 3, (2, 3, 1), 1), 0)
    core, _ = world.controller(3)
    sends = core.on_auto_rebalance()
    assert world.state("t", 0) == PartitionState(1, 4, (2, 3, 1), 1)
    assert leaders(sends, 1)[("t", 1)] == (1, 4, (2, 3, 1))
    core.settings = ControllerSettings(auto_leader_rebalance_enable=False)
    assert core.on_auto_rebalance() == []


def test_isr_change_notifications_push_metadata_and_are_consumed():
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    core, _ = world.controller(1)
    world.clients[1].set_partition_state("t", 0, PartitionState(1, 0, (1, 3), 1), 0)
    world.clients[1].propagate_isr_changes([("t", 0)])
    sends = core.on_isr_change()
    updates = requests(sends, UpdateMetadata)
    assert len(updates) == 3 and all(u.partitions[0][1].state.isr == (1, 3) for u in updates)
    assert world.zk.isr_notifications == {}


def test_new_and_deleted_topics():
    world = World()
    core, _ = world.controller(1)
    world.topic("t", {0: (2, 3)})
    sends = core.on_topic_change()
    assert world.state("t", 0) == PartitionState(2, 0, (2, 3), 1)
    assert all(is_new for r in requests(sends, LeaderAndIsr, 2) for _, _, is_new in r.partitions)
    del world.zk.topics["t"]
    sends = core.on_topic_change()
    assert {s.broker_id for s in sends if isinstance(s.request, StopReplica)} == {2, 3}
    assert all(delete for s in sends for _, _, delete in s.request.partitions)
    assert core.ctx.all_partitions() == []


def test_same_events_give_the_same_requests_whatever_the_insertion_order():
    def run(names):
        world = World()
        for name in names:
            world.topic(name, {0: (1, 2, 3), 1: (3, 1, 2)})
        return world.controller(1)[1]

    assert run(("b", "a", "c")) == run(("c", "b", "a"))


def test_elections_decide_on_zookeepers_state_not_a_stale_view():
    """A leader's ISR expansion reaches the controller only through a notification; a
    controlled shutdown right after must still see the new member (Kafka re-reads too)."""
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    world.zk.states[("t", 0)] = (PartitionState(1, 0, (1,), 1), 0)
    core, _ = world.controller(3)
    world.clients[1].set_partition_state("t", 0, PartitionState(1, 0, (1, 2), 1), 0)  # not yet notified
    result = core.on_controlled_shutdown(1, world.zk.brokers[1][1])
    assert result.remaining == [] and world.state("t", 0) == PartitionState(2, 1, (2,), 1)


def test_a_starting_broker_gets_zookeepers_state_not_the_controllers_cached_one():
    """Leaders change ISRs behind the controller's back; a broker that starts and leads must
    not get an older, smaller ISR (its high watermark would outrun a real ISR member)."""
    world = World()
    world.topic("t", {0: (1, 2, 3)})
    core, _ = world.controller(3)
    world.kill(2)
    core.on_broker_change()  # 2 leaves: leader 1, ISR (1, 3) at epoch 1
    world.clients[1].set_partition_state("t", 0, PartitionState(1, 1, (1, 3, 2), 1), 1)  # 2 back in (not notified)
    world.start(2)
    sends = core.on_broker_change()
    assert leaders(sends, 2)[("t", 0)] == (1, 1, (1, 3, 2))
