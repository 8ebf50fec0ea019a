"""``FetchSession`` (sans-IO follower fetching) between two real partitions, wired directly."""

from __future__ import annotations

import pytest

from test_replication_partition import Clock, append, follow, lead, partition, records_at

from broker.replica.fetcher import (
    EpochEndOffset,
    FetchedPartition,
    FetcherSettings,
    FetchSession,
    FetchState,
)
from broker.wire import ErrorCode

TP = ("t", 0)


def exchange(session: FetchSession, leader, clock: Clock) -> None:
    """One round as the I/O shell would run it, answered by ``leader`` like the handlers."""
    queries = session.epoch_requests(clock.now)
    if queries:
        answers = {}
        for q in queries:
            error = leader.leader_epoch_error(q.current_leader_epoch)
            epoch, end = leader.end_offset_for_epoch(q.leader_epoch)
            answers[q.tp] = EpochEndOffset(error, epoch, end)
        session.on_epoch_responses(answers, clock.now)
    fetches = session.fetch_requests(clock.now)
    answers = {}
    for f in fetches:
        error = leader.leader_epoch_error(f.current_leader_epoch)
        if error:
            answers[f.tp] = FetchedPartition(error)
            continue
        leader.record_follower_fetch(session.local_broker_id, f.fetch_offset)
        read = leader.read(f.fetch_offset, 1 << 20, 0, True, replica_id=session.local_broker_id)
        answers[f.tp] = FetchedPartition(read.error_code, read.high_watermark, read.log_start_offset, read.records)
    session.on_fetch_responses(answers, clock.now)


def test_a_diverged_follower_truncates_to_the_leaders_history_then_catches_up():
    clock = Clock()
    leader, _ = partition(1, clock)
    old, _ = partition(2, clock)
    # both wrote epoch 0 offsets 0-1; then 2 led epoch 1 alone and wrote 2-3 nobody else got
    for p in (leader, old):
        follow(p, 9)
        p.append_as_follower(records_at(["a", "b"], 0, 0), 0)
    old.append_as_follower(records_at(["x", "y"], 2, 1), 0)
    lead(leader, isr=(1,), epoch=2, version=3)
    append(leader, ["c"])
    follow(old, 1, epoch=2, version=3)
    session = FetchSession(2, 1, lambda t, p: old, FetcherSettings(backoff_ms=10))
    session.add(TP, 2)
    queries = session.epoch_requests(clock.now)
    assert [(q.current_leader_epoch, q.leader_epoch) for q in queries] == [(2, 1)]
    assert leader.end_offset_for_epoch(1) == (0, 2)  # the leader never saw epoch 1: epoch 0 ends at 2
    exchange(session, leader, clock)  # truncate to 2, then fetch "c"
    assert session.partitions[TP].state == FetchState.FETCHING
    assert old.log.log_end_offset == 3 and old.leader_epochs.entries == [(0, 0), (2, 2)]
    assert [b.data[12:] for b in old.log.batches] == [b.data[12:] for b in leader.log.batches]


def test_a_follower_fenced_by_epoch_waits_and_one_that_moved_ignores_answers():
    clock = Clock()
    leader, _ = partition(1, clock)
    follower, _ = partition(2, clock)
    lead(leader, epoch=5, version=1)
    follow(follower, 1, epoch=4)
    session = FetchSession(2, 1, lambda t, p: follower, FetcherSettings(backoff_ms=50))
    session.add(TP, 4)
    session.on_epoch_responses({TP: EpochEndOffset(ErrorCode.FENCED_LEADER_EPOCH)}, clock.now)
    assert session.partitions[TP].delayed_until_ms == clock.now + 50
    assert session.epoch_requests(clock.now) == []
    follow(follower, 3, epoch=6, version=2)  # a new leader: this session's answers no longer apply
    clock.now += 100
    assert session.epoch_requests(clock.now) == []


def test_out_of_range_below_the_leaders_log_start_restarts_the_log_there():
    clock = Clock()
    follower, _ = partition(2, clock)
    follow(follower, 1)
    session = FetchSession(2, 1, lambda t, p: follower, FetcherSettings())
    session.add(TP, 0)
    assert session.epoch_requests(clock.now) == []  # no history: straight to fetching
    assert session.fetch_requests(clock.now)[0].fetch_offset == 0
    session.on_fetch_responses({TP: FetchedPartition(ErrorCode.OFFSET_OUT_OF_RANGE, 120, 100)}, clock.now)
    assert follower.log.log_start_offset == follower.log.log_end_offset == 100
    assert session.fetch_requests(clock.now)[0].fetch_offset == 100


def test_delete_records_on_the_leader_moves_the_followers_log_start_at_its_next_fetch():
    clock = Clock()
    leader, _ = partition(1, clock)
    follower, _ = partition(2, clock)
    lead(leader, isr=(1,), epoch=1, version=1)
    append(leader, ["a", "b", "c", "d"])
    follow(follower, 1, epoch=1, version=1)
    session = FetchSession(2, 1, lambda t, p: follower, FetcherSettings())
    session.add(TP, 1)
    exchange(session, leader, clock)
    assert follower.log.log_end_offset == 4 and follower.log.log_start_offset == 0
    with pytest.raises(ValueError):  # above the high watermark: OFFSET_OUT_OF_RANGE in the handler
        leader.delete_records(leader.high_watermark + 1)
    assert leader.delete_records(3) == 3 and leader.log.log_start_offset == 3
    exchange(session, leader, clock)
    assert follower.log.log_start_offset == 3 and follower.log.log_end_offset == 4
    assert leader.delete_records(-1) == leader.high_watermark == 4
