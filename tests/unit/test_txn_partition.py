"""The partition side of transactions (``broker.replica.transactions``, ``broker.log.txn_index``):
the .txnindex format, open transactions and the LSO, markers and their refusals, read_committed
reads with AbortedTransactions, followers and recovery rebuilding the same state."""

from __future__ import annotations

import os

import pytest

from broker.cluster.layout import PartitionState
from broker.log import LogConfig, LogManager
from broker.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, decode_entries, encode_entry
from broker.records import DEFAULT_LIMITS, Record, encode_batch, iter_batches
from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.partition import ISOLATION_READ_COMMITTED, ISOLATION_READ_UNCOMMITTED, Partition
from broker.replica.producer_recovery import load_producer_state
from broker.replica.producer_state import ProducerStateManager
from broker.sim.disk import MemoryLog
from broker.wire import ErrorCode


class Clock:
    def __init__(self) -> None:
        self.now = 10_000

    def __call__(self) -> int:
        return self.now


def batch(values, producer_id=-1, epoch=-1, sequence=-1, transactional=False) -> memoryview:
    return memoryview(encode_batch([Record(i, 1_000, b"k", v.encode()) for i, v in enumerate(values)],
                                   producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                   transactional=transactional))


def make(broker: int, clock: Clock, log=None, leader: int = 1) -> Partition:
    log = log if log is not None else MemoryLog("t-0")
    epochs = log.leader_epochs if isinstance(log, MemoryLog) else LeaderEpochCache(None)
    p = Partition("t", 0, log, broker, ProducerStateManager(86_400_000, 100), epochs, clock,
                  lambda key: None, 30_000)
    assert p.update_state((1,), PartitionState(leader, 0, (1,), 1), 0)
    return p


def real_log(tmp_path, clock):
    manager = LogManager([tmp_path], LogConfig(), clock)
    return manager.get_or_create("t", 0), manager


def txn(p: Partition, values, pid=7, epoch=0, sequence=0, verified=True):
    return p.append_as_leader(batch(values, pid, epoch, sequence, transactional=True), -1,
                              DEFAULT_LIMITS, txn_verified=verified)


# ----------------------------------------------------------------------------- .txnindex


def test_txnindex_entry_is_kafkas_34_byte_layout():
    entry = AbortedTxn(producer_id=7, first_offset=3, last_offset=9, last_stable_offset=10)
    data = encode_entry(entry)
    assert len(data) == ENTRY_SIZE == 34
    assert data[:2] == b"\x00\x00"  # version 0
    assert int.from_bytes(data[2:10], "big") == 7 and int.from_bytes(data[10:18], "big") == 3
    assert int.from_bytes(data[18:26], "big") == 9 and int.from_bytes(data[26:34], "big") == 10
    assert decode_entries(data + data[:20]) == ([entry], 34)  # a partial tail is not an entry


def test_txnindex_files_survive_reopen_cut_partial_entries_and_truncate(tmp_path):
    index = TransactionIndex(tmp_path)
    index.append(0, AbortedTxn(1, 0, 4, 5))
    index.append(0, AbortedTxn(2, 2, 8, 9))
    index.append(100, AbortedTxn(3, 101, 105, 106))
    path = tmp_path / f"{0:020d}.txnindex"
    assert path.stat().st_size == 68
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a crash in the middle of a third entry
    reopened = TransactionIndex(tmp_path)
    assert path.stat().st_size == 68
    assert reopened.entries() == index.entries()
    assert reopened.collect(5, 100) == [AbortedTxn(2, 2, 8, 9)]  # the first ended before 5
    assert reopened.collect(0, 2) == [AbortedTxn(1, 0, 4, 5)]  # the second began at 2
    reopened.truncate_from(8)
    assert reopened.entries() == [AbortedTxn(1, 0, 4, 5)]
    assert path.stat().st_size == 34 and not (tmp_path / f"{100:020d}.txnindex").exists()


def test_txnindex_entries_of_a_merged_segment_move_to_the_segment_holding_them(tmp_path):
    index = TransactionIndex(tmp_path)
    index.append(0, AbortedTxn(1, 0, 4, 5))
    index.append(50, AbortedTxn(2, 51, 60, 61))
    index.reconcile([0], log_start_offset=0)  # a cleaner swap merged segment 50 into 0
    assert TransactionIndex(tmp_path).entries() == [AbortedTxn(1, 0, 4, 5), AbortedTxn(2, 51, 60, 61)]
    index.reconcile([50], log_start_offset=50)  # retention removed segment 0 ... and its entry
    assert index.entries() == [AbortedTxn(2, 51, 60, 61)]


# ----------------------------------------------------------------------- LSO and markers


def test_lso_stops_at_the_first_open_transaction_and_moves_on_its_marker():
    clock = Clock()
    p = make(1, clock)
    p.append_as_leader(batch(["a", "b"]), -1, DEFAULT_LIMITS)  # 0-1
    assert txn(p, ["t1"], pid=7).base_offset == 2
    assert txn(p, ["u1"], pid=8).base_offset == 3
    assert txn(p, ["t2"], pid=7, sequence=1).base_offset == 4
    assert p.high_watermark == 5 and p.last_stable_offset == 2
    assert p.append_txn_marker(7, 0, 0, committed=True).base_offset == 5
    assert p.last_stable_offset == 3  # producer 8 still open
    assert p.producer_state.get(7).current_txn_first_offset == -1
    assert p.append_txn_marker(8, 0, 0, committed=False).base_offset == 6
    assert p.last_stable_offset == p.high_watermark == 7
    assert p.txn_index.entries() == [AbortedTxn(8, 3, 6, 7)]


def test_lso_is_capped_by_the_high_watermark():
    clock = Clock()
    p = make(1, clock)
    assert p.update_state((1, 2), PartitionState(1, 1, (1, 2), 1), 1)
    p.append_as_leader(batch(["a"]), -1, DEFAULT_LIMITS)
    txn(p, ["t"])
    assert p.high_watermark == 0 and p.last_stable_offset == 0
    p.record_follower_fetch(2, 1)
    assert p.high_watermark == 1 and p.last_stable_offset == 1  # the open txn starts at 1
    p.record_follower_fetch(2, 2)
    assert p.high_watermark == 2 and p.last_stable_offset == 1


def test_unverified_first_transactional_batch_is_refused_and_later_ones_need_no_verification():
    p = make(1, Clock())
    refused = txn(p, ["t"], verified=False)
    assert refused.error_code == ErrorCode.INVALID_TXN_STATE and p.log.log_end_offset == 0
    assert txn(p, ["t"]).error_code == ErrorCode.NONE
    assert not p.needs_txn_verification(next(iter_batches(batch(["x"], 7, 0, 1, True)))[1])
    assert txn(p, ["t2"], sequence=1, verified=False).error_code == ErrorCode.NONE
    # a plain batch of the same producer while its transaction is open: refused, as Kafka
    plain = p.append_as_leader(batch(["p"], 7, 0, 2), -1, DEFAULT_LIMITS)
    assert plain.error_code == ErrorCode.INVALID_TXN_STATE
    p.append_txn_marker(7, 0, 0, committed=True)
    # the next transaction of the same producer and epoch must be verified again
    assert txn(p, ["t3"], sequence=2, verified=False).error_code == ErrorCode.INVALID_TXN_STATE


def test_marker_refusals_epochs_and_coordinator_fencing():
    p = make(1, Clock())
    txn(p, ["t"], epoch=3)
    assert p.append_txn_marker(7, 2, 5, committed=True).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.append_txn_marker(7, 3, 5, committed=False).error_code == ErrorCode.NONE
    assert p.producer_state.get(7).coordinator_epoch == 5
    txn(p, ["u"], epoch=3, sequence=1)
    end = p.log.log_end_offset
    assert p.append_txn_marker(7, 3, 4, committed=True).error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert p.log.log_end_offset == end and p.last_stable_offset == end - 1  # nothing appended
    assert p.append_txn_marker(7, 3, 5, committed=True).error_code == ErrorCode.NONE
    # a marker for a producer that never wrote here is appended and changes nothing else
    assert p.append_txn_marker(99, 0, 5, committed=False).error_code == ErrorCode.NONE
    assert p.txn_index.entries() == [AbortedTxn(7, 0, 1, 2)]


def test_marker_below_min_insync_replicas_is_refused():
    p = make(1, Clock())
    assert p.update_state((1, 2), PartitionState(1, 1, (1,), 1), 1)
    p.min_insync_replicas = 2
    assert p.append_txn_marker(7, 0, 0, committed=True).error_code == ErrorCode.NOT_ENOUGH_REPLICAS


# -------------------------------------------------------------------- read_committed


def test_read_committed_stops_at_the_lso_and_names_aborted_transactions():
    p = make(1, Clock())
    txn(p, ["a1", "a2"], pid=7)              # 0-1
    txn(p, ["c1"], pid=8)                    # 2
    p.append_txn_marker(7, 0, 0, committed=False)  # 3
    p.append_txn_marker(8, 0, 0, committed=True)   # 4
    txn(p, ["open"], pid=9)                  # 5
    p.append_as_leader(batch(["plain"]), -1, DEFAULT_LIMITS)  # 6
    assert p.high_watermark == 7 and p.last_stable_offset == 5
    committed = p.read(0, 1 << 20, ISOLATION_READ_COMMITTED, True)
    assert [h.base_offset for _, h in iter_batches(committed.records)] == [0, 2, 3, 4]
    assert committed.last_stable_offset == 5
    # producer 8's transaction was open when 7 aborted: the LSO after the abort was 2
    assert committed.aborted_transactions == (AbortedTxn(7, 0, 3, 2),)
    uncommitted = p.read(0, 1 << 20, ISOLATION_READ_UNCOMMITTED, True)
    assert [h.base_offset for _, h in iter_batches(uncommitted.records)] == [0, 2, 3, 4, 5, 6]
    assert uncommitted.aborted_transactions == ()
    assert p.read(3, 1 << 20, ISOLATION_READ_COMMITTED, True).aborted_transactions == (AbortedTxn(7, 0, 3, 2),)
    assert p.read(4, 1 << 20, ISOLATION_READ_COMMITTED, True).aborted_transactions == ()  # ended at 3
    assert p.read(5, 1 << 20, ISOLATION_READ_COMMITTED, True).records == b""


# -------------------------------------------------------- followers and recovery


def test_follower_rebuilds_the_same_open_transactions_and_index():
    clock = Clock()
    leader = make(1, clock)
    txn(leader, ["a"], pid=7)
    txn(leader, ["b"], pid=8)
    leader.append_txn_marker(7, 0, 2, committed=False)
    follower = make(2, clock)
    data = leader.log.read(0, 1 << 20, None, True).records
    follower.append_as_follower(data, leader.high_watermark)
    assert follower.producer_state.ongoing() == leader.producer_state.ongoing() == {8: 1}
    assert follower.txn_index.entries() == leader.txn_index.entries() == [AbortedTxn(7, 0, 2, 1)]
    assert follower.last_stable_offset == leader.last_stable_offset == 1
    assert follower.producer_state.get(7).coordinator_epoch == 2


@pytest.mark.parametrize("snapshot", [False, True])
def test_recovery_restores_open_transactions_and_rebuilds_the_index(tmp_path, snapshot):
    clock = Clock()
    log, manager = real_log(tmp_path, clock)
    p = make(1, clock, log)
    txn(p, ["a"], pid=7)
    txn(p, ["b"], pid=8)
    p.append_txn_marker(7, 0, 0, committed=False)
    if snapshot:
        assert p.snapshot_producer_state()
    txn(p, ["c"], pid=9)
    p.append_txn_marker(9, 0, 0, committed=False)
    expected = p.txn_index.entries()
    assert len(expected) == 2
    p.log.flush()
    manager.close()
    index_file = tmp_path / "t-0" / f"{0:020d}.txnindex"
    os.truncate(index_file, 40)  # the crash cut the second entry (6 of its bytes left)
    log = LogManager([tmp_path], LogConfig(), clock).get_or_create("t", 0)
    state = ProducerStateManager(86_400_000, 100)
    index = TransactionIndex(log.directory)
    load_producer_state(log, state, clock(), index)
    # without a snapshot the whole log is replayed; with one (at offset 3) the first entry is
    # trusted (fsynced before the snapshot) and the second rebuilt from its replayed marker
    assert index.entries() == expected
    assert state.ongoing() == {8: 1}  # the LSO stays at the open transaction
    assert index_file.stat().st_size % ENTRY_SIZE == 0


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path):
    clock = Clock()
    follower = make(2, clock, real_log(tmp_path, clock)[0], leader=1)
    source = make(1, clock)
    txn(source, ["a"], pid=7)
    source.append_txn_marker(7, 0, 0, committed=False)
    follower.append_as_follower(source.log.read(0, 1 << 20, None, True).records, 0)
    assert follower.txn_index.entries() == [AbortedTxn(7, 0, 1, 2)]
    assert follower.truncate_to(1)
    assert follower.txn_index.entries() == []
    assert follower.producer_state.ongoing() == {7: 0}  # the marker is gone: open again
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()


def test_eviction_keeps_producers_with_open_transactions():
    state = ProducerStateManager(86_400_000, 2)
    headers = [h for _, h in iter_batches(batch(["a"], 1, 0, 0, transactional=True))]
    state.record_batch(headers[0], 0, 1)
    for pid in (2, 3, 4):
        state.record_batch(next(iter_batches(batch(["x"], pid, 0, 0)))[1], pid, 1 + pid)
    assert state.get(1) is not None and state.get(1).current_txn_first_offset == 0
    assert len(state) == 2 and state.ongoing() == {1: 0}


def test_txnindex_collect_spans_segments_and_stops_at_a_stable_entry():
    index = TransactionIndex(None)
    index.append(0, AbortedTxn(1, 0, 40, 10))      # producer 2's transaction (10..) was open
    index.append(100, AbortedTxn(2, 10, 120, 121))  # a long transaction, marker in a later segment
    index.append(100, AbortedTxn(3, 150, 160, 161))
    assert index.collect(50, 130) == [AbortedTxn(2, 10, 120, 121)]  # begun before 130, ended at 120
    assert index.collect(0, 20) == [AbortedTxn(1, 0, 40, 10), AbortedTxn(2, 10, 120, 121)]
    assert index.collect(121, 200) == [AbortedTxn(3, 150, 160, 161)]


def test_a_marker_at_a_bumped_epoch_resets_the_sequences():
    """The coordinator aborts a fenced producer's transaction at epoch + 1; the next batch of
    that epoch starts at sequence 0 and must not be taken for an old duplicate (46)."""
    p = make(1, Clock())
    for sequence in range(3):
        assert txn(p, ["x"], sequence=sequence).error_code == ErrorCode.NONE
    assert p.append_txn_marker(7, 1, 0, committed=False).error_code == ErrorCode.NONE
    answer = txn(p, ["new"], epoch=1, sequence=0)
    assert answer.error_code == ErrorCode.NONE and answer.base_offset == 4


def test_a_producer_known_only_by_its_marker_survives_a_snapshot(tmp_path):
    """After a marker at a bumped epoch the entry holds no batch, but its epoch and coordinator
    epoch still fence stale markers after a restart."""
    clock = Clock()
    log, manager = real_log(tmp_path, clock)
    p = make(1, clock, log)
    txn(p, ["x"])
    p.append_txn_marker(7, 1, 4, committed=False)
    assert p.snapshot_producer_state()
    manager.close()
    state = ProducerStateManager(86_400_000, 100)
    reopened = LogManager([tmp_path], LogConfig(), clock).get_or_create("t", 0)
    load_producer_state(reopened, state, clock())
    entry = state.get(7)
    assert (entry.producer_epoch, entry.coordinator_epoch, len(entry.batches)) == (1, 4, 0)
