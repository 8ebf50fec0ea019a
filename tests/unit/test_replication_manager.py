"""``ReplicaManager``: controller requests (fencing, roles, fetchers), ISR writes, and the
high-watermark checkpoint (Kafka's ``replication-offset-checkpoint``)."""

from __future__ import annotations

from broker.cluster.layout import PartitionState
from broker.log import LogConfig, LogManager, read_checkpoint
from broker.records import DEFAULT_LIMITS
from broker.replica.manager import REPLICATION_OFFSET_CHECKPOINT, ReplicaManager, ReplicaSettings
from broker.replica.purgatory import Purgatory
from broker.wire import ErrorCode
from test_replication_partition import Clock, records


class Fetchers:
    def __init__(self) -> None:
        self.following: dict = {}

    def add_partitions(self, targets) -> None:
        self.following.update({tp: (t.leader_id, t.leader_epoch) for tp, t in targets.items()})

    def remove_partitions(self, tps) -> None:
        for tp in tps:
            self.following.pop(tp, None)


def manager(tmp_path, broker: int = 1, writer=None):
    clock = Clock()
    fetchers = Fetchers()
    rm = ReplicaManager(broker, LogManager([tmp_path], LogConfig(), clock), Purgatory(10), clock,
                        ReplicaSettings(), fetchers=fetchers, isr_writer=writer)
    return rm, fetchers, clock


def state(leader, epoch, isr=(1, 2, 3)):
    return PartitionState(leader, epoch, isr, 1)


def test_leader_and_isr_roles_fetchers_and_fencing(tmp_path):
    rm, fetchers, _ = manager(tmp_path)
    error, errors = rm.become_leader_or_follower(3, [(("t", 0), (2, 1, 3), state(2, 4), 0),
                                                     (("t", 1), (1, 2, 3), state(1, 4), 0),
                                                     (("t", 2), (2, 3), state(2, 4), 0)], {})
    assert error == 0 and errors == {("t", 0): 0, ("t", 1): 0, ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetchers.following == {("t", 0): (2, 4)} and rm.get("t", 1).is_leader
    # the same states again (a controller fail-over resends them): nothing changes
    assert rm.become_leader_or_follower(4, [(("t", 0), (2, 1, 3), state(2, 4), 0)], {})[1] == {
        ("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH}
    assert rm.become_leader_or_follower(3, [], {})[0] == ErrorCode.STALE_CONTROLLER_EPOCH
    rm.become_leader_or_follower(4, [(("t", 0), (2, 1, 3), state(1, 5), 1)], {})
    assert fetchers.following == {} and rm.get("t", 0).is_leader
    error, _ = rm.stop_replicas(4, [(("t", 1), True)])
    assert error == 0 and rm.get("t", 1) is None and rm.log_manager.get("t", 1) is None
    rm.close()


def test_isr_proposals_go_to_the_writer_and_come_back(tmp_path):
    written = []
    rm, _, clock = manager(tmp_path, writer=written.append)
    rm.become_leader_or_follower(1, [(("t", 0), (1, 2), state(1, 0, (1, 2)), 0)], {})
    clock.now += 40_000
    assert rm.maybe_shrink_isr() == 1 and written[0].state.isr == (1,)
    rm.complete_isr_change(written[0], 1)
    assert rm.get("t", 0).isr == (1,)
    rm.close()


def test_high_watermarks_are_checkpointed_and_reloaded(tmp_path):
    rm, _, _ = manager(tmp_path)
    rm.become_leader_or_follower(1, [(("t", 0), (1,), state(1, 0, (1,)), 0)], {})
    partition = rm.get("t", 0)
    partition.append_as_leader(memoryview(records(["a", "b", "c"])), -1, DEFAULT_LIMITS)
    assert partition.high_watermark == 3
    rm.close()
    assert read_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT) == {("t", 0): 3}
    again, _, _ = manager(tmp_path, broker=2)
    again.become_leader_or_follower(1, [(("t", 0), (1, 2), state(1, 1, (1, 2)), 1)], {})
    assert again.get("t", 0).high_watermark == 3  # a follower starts from its checkpoint
    again.close()


def test_apply_never_deletes_a_partition_whose_topic_it_has_not_seen_yet(tmp_path):
    """LeaderAndIsr can arrive before this broker's ZooKeeper watch shows the topic."""
    rm, _, _ = manager(tmp_path)
    rm.become_leader_or_follower(1, [(("new", 0), (1,), state(1, 0, (1,)), 0)], {})
    rm.apply({})
    assert rm.get("new", 0) is not None
    from broker.replica.manager import PartitionView, TopicView
    rm.apply({"new": TopicView({0: PartitionView((2,), state(2, 1, (2,)), 1)}, {})})
    assert rm.get("new", 0) is None  # seen now, and not ours: deleted
    rm.close()


def test_the_zookeeper_view_makes_followers_but_never_leaders(tmp_path):
    """A restarted broker reading "leader = me" must wait for the controller (broker-epoch
    fenced): leading again at its old epoch could diverge from what that epoch committed."""
    from broker.replica.manager import PartitionView, TopicView

    rm, fetchers, _ = manager(tmp_path)
    rm.apply({"t": TopicView({0: PartitionView((1, 2), state(1, 4, (1, 2)), 7),
                              1: PartitionView((2, 1), state(2, 4, (2, 1)), 7)}, {})}, may_lead=False)
    assert rm.get("t", 0).leader_id == -1 and not rm.get("t", 0).is_leader
    assert fetchers.following == {("t", 1): (2, 4)}
    rm.become_leader_or_follower(2, [(("t", 0), (1, 2), state(1, 4, (1, 2)), 7)], {})
    assert rm.get("t", 0).is_leader
    rm.close()


def test_leadership_listeners_hear_every_change_of_this_brokers_leadership(tmp_path):
    rm, _, _ = manager(tmp_path)
    heard = []
    rm.add_leadership_listener(lambda *change: heard.append(change))
    rm.become_leader_or_follower(1, [(("t", 0), (1, 2), state(1, 0, (1, 2)), 0),
                                     (("t", 1), (1, 2), state(2, 0, (1, 2)), 0)], {})  # follower: silent
    rm.become_leader_or_follower(1, [(("t", 0), (1, 2), state(1, 1, (1,)), 1)], {})  # a new epoch
    rm.become_leader_or_follower(1, [(("t", 0), (1, 2), state(1, 1, (1, 2)), 2)], {})  # ISR only: silent
    rm.become_leader_or_follower(1, [(("t", 0), (1, 2), state(2, 2, (2,)), 3),
                                     (("t", 1), (1, 2), state(1, 1, (1,)), 1)], {})
    rm.stop_replicas(1, [(("t", 1), True)])  # removed while leading
    assert heard == [("t", 0, True, 0), ("t", 0, True, 1), ("t", 0, False, 2), ("t", 1, True, 1),
                     ("t", 1, False, 1)]
    rm.close()
