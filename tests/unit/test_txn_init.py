"""InitProducerId with a transactional id on ``TxnCoordinatorCore`` (Kafka's
TransactionCoordinator.handleInitProducerId, transaction version 0)."""

from __future__ import annotations

from txn_helpers import TID, Driver

from broker.coordinator.txn.core import TxnSettings
from broker.coordinator.txn.records import decode_key, decode_value
from broker.coordinator.txn.state import TxnState

CONCURRENT_TRANSACTIONS, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH = 51, 90, 47


def test_new_id_gets_a_producer_id_after_allocation_and_write():
    d = Driver(auto=False)
    token = d.init()
    assert d.answer(token) is None and len(d.allocs) == 1
    d.allocate(d.allocs[0], pid=4242)
    assert d.answer(token) is None, "answered before the Empty record was written"
    (write_id,) = d.appends
    d.complete_write(write_id)
    r = d.answer(token)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 4242, 0)
    key, value = d.log[0][0]
    v = decode_value(value)
    assert decode_key(key) == TID and v.transaction_status == 0 and v.transaction_partitions is None
    assert (v.producer_id, v.producer_epoch, v.transaction_timeout_ms) == (4242, 0, 60_000)


def test_failed_allocation_answers_coordinator_not_available():
    d = Driver(auto=False)
    token = d.init()
    d.allocate(d.allocs[0], pid=-1)
    assert d.answer(token).error_code == 15


def test_known_id_bumps_epoch_and_keeps_producer_id():
    d = Driver()
    pid, epoch = d.ready()
    assert d.ready() == (pid, epoch + 1)
    assert d.ready() == (pid, epoch + 2)


def test_timeout_above_max_or_zero_is_invalid_transaction_timeout():
    d = Driver(TxnSettings(num_partitions=1, max_timeout_ms=10_000))
    assert d.answer(d.init(timeout_ms=10_001)).error_code == 50
    assert d.answer(d.init(timeout_ms=0)).error_code == 50
    assert d.answer(d.init(timeout_ms=10_000)).error_code == 0


def test_empty_transactional_id_is_invalid_request():
    d = Driver()
    assert d.answer(d.init(tid="")).error_code == 42


def test_ongoing_transaction_is_fenced_aborted_then_retry_gets_next_epoch():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = d.ready()
    assert d.answer(d.add(pid, epoch, [("t", 0)])).error_code == 0
    d.auto = False
    token = d.init()
    # the fence bumps the epoch at once: the old producer is refused before anything is written
    assert d.answer(d.add(pid, epoch, [("t", 1)])).results_by_topic_v3_and_below[0] \
        .results_by_partition[0].partition_error_code == PRODUCER_FENCED
    (write_id,) = d.appends
    d.complete_write(write_id)  # PrepareAbort written
    assert d.answer(token).error_code == CONCURRENT_TRANSACTIONS
    (marker,) = d.markers.values()
    assert (marker.producer_epoch, marker.committed, marker.partitions) == (epoch + 1, False, (("t", 0),))
    assert d.answer(d.init()).error_code == CONCURRENT_TRANSACTIONS  # markers not written yet
    d.auto = True
    d.complete_markers(marker.marker_id)
    assert d.state().state is TxnState.CompleteAbort
    assert d.ready() == (pid, epoch + 2)


def test_prepare_states_answer_concurrent_transactions():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = d.ready()
    d.add(pid, epoch, [("t", 0)])
    d.auto = False
    d.end(pid, epoch, True)
    d.complete_write(next(iter(d.appends)))
    assert d.state().state is TxnState.PrepareCommit
    assert d.answer(d.init()).error_code == CONCURRENT_TRANSACTIONS


def test_pending_write_answers_concurrent_transactions():
    d = Driver(auto=False)
    d.auto = True
    d.ready()
    d.auto = False
    first = d.init()
    assert d.answer(d.init()).error_code == CONCURRENT_TRANSACTIONS
    d.complete_write(next(iter(d.appends)))
    assert d.answer(first).error_code == 0


def test_epoch_exhaustion_rotates_to_a_new_producer_id():
    d = Driver()
    pid, _ = d.ready()
    d.state().producer_epoch = 32_765  # next bump reaches the exhausted epoch
    assert d.ready() == (pid, 32_766)
    new_pid, epoch = d.ready()
    assert new_pid != pid and epoch == 0
    assert d.state().previous_producer_id == pid


def test_kip360_recovering_producer_bumps_its_own_epoch_and_retries_are_idempotent():
    d = Driver()
    pid, epoch = d.ready()
    r = d.answer(d.init(pid=pid, epoch=epoch))
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    # the same request again (its answer was lost): the current epoch, not another bump
    r = d.answer(d.init(pid=pid, epoch=epoch))
    assert (r.error_code, r.producer_epoch) == (0, epoch + 1)
    # a stale epoch that is neither current nor last: fenced
    assert d.answer(d.init(pid=pid, epoch=epoch + 7)).error_code == PRODUCER_FENCED
    # another producer id: fenced; a half-given id/epoch: invalid request
    assert d.answer(d.init(pid=pid + 1, epoch=0)).error_code == PRODUCER_FENCED
    assert d.answer(d.init(pid=pid, epoch=-1)).error_code == 42


def test_fenced_is_invalid_producer_epoch_before_v4():
    d = Driver()
    pid, epoch = d.ready()
    d.ready()
    assert d.answer(d.init(pid=pid, epoch=epoch + 5, version=3)).error_code == INVALID_PRODUCER_EPOCH
    assert d.answer(d.init(pid=pid, epoch=epoch + 5, version=4)).error_code == PRODUCER_FENCED


def test_write_failure_maps_to_coordinator_errors_and_changes_nothing():
    d = Driver(auto=False)
    d.auto = True
    pid, epoch = d.ready()
    d.auto = False
    for produce_error, answer in [(19, 15), (7, 15), (3, 15), (6, 16), (56, 16), (10, -1)]:
        token = d.init()
        d.complete_write(next(iter(d.appends)), error=produce_error)
        assert d.answer(token).error_code == answer
        assert (d.state().producer_epoch, d.state().pending) == (epoch, None)
