"""A partition's replication logic: roles, high watermark, ISR proposals, min.insync.replicas,
follower appends and truncation (``broker.replica.partition``), on the in-memory log the
simulator uses (it validates batches like the real log) and, where it matters, the real one.
"""

from __future__ import annotations

import pytest

from broker.cluster.layout import PartitionState
from broker.log import LogConfig, LogManager
from broker.records import DEFAULT_LIMITS, Record, encode_batch
from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.partition import Partition
from broker.replica.producer_state import ProducerStateManager
from broker.sim.disk import MemoryLog
from broker.wire import ErrorCode

LAG_MS = 1_000


class Clock:
    def __init__(self) -> None:
        self.now = 10_000

    def __call__(self) -> int:
        return self.now


def records(values, producer_id: int = -1, sequence: int = -1) -> bytes:
    return encode_batch([Record(i, 1_000, None, v.encode()) for i, v in enumerate(values)],
                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                        base_sequence=sequence)


def partition(broker: int, clock: Clock, log=None) -> tuple[Partition, list]:
    log = log if log is not None else MemoryLog("t-0")
    woken: list = []
    epochs = log.leader_epochs if isinstance(log, MemoryLog) else LeaderEpochCache(None)
    p = Partition("t", 0, log, broker, ProducerStateManager(86_400_000, 100), epochs, clock, woken.append, LAG_MS)
    return p, woken


def lead(p: Partition, isr=(1, 2, 3), epoch: int = 0, version: int = 0, replicas=(1, 2, 3)) -> None:
    assert p.update_state(replicas, PartitionState(p.local_broker_id, epoch, isr, 1), version)


def follow(p: Partition, leader: int, isr=(1, 2, 3), epoch: int = 0, version: int = 0) -> None:
    assert p.update_state((1, 2, 3), PartitionState(leader, epoch, isr, 1), version)


def append(p: Partition, values, acks: int = -1, **kw):
    return p.append_as_leader(memoryview(records(values, **kw)), acks, DEFAULT_LIMITS)


# ------------------------------------------------------------------------- high watermark


def test_high_watermark_is_the_minimum_log_end_over_the_isr():
    clock = Clock()
    leader, woken = partition(1, clock)
    lead(leader)
    append(leader, ["a", "b"])
    append(leader, ["c"])
    assert leader.high_watermark == 0  # followers' log ends are unknown after becoming leader
    leader.record_follower_fetch(2, 2)
    assert leader.high_watermark == 0
    leader.record_follower_fetch(3, 3)
    assert leader.high_watermark == 2
    leader.record_follower_fetch(2, 3)
    assert leader.high_watermark == 3 and ("t", 0) in woken
    leader.record_follower_fetch(2, 1)  # a follower going back never moves it down
    assert leader.high_watermark == 3


def test_delete_records_low_watermark_is_the_lowest_log_start_over_the_isr():
    """Kafka's lowWatermarkIfLeader: DeleteRecords is answered once every in-sync follower has
    moved its log start offset too (it says so in its next fetch)."""
    leader, woken = partition(1, Clock())
    lead(leader, isr=(1, 2))
    append(leader, ["a", "b", "c"])
    leader.record_follower_fetch(2, 3, log_start_offset=0)
    assert leader.high_watermark == 3
    woken.clear()
    assert leader.delete_records(2) == 2
    assert leader.log_end_key in woken  # follower long polls answer: they learn the new start
    assert leader.low_watermark == 0
    leader.record_follower_fetch(3, 3, log_start_offset=1)  # not in the ISR: does not count
    assert leader.low_watermark == 0
    woken.clear()
    leader.record_follower_fetch(2, 3, log_start_offset=2)
    assert leader.low_watermark == 2 and leader.key in woken  # the DeleteRecords waiter re-checks


def test_a_caught_up_follower_outside_the_isr_holds_the_high_watermark_back():
    """Kafka 2.x: so that a replica about to join is not outrun."""
    clock = Clock()
    leader, _ = partition(1, clock)
    lead(leader, isr=(1, 2))
    append(leader, ["a"])
    change = leader.record_follower_fetch(3, 1)  # caught up: proposed as a member...
    assert change is not None and leader.complete_isr_change(change, None) is False  # ...lost a race
    append(leader, ["b"])
    leader.record_follower_fetch(2, 2)
    assert leader.isr == (1, 2) and leader.high_watermark == 1  # 3 (at 1) still holds it
    clock.now += LAG_MS + 1  # no longer recently caught up: no longer counted
    append(leader, ["c"])
    leader.record_follower_fetch(2, 3)
    assert leader.high_watermark == 3


def test_a_new_leader_keeps_its_high_watermark_until_followers_report():
    clock = Clock()
    p, _ = partition(2, clock)
    follow(p, leader=1)
    p.append_as_follower(records_at(["a", "b"], 0, 0), leader_high_watermark=2)
    assert p.high_watermark == 2
    lead(p, epoch=1, version=1)
    assert p.high_watermark == 2 and p.leader_epochs.entries == [(0, 0), (1, 2)]


def records_at(values, base_offset: int, leader_epoch: int, **kw) -> bytes:
    data = bytearray(records(values, **kw))
    data[0:8] = base_offset.to_bytes(8, "big")
    data[12:16] = leader_epoch.to_bytes(4, "big", signed=True)
    return bytes(data)


# --------------------------------------------------------------------------------- ISR


def test_isr_expands_once_a_follower_reaches_the_high_watermark_and_this_epoch():
    clock = Clock()
    leader, _ = partition(1, clock)
    append_log = leader.log
    lead(leader, isr=(1,))
    append(leader, ["a"])  # epoch 0 starts at 0; HW 1 with the ISR alone
    assert leader.high_watermark == 1
    assert leader.record_follower_fetch(2, 0) is None  # behind the high watermark
    change = leader.record_follower_fetch(2, 1)
    assert change.state.isr == (1, 2) and change.expected_version == 0
    assert leader.maximal_isr == (1, 2) and leader.isr == (1,)
    assert leader.record_follower_fetch(3, 1) is None  # one change in flight at a time
    append(leader, ["b"])
    assert leader.high_watermark == 1  # the proposed member counts already
    assert leader.complete_isr_change(change, 1)
    assert leader.isr == (1, 2) and leader.zk_version == 1 and append_log.log_end_offset == 2


def test_isr_shrinks_after_replica_lag_time_and_a_lost_race_drops_the_proposal():
    clock = Clock()
    leader, _ = partition(1, clock)
    lead(leader)
    assert leader.maybe_shrink_isr() is None
    leader.record_follower_fetch(2, 0)
    clock.now += LAG_MS + 1
    leader.record_follower_fetch(2, 0)  # 2 keeps fetching at the log end: caught up
    change = leader.maybe_shrink_isr()
    assert change.state.isr == (1, 2)
    assert not leader.complete_isr_change(change, None)  # the controller wrote meanwhile
    assert leader.isr == (1, 2, 3) and leader.pending_isr is None


def test_an_isr_change_for_an_old_epoch_is_not_applied():
    clock = Clock()
    leader, _ = partition(1, clock)
    lead(leader)
    clock.now += LAG_MS + 1
    change = leader.maybe_shrink_isr()
    lead(leader, epoch=1, version=1)  # the controller moved on
    assert not leader.complete_isr_change(change, 2)
    assert leader.isr == (1, 2, 3)


# -------------------------------------------------------------- acks=all and min.insync


def test_min_insync_replicas_before_and_after_the_append():
    clock = Clock()
    leader, _ = partition(1, clock)
    leader.min_insync_replicas = 2
    lead(leader, isr=(1,))
    assert append(leader, ["a"]).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert append(leader, ["a"], acks=1).error_code == ErrorCode.NONE  # acks=1 is not held to it
    lead(leader, isr=(1, 2), epoch=1, version=1)
    result = append(leader, ["b"])
    assert result.error_code == ErrorCode.NONE
    done, error = leader.check_enough_replicas_reach_offset(result.last_offset + 1, result.leader_term)
    assert not done
    clock.now += LAG_MS + 1
    leader.complete_isr_change(leader.maybe_shrink_isr(), 2)  # 2 dropped out
    assert leader.high_watermark == 2
    assert leader.check_enough_replicas_reach_offset(2, result.leader_term) == (
        True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_min_insync_replicas_above_the_replication_factor_is_capped_at_it():
    """Kafka's effectiveMinIsr (KIP-966): RF=1 with min.insync.replicas=2 accepts acks=all."""
    leader, _ = partition(1, Clock())
    leader.min_insync_replicas = 2
    lead(leader, isr=(1,), replicas=(1,))
    result = append(leader, ["a"])
    assert result.error_code == ErrorCode.NONE
    assert leader.check_enough_replicas_reach_offset(result.last_offset + 1, result.leader_term) == (
        True, ErrorCode.NONE)
    lead(leader, isr=(1,), epoch=1, version=1, replicas=(1, 2))
    assert append(leader, ["b"]).error_code == ErrorCode.NOT_ENOUGH_REPLICAS


def test_an_ack_never_survives_a_lost_leadership_even_if_it_comes_back():
    clock = Clock()
    leader, _ = partition(1, clock)
    lead(leader, isr=(1,))
    result = append(leader, ["a"])
    follow(leader, 2, epoch=1, version=1)
    lead(leader, isr=(1,), epoch=2, version=2)
    assert leader.high_watermark == 1
    assert leader.check_enough_replicas_reach_offset(1, result.leader_term) == (
        True, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_states_are_applied_only_when_newer():
    clock = Clock()
    p, _ = partition(1, clock)
    lead(p, epoch=3, version=5)
    assert not p.update_state((1, 2, 3), PartitionState(2, 2, (2,), 1), 9)  # older epoch
    assert not p.update_state((1, 2, 3), PartitionState(1, 3, (1,), 1), 5)  # same state version
    assert p.update_state((1, 2, 3), PartitionState(1, 3, (1, 2), 1), 6)  # ISR-only change
    assert p.is_leader and p.isr == (1, 2)


# ------------------------------------------------------------------------------ follower


def test_followers_learn_epochs_and_producers_so_a_new_leader_still_deduplicates():
    clock = Clock()
    leader, _ = partition(1, clock)
    follower, _ = partition(2, clock)
    lead(leader, isr=(1,))
    follow(follower, 1, isr=(1,))
    first = append(leader, ["a", "b"], producer_id=7, sequence=0)
    data = leader.read(0, 1 << 20, 0, True, replica_id=2).records
    assert follower.append_as_follower(data, leader.high_watermark) == 1
    assert follower.high_watermark == 2 and follower.leader_epochs.entries == [(0, 0)]
    lead(follower, isr=(2,), epoch=1, version=1)
    retry = append(follower, ["a", "b"], producer_id=7, sequence=0)  # the producer's retry
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, first.base_offset)
    assert follower.log.log_end_offset == 2


def test_truncation_rebuilds_producer_state_and_epochs():
    clock = Clock()
    p, _ = partition(2, clock)
    follow(p, 1)
    p.append_as_follower(records_at(["a"], 0, 0, producer_id=7, sequence=0), 0)
    p.append_as_follower(records_at(["b"], 1, 1, producer_id=7, sequence=1), 0)
    assert p.leader_epochs.entries == [(0, 0), (1, 1)]
    assert p.truncate_to(1)
    assert p.log.log_end_offset == 1 and p.leader_epochs.entries == [(0, 0)]
    assert p.producer_state.get(7).last_seq == 0


def test_truncating_at_the_log_end_drops_empty_epochs():
    """A leadership that wrote nothing leaves an epoch entry at the log end; a follower that
    kept it would ask the new leader about it forever."""
    clock = Clock()
    p, _ = partition(2, clock)
    follow(p, 1)
    p.append_as_follower(records_at(["a"], 0, 0), 0)
    lead(p, epoch=2, version=1)  # leads briefly, writes nothing
    follow(p, 3, epoch=3, version=2)
    assert p.leader_epochs.entries == [(0, 0), (2, 1)]
    assert not p.truncate_to(1)
    assert p.leader_epochs.entries == [(0, 0)]


@pytest.mark.parametrize("real_log", [False, True])
def test_follower_append_on_both_logs(tmp_path, real_log):
    """The in-memory log and the real one behave the same under the partition."""
    clock = Clock()
    log = (LogManager([tmp_path], LogConfig(), clock).get_or_create("t", 0) if real_log else MemoryLog("t-0"))
    p, _ = partition(2, clock, log)
    follow(p, 1)
    p.append_as_follower(records_at(["a", "b"], 0, 0), 5)
    p.append_as_follower(records_at(["c"], 2, 1), 5)
    assert (p.log.log_end_offset, p.high_watermark) == (3, 3)
    assert p.truncate_to(2) and p.log.log_end_offset == 2 and p.high_watermark == 2
