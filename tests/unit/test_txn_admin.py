"""DescribeTransactions, ListTransactions, the timers (timeout abort, id expiry) and coordinator
moves (load, unload) on ``TxnCoordinatorCore``."""

from __future__ import annotations

from txn_helpers import TID, Driver

from broker.coordinator.txn.core import TxnSettings
from broker.coordinator.txn.state import TxnState
from broker.wire import ErrorCode

FENCED, CONCURRENT, NOT_FOUND = 90, 51, 105


def _open(d, tid=TID, partitions=(("t", 0),), timeout_ms=60_000):
    pid, epoch = d.ready(tid, timeout_ms)
    d.add(pid, epoch, list(partitions), tid=tid)
    return pid, epoch


def test_describe_reports_state_partitions_and_unknown_ids():
    d = Driver()
    pid, epoch = _open(d, partitions=[("t", 1), ("t", 0), ("u", 2)])
    states = d.answer(d.describe(TID, "nobody", "")).transaction_states
    s = states[0]
    assert (s.error_code, s.transaction_state, s.producer_id, s.producer_epoch, s.transaction_timeout_ms) == \
        (0, "Ongoing", pid, epoch, 60_000)
    assert s.transaction_start_time_ms == d.now
    assert {(t.topic, tuple(t.partitions)) for t in s.topics} == {("t", (0, 1)), ("u", (2,))}
    assert [x.error_code for x in states[1:]] == [NOT_FOUND, 42]


def test_list_filters_by_state_producer_id_and_duration():
    d = Driver()
    pa, _ = _open(d, "a")
    d.now += 10_000
    pb, _ = d.ready("b")
    lst = d.answer(d.list())
    assert {(s.transactional_id, s.transaction_state) for s in lst.transaction_states} == {("a", "Ongoing"), ("b", "Empty")}
    lst = d.answer(d.list(states=["Ongoing", "Bogus"]))
    assert [s.transactional_id for s in lst.transaction_states] == ["a"] and lst.unknown_state_filters == ["Bogus"]
    assert [s.transactional_id for s in d.answer(d.list(pids=[pb])).transaction_states] == ["b"]
    # duration: open longer than 5 s ("b" never started: start -1, so it is "long-running" too, as in Kafka)
    assert {s.transactional_id for s in d.answer(d.list(states=["Ongoing"], duration=5_000)).transaction_states} == {"a"}
    assert d.answer(d.list(states=["Ongoing"], duration=20_000)).transaction_states == []


def test_list_v2_pattern_must_match_the_whole_id():
    d = Driver()
    for tid in ("orders-1", "orders-2", "payments-1"):
        d.ready(tid)
    ids = lambda r: sorted(s.transactional_id for s in r.transaction_states)  # noqa: E731
    assert ids(d.answer(d.list(version=2, pattern="orders-.*"))) == ["orders-1", "orders-2"]
    assert ids(d.answer(d.list(version=2, pattern="orders"))) == []
    assert len(ids(d.answer(d.list(version=2, pattern="")))) == 3
    assert len(ids(d.answer(d.list(version=1, pattern="orders")))) == 3  # v1 has no pattern
    assert d.answer(d.list(version=2, pattern="(")).error_code == 42


def test_requests_while_loading_and_for_other_partitions():
    d = Driver()
    d.core.begin_load(0, 2)
    assert d.answer(d.init()).error_code == 14
    assert d.answer(d.list()).error_code == 14
    assert d.answer(d.describe(TID)).transaction_states[0].error_code == 14
    d.run(d.core.load_partition(0, [], d.now))
    d.run(d.core.unload_partition(0))
    assert d.answer(d.init()).error_code == 16


def test_timed_out_transaction_is_aborted_and_its_producer_fenced():
    d = Driver(TxnSettings(num_partitions=1, abort_timed_out_check_interval_ms=1_000))
    pid, epoch = _open(d, timeout_ms=5_000, partitions=[("t", 0), ("t", 1)])
    d.tick(3_000)
    assert d.state().state is TxnState.Ongoing
    assert d.now < d.core.next_deadline() <= d.now + 1_000
    d.tick(3_000)
    meta = d.state()
    assert meta.state is TxnState.CompleteAbort and meta.producer_epoch == epoch + 1
    assert [(m.producer_epoch, m.committed) for m in d.markers_sent] == [(epoch + 1, False)]
    # Kafka 4.1: an EndTxn v0-4 of the timed-out producer is fenced; one of v5 reads the fenced
    # epoch as the abort's (version-2 rules): its commit as the other decision, its abort as a retry
    assert d.answer(d.end(pid, epoch, True)).error_code == FENCED
    assert d.answer(d.end(pid, epoch, True, version=5)).error_code == ErrorCode.INVALID_TXN_STATE
    assert d.answer(d.end(pid, epoch, False, version=5)).error_code == 0
    assert d.answer(d.add(pid, epoch, [("t", 2)])).results_by_topic_v3_and_below[0] \
        .results_by_partition[0].partition_error_code == FENCED
    assert d.ready() == (pid, epoch + 2)


def test_idle_transactional_id_expires_with_a_tombstone():
    d = Driver(TxnSettings(num_partitions=1, id_expiration_ms=60_000, remove_expired_check_interval_ms=10_000))
    d.ready("idle")
    _open(d, "busy")
    d.tick(70_000)
    assert d.state("idle") is None and d.state("busy") is not None  # Ongoing never expires
    assert d.log[0][-1][1] is None
    d.load(0, epoch=2)  # the tombstone survives a reload
    assert d.state("idle") is None


def test_reload_resumes_prepared_transactions():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d, partitions=[("t", 0), ("t", 3)])
    d.auto = False
    d.end(pid, epoch, True)
    d.complete_write(next(iter(d.appends)))   # PrepareCommit written, markers in flight
    d.run(d.core.unload_partition(0))
    assert d.core.markers_written(next(iter(d.markers)), d.now) == []  # forgotten
    d.markers.clear()
    d.load(0, epoch=7)
    (marker,) = d.markers.values()
    assert (marker.committed, marker.coordinator_epoch, marker.partitions, marker.producer_epoch) == \
        (True, 7, (("t", 0), ("t", 3)), epoch)
    assert d.answer(d.init()).error_code == CONCURRENT
    d.complete_markers(marker.marker_id)
    d.complete_write(next(iter(d.appends)))
    assert d.state().state is TxnState.CompleteCommit


def test_unload_answers_parked_requests_not_coordinator_and_ignores_late_completions():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d)
    d.auto = False
    init_token = d.init("fresh")       # waits for a producer id
    end_token = d.end(pid, epoch, True)  # waits for its write
    d.run(d.core.unload_partition(0))
    assert d.answer(init_token).error_code == 16 and d.answer(end_token).error_code == 16
    d.run(d.core.write_done(next(iter(d.appends)), 0, d.now))
    d.run(d.core.producer_id_allocated(d.allocs[0], 77, d.now))
    d.load(0, epoch=2)
    assert d.state().state is TxnState.Ongoing  # the unacknowledged PrepareCommit never landed


def test_fence_write_failure_does_not_bump_twice():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d)
    d.auto = False
    token = d.init()
    d.complete_write(next(iter(d.appends)), error=19)
    assert d.answer(token).error_code == 15 and d.state().producer_epoch == epoch + 1
    assert d.state().state is TxnState.Ongoing
    d.auto = True
    assert d.answer(d.init()).error_code == CONCURRENT
    assert d.markers_sent[-1].producer_epoch == epoch + 1
    assert d.ready() == (pid, epoch + 2)


def test_an_undecodable_value_fails_the_load_and_the_partition_stays_loading():
    import pytest

    from broker.coordinator.txn.core import RecordFormatError
    from broker.coordinator.txn.records import encode_key

    d = Driver()
    d.core.begin_load(0, 2)
    with pytest.raises(RecordFormatError):
        d.core.load_partition(0, [(encode_key(TID), b"\x00\x07" + b"\x00" * 30)], d.now)
    assert d.answer(d.init()).error_code == 14


def test_expired_ids_are_written_as_one_batch_and_a_failed_batch_keeps_them():
    d = Driver(TxnSettings(num_partitions=1, id_expiration_ms=60_000, remove_expired_check_interval_ms=10_000),
               auto=False)
    d.auto = True
    for tid in ("a", "b", "c"):
        d.ready(tid)
    d.auto = False
    d.tick(70_000)
    (write_id,) = d.appends
    assert [v for _, v in d.appends[write_id].records] == [None, None, None]
    assert d.answer(d.init("a")).error_code == CONCURRENT  # Dead is pending
    d.complete_write(write_id, error=19)
    assert all(d.state(t) is not None and d.state(t).pending is None for t in "abc")
    d.tick(10_000)
    d.complete_write(next(iter(d.appends)))
    assert all(d.state(t) is None for t in "abc")


def test_ended_counts_each_decision_once_and_the_coordinators_own_aborts():
    """``core.ended`` feeds kafka_coordinator_transaction_ended_total: a retried EndTxn is not a
    second decision, and a timeout or an InitProducerId fence is an abort like any other."""
    d = Driver(TxnSettings(num_partitions=1, abort_timed_out_check_interval_ms=1_000))
    pid, epoch = _open(d, "a")
    assert d.answer(d.end(pid, epoch, True, tid="a")).error_code == 0
    assert d.answer(d.end(pid, epoch, True, tid="a")).error_code == 0  # the client's retry
    assert d.core.ended == {"committed": 1, "aborted": 0}
    _open(d, "timed-out", timeout_ms=5_000)
    d.tick(6_100)
    assert d.state("timed-out").state is TxnState.CompleteAbort
    _open(d, "fenced")
    assert d.answer(d.init("fenced")).error_code == CONCURRENT  # its open transaction is aborted
    assert d.state("fenced").state is TxnState.CompleteAbort
    assert d.core.ended == {"committed": 1, "aborted": 2}
