"""AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the markers and KIP-890 verification on
``TxnCoordinatorCore`` (Kafka's TransactionCoordinator, transaction version 0)."""

from __future__ import annotations

from txn_helpers import TID, Driver

from broker.coordinator.group.core import partition_for
from broker.coordinator.txn.state import TxnState

CONCURRENT, FENCED, INVALID_EPOCH, INVALID_STATE, BAD_MAPPING, ABORTABLE = 51, 90, 47, 48, 49, 120


def _codes_v3(resp):
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def _open(d, partitions=(("t", 0), ("t", 1))):
    pid, epoch = d.ready()
    assert set(_codes_v3(d.answer(d.add(pid, epoch, list(partitions)))).values()) == {0}
    return pid, epoch


def test_add_partitions_writes_ongoing_and_grows_the_set():
    d = Driver()
    pid, epoch = _open(d)
    meta = d.state()
    assert meta.state is TxnState.Ongoing and meta.partitions == {("t", 0), ("t", 1)}
    start = meta.start_ms
    d.now += 50
    d.add(pid, epoch, [("u", 3)])
    assert d.state().partitions == {("t", 0), ("t", 1), ("u", 3)} and d.state().start_ms == start


def test_add_partitions_already_in_the_transaction_writes_nothing():
    d = Driver()
    pid, epoch = _open(d)
    records = len(d.log[0])
    assert set(_codes_v3(d.answer(d.add(pid, epoch, [("t", 1)]))).values()) == {0}
    assert len(d.log[0]) == records


def test_add_partitions_errors():
    d = Driver()
    pid, epoch = d.ready()
    assert set(_codes_v3(d.answer(d.add(pid, epoch, [("t", 0)], tid="nobody"))).values()) == {BAD_MAPPING}
    assert set(_codes_v3(d.answer(d.add(pid + 1, epoch, [("t", 0)]))).values()) == {BAD_MAPPING}
    assert set(_codes_v3(d.answer(d.add(pid, epoch + 1, [("t", 0)]))).values()) == {FENCED}
    assert set(_codes_v3(d.answer(d.add(pid, epoch + 1, [("t", 0)], version=1))).values()) == {INVALID_EPOCH}
    assert d.state().state is TxnState.Empty


def test_add_offsets_adds_the_groups_offsets_partition():
    d = Driver()
    pid, epoch = d.ready()
    assert d.answer(d.add_offsets(pid, epoch, "my-group")).error_code == 0
    assert d.state().partitions == {("__consumer_offsets", partition_for("my-group", 50))}
    assert d.answer(d.add_offsets(pid, epoch + 3, "my-group", version=1)).error_code == INVALID_EPOCH


def test_commit_answers_after_prepare_write_then_markers_then_complete():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d)
    d.auto = False
    token = d.end(pid, epoch, True)
    assert d.answer(token) is None
    d.complete_write(next(iter(d.appends)))
    assert d.answer(token).error_code == 0 and d.state().state is TxnState.PrepareCommit
    (marker,) = d.markers.values()
    assert (marker.producer_id, marker.producer_epoch, marker.committed, marker.coordinator_epoch) == \
        (pid, epoch, True, 1)
    assert marker.partitions == (("t", 0), ("t", 1))
    # meanwhile (Complete* pending behind the markers) both decisions are CONCURRENT_TRANSACTIONS,
    # as in Kafka, where the pending transition is checked before the state
    assert d.answer(d.end(pid, epoch, True)).error_code == CONCURRENT
    assert d.answer(d.end(pid, epoch, False)).error_code == CONCURRENT
    assert set(_codes_v3(d.answer(d.add(pid, epoch, [("t", 5)]))).values()) == {CONCURRENT}
    d.complete_markers(marker.marker_id)
    d.complete_write(next(iter(d.appends)))
    assert d.state().state is TxnState.CompleteCommit and d.state().partitions == set()
    assert d.answer(d.end(pid, epoch, True)).error_code == 0        # idempotent retry
    assert d.answer(d.end(pid, epoch, False)).error_code == INVALID_STATE


def test_end_txn_v5_bumps_the_epoch_and_answers_the_new_one():
    """Transaction version 2 (KIP-890 part 2): the decision is written at the next epoch, its
    markers carry it and the answer hands it to the producer; a retry (the old epoch) of the
    decision answers NONE and the new epoch, the opposite decision INVALID_TXN_STATE, and the
    new epoch itself may not end a transaction that has not begun (Kafka's rules)."""
    d = Driver()
    pid, epoch = _open(d)
    r = d.answer(d.end(pid, epoch, True, version=5))
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    (marker,) = d.markers_sent
    assert (marker.producer_epoch, marker.committed) == (epoch + 1, True)
    meta = d.state()
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch, meta.client_transaction_version) == \
        (TxnState.CompleteCommit, epoch + 1, epoch, 2)
    retry = d.answer(d.end(pid, epoch, True, version=5))
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, pid, epoch + 1)
    assert d.answer(d.end(pid, epoch, False, version=5)).error_code == INVALID_STATE
    assert d.answer(d.end(pid, epoch + 1, True, version=5)).error_code == FENCED
    d.load(0, epoch=2)  # a new coordinator: the stored version keeps recognizing the retry
    assert d.answer(d.end(pid, epoch, True, version=5)).error_code == 0
    assert len(d.markers_sent) == 1


def test_end_txn_v5_delayed_past_the_next_transaction_is_fenced():
    """The issue's fault: an EndTxn(commit) of transaction 1 delayed in the network until the
    producer (whose retry got the answer) has begun transaction 2 at the new epoch. It is
    PRODUCER_FENCED and transaction 2 stays open; its own EndTxn aborts it."""
    d = Driver()
    pid, epoch = _open(d)
    r = d.answer(d.end(pid, epoch, True, version=5))
    assert set(_codes_v3(d.answer(d.add(pid, r.producer_epoch, [("t", 3)]))).values()) == {0}
    assert d.answer(d.end(pid, epoch, True, version=5)).error_code == FENCED  # the delayed one
    assert d.answer(d.end(pid, epoch, True, version=4)).error_code == FENCED
    assert d.state().state is TxnState.Ongoing and d.state().partitions == {("t", 3)}
    assert d.answer(d.end(pid, r.producer_epoch, False, version=5)).producer_epoch == epoch + 2
    assert [(m.committed, m.partitions) for m in d.markers_sent] == \
        [(True, (("t", 0), ("t", 1))), (False, (("t", 3),))]


def test_end_txn_v4_delayed_past_the_next_transaction_commits_it():
    """Why transaction version 2 exists: at v0-4 the epoch stays, so the same delayed EndTxn
    commits transaction 2 (what the v5 test above rules out)."""
    d = Driver()
    pid, epoch = _open(d)
    assert d.answer(d.end(pid, epoch, True, version=4)).error_code == 0
    _codes_v3(d.answer(d.add(pid, epoch, [("t", 3)])))
    assert d.answer(d.end(pid, epoch, True, version=4)).error_code == 0
    assert d.markers_sent[-1].committed and d.markers_sent[-1].partitions == (("t", 3),)


def test_end_txn_errors():
    d = Driver()
    pid, epoch = d.ready()
    assert d.answer(d.end(pid, epoch, True)).error_code == INVALID_STATE  # Empty
    assert d.answer(d.end(pid, epoch, True, tid="nobody")).error_code == BAD_MAPPING
    assert d.answer(d.end(pid + 1, epoch, True)).error_code == BAD_MAPPING
    assert d.answer(d.end(pid, epoch + 1, True)).error_code == FENCED
    assert d.answer(d.end(pid, epoch + 1, True, version=1)).error_code == INVALID_EPOCH
    assert d.answer(d.end(pid, epoch, True, tid="")).error_code == 42


def test_delayed_end_txn_of_an_old_epoch_cannot_commit_the_new_transaction():
    d = Driver()
    pid, old = _open(d)
    assert d.answer(d.init()).error_code == CONCURRENT  # restart: fence + abort first
    pid2, new = d.ready()
    assert pid2 == pid and new == old + 2
    _codes_v3(d.answer(d.add(pid, new, [("t", 7)])))
    assert d.answer(d.end(pid, old, True)).error_code == FENCED
    assert d.state().state is TxnState.Ongoing
    assert all(not m.committed for m in d.markers_sent)


def test_write_failure_of_prepare_keeps_ongoing_and_the_client_may_retry():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d)
    d.auto = False
    token = d.end(pid, epoch, True)
    d.complete_write(next(iter(d.appends)), error=19)
    assert d.answer(token).error_code == 15
    assert d.state().state is TxnState.Ongoing and not d.markers
    d.auto = True
    assert d.answer(d.end(pid, epoch, True)).error_code == 0
    assert d.state().state is TxnState.CompleteCommit


def test_complete_write_is_retried_when_unavailable():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d)
    d.auto = False
    d.end(pid, epoch, False)
    d.complete_write(next(iter(d.appends)))
    d.complete_markers(next(iter(d.markers)))
    d.complete_write(next(iter(d.appends)), error=20)
    assert d.state().state is TxnState.PrepareAbort and not d.appends  # retried after a backoff
    assert d.core.next_deadline() == d.now + 100
    d.tick(99)
    assert not d.appends
    d.tick(1)
    assert len(d.appends) == 1  # the new attempt
    d.complete_write(next(iter(d.appends)))
    assert d.state().state is TxnState.CompleteAbort


def test_batched_v4_add_and_verify_only():
    d = Driver()
    pid, epoch = _open(d, [("t", 0)])
    token = d.add_v4([(TID, pid, epoch, True, [("t", 0), ("t", 9)]),
                      (TID, pid, epoch, False, [("u", 1)]),
                      ("nobody", 5, 0, True, [("t", 0)])])
    results = {r.transactional_id + str(i): {(t.name, p.partition_index): p.partition_error_code
                                             for t in r.topic_results for p in t.results_by_partition}
               for i, r in enumerate(d.answer(token).results_by_transaction)}
    assert results == {TID + "0": {("t", 0): 0, ("t", 9): ABORTABLE}, TID + "1": {("u", 1): 0},
                       "nobody2": {("t", 0): BAD_MAPPING}}
    assert ("u", 1) in d.state().partitions


def test_batched_v4_answers_when_the_last_write_completes():
    d = Driver(auto=False)
    d.auto = True
    pa, ea = d.ready("a")
    pb, eb = d.ready("b")
    d.auto = False
    token = d.add_v4([("a", pa, ea, False, [("t", 0)]), ("b", pb, eb, False, [("t", 1)])])
    first, second = list(d.appends)
    d.complete_write(first)
    assert d.answer(token) is None
    d.complete_write(second)
    assert len(d.answer(token).results_by_transaction) == 2


def test_verify():
    d = Driver()
    pid, epoch = _open(d, [("t", 0)])
    assert d.core.verify(TID, pid, epoch, "t", 0) == 0
    assert d.core.verify(TID, pid, epoch, "t", 1) == INVALID_STATE
    assert d.core.verify(TID, pid, epoch - 1, "t", 0) == FENCED
    assert d.core.verify(TID, pid + 1, epoch, "t", 0) == BAD_MAPPING
    assert d.core.verify("nobody", pid, epoch, "t", 0) == BAD_MAPPING
    d.end(pid, epoch, True)
    assert d.core.verify(TID, pid, epoch, "t", 0) == INVALID_STATE  # committed: no longer in it


def test_marker_ids_name_the_jobs_of_a_partition_until_unloaded():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = _open(d)
    d.markers_auto = False
    d.auto = False
    d.end(pid, epoch, True)
    d.complete_write(next(iter(d.appends)))
    assert d.core.marker_ids(0) == list(d.markers) and d.core.marker_ids(1) == []
    d.core.unload_partition(0)
    assert d.core.marker_ids(0) == []


def test_end_txn_v5_at_the_exhausted_epoch_rotates_the_producer_id():
    """Transaction version 2 (Kafka's prepareAbortOrCommit/prepareComplete): the decision at epoch
    Short.MAX-1 gets a new producer id first; the markers carry the old id at Short.MAX, the
    answer and the Complete* record the new id at epoch 0; a retry of that EndTxn (old id, old
    epoch) answers NONE with the new id, a stale one of the old id is refused; reload keeps it."""
    d = Driver()
    pid, _ = d.ready()
    d.state().producer_epoch = 32_766
    _open_at = d.answer(d.add(pid, 32_766, [("t", 0)]))
    assert set(_codes_v3(_open_at).values()) == {0}
    r = d.answer(d.end(pid, 32_766, True, version=5))
    new_pid = d.next_pid - 1
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, new_pid, 0) and new_pid != pid
    assert [(m.producer_id, m.producer_epoch, m.committed) for m in d.markers_sent] == [(pid, 32_767, True)]
    meta = d.state()
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == \
        (TxnState.CompleteCommit, new_pid, 0, pid)
    retry = d.answer(d.end(pid, 32_766, True, version=5))
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (0, new_pid, 0)
    assert d.answer(d.end(pid, 32_765, True, version=5)).error_code == BAD_MAPPING
    d.load(0, epoch=2)
    assert (d.state().producer_id, d.state().producer_epoch, d.state().previous_producer_id) == (new_pid, 0, pid)
    assert set(_codes_v3(d.answer(d.add(new_pid, 0, [("t", 1)]))).values()) == {0}


def test_end_txn_v5_rotation_waits_for_the_producer_id():
    """No producer id yet: nothing is written, the EndTxn waits; an allocation failure answers
    COORDINATOR_NOT_AVAILABLE (retried by clients) and leaves the transaction open."""
    d = Driver(auto=False)
    d.auto = True
    pid, _ = d.ready()
    d.state().producer_epoch = 32_766
    d.answer(d.add(pid, 32_766, [("t", 0)]))
    d.auto = False
    token = d.end(pid, 32_766, False, version=5)
    assert token not in d.replies and not d.appends and len(d.allocs) == 1
    d.allocate(d.allocs[0], pid=-1)
    assert d.answer(token).error_code == 15 and d.state().state is TxnState.Ongoing


def test_implicit_add_of_transaction_version_2():
    """A partition leader's AddPartitionsToTxn v4+ that is not verify-only (Produce v12 /
    TxnOffsetCommit v5) starts the transaction after a version 2 EndTxn, at the bumped epoch;
    the ended epoch is fenced."""
    d = Driver()
    pid, epoch = _open(d)
    r = d.answer(d.end(pid, epoch, True, version=5))
    assert r.producer_epoch == epoch + 1
    resp = d.answer(d.add_v4([(TID, pid, epoch + 1, False, [("t", 2)]),]))
    codes = {p.partition_index: p.partition_error_code
             for t in resp.results_by_transaction[0].topic_results for p in t.results_by_partition}
    assert codes == {2: 0}
    meta = d.state()
    assert (meta.state, meta.partitions, meta.client_transaction_version) == (TxnState.Ongoing, {("t", 2)}, 2)
    stale = d.answer(d.add_v4([(TID, pid, epoch, False, [("t", 3)])]))
    assert stale.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code == FENCED
