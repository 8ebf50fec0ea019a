"""The idempotent-producer state machine (kafka-protocol.md section 4), its snapshot file, and
its rebuild from the log after a clean restart and after a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log import Log, LogConfig
from broker.records import BatchHeader, Record, encode_batch
from broker.replica.producer_recovery import load_producer_state, take_snapshot
from broker.replica.producer_snapshot import (
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
)
from broker.replica.producer_state import (
    BATCHES_RETAINED,
    INT32_MAX,
    Accepted,
    Duplicate,
    ProducerStateManager,
    Rejected,
)
from broker.wire import ErrorCode

PID = 4000


def header(epoch: int, base_seq: int, count: int = 1, pid: int = PID, ts: int = 1_000,
           base_offset: int = 0) -> BatchHeader:
    return BatchHeader(base_offset, 100, 0, 2, 0, 0, count - 1, ts, ts, pid, epoch, base_seq, count)


def manager(**kwargs) -> ProducerStateManager:
    return ProducerStateManager(kwargs.get("expiration_ms", 60_000), kwargs.get("entries_max", 100))


def appended(batches: list[tuple[int, int, int]]) -> ProducerStateManager:
    """A manager after appending (epoch, base_seq, count) batches back to back from offset 0."""
    state = manager()
    offset = 0
    for epoch, seq, count in batches:
        state.record_batch(header(epoch, seq, count), offset, 0)
        offset += count
    return state


def verdict(state: ProducerStateManager, epoch: int, seq: int, count: int = 1):
    return state.check_append([header(epoch, seq, count)])


def code(v) -> int | None:
    return v.error_code if isinstance(v, Rejected) else None


# ---------------------------------------------------------------------------- the rules


RULES = [
    # (what, history [(epoch, seq, count)], candidate (epoch, seq, count), kind, error code)
    ("no state: sequence 0", [], (0, 0, 1), Accepted, None),
    ("no state: any sequence (rule 5)", [], (3, 77, 2), Accepted, None),
    ("no state: the last sequence", [], (0, INT32_MAX, 1), Accepted, None),
    ("next in sequence", [(0, 0, 5)], (0, 5, 3), Accepted, None),
    ("gap ahead is out of order (rule 4)", [(0, 0, 5)], (0, 7, 1), Rejected, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("overlap reaching ahead is out of order", [(0, 0, 5)], (0, 3, 5), Rejected, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("range already written, not cached: duplicate 46", [(0, 0, 5)], (0, 1, 3), Rejected, ErrorCode.DUPLICATE_SEQUENCE_NUMBER),
    ("older epoch is fenced (rule 2)", [(2, 0, 1)], (1, 1, 1), Rejected, ErrorCode.INVALID_PRODUCER_EPOCH),
    ("older epoch even for a cached range", [(1, 0, 1), (2, 0, 1)], (1, 0, 1), Rejected, ErrorCode.INVALID_PRODUCER_EPOCH),
    ("epoch bump from sequence 0 (rule 3)", [(0, 0, 5)], (1, 0, 2), Accepted, None),
    ("epoch bump not at 0", [(0, 0, 5)], (1, 5, 1), Rejected, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("wrap: INT32_MAX then 0", [(0, INT32_MAX - 4, 5)], (0, 0, 1), Accepted, None),
    ("wrap: a batch across INT32_MAX", [(0, INT32_MAX - 1, 3)], (0, 1, 1), Accepted, None),
    ("wrap: gap after the wrap", [(0, INT32_MAX - 1, 3)], (0, 2, 1), Rejected, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("wrap: behind the wrap is a duplicate", [(0, INT32_MAX - 9, 5), (0, INT32_MAX - 4, 10)], (0, INT32_MAX - 9, 3),
     Rejected, ErrorCode.DUPLICATE_SEQUENCE_NUMBER),
    ("negative base sequence with a producer id", [], (0, -1, 1), Rejected, ErrorCode.INVALID_RECORD),
    ("negative epoch with a producer id", [], (-1, 0, 1), Rejected, ErrorCode.INVALID_RECORD),
]


@pytest.mark.parametrize("history, candidate, kind, error", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_sequence_rules(history, candidate, kind, error):
    v = verdict(appended(history), *candidate)
    assert isinstance(v, kind), v
    assert code(v) == error


@pytest.mark.parametrize("which", range(BATCHES_RETAINED))
def test_duplicate_of_each_cached_batch_answers_its_original_offsets(which):
    state = manager()
    offsets = []
    for i in range(BATCHES_RETAINED):
        offsets.append(100 + 10 * i)  # another producer's batches interleave in the log
        state.record_batch(header(0, 3 * i, 3), offsets[-1], 0)
    v = verdict(state, 0, 3 * which, 3)
    assert isinstance(v, Duplicate)
    assert (v.batch.first_offset, v.batch.last_offset) == (offsets[which], offsets[which] + 2)


def test_only_five_batches_are_cached():
    state = appended([(0, i, 1) for i in range(BATCHES_RETAINED + 1)])
    assert isinstance(verdict(state, 0, 1, 1), Duplicate)  # the second batch is still cached
    evicted = verdict(state, 0, 0, 1)
    assert code(evicted) == ErrorCode.DUPLICATE_SEQUENCE_NUMBER  # written, but not cached


def test_epoch_bump_clears_the_cache():
    state = appended([(0, 0, 5), (1, 0, 1)])
    entry = state.get(PID)
    assert entry.producer_epoch == 1 and len(entry.batches) == 1
    assert code(verdict(state, 0, 0, 5)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_non_idempotent_batches_have_no_state():
    state = manager()
    assert isinstance(state.check_append([header(-1, -1, 3, pid=-1)]), Accepted)
    state.record_batch(header(-1, -1, 3, pid=-1), 0, 0)
    assert len(state) == 0


def test_batches_of_one_append_continue_each_other():
    state = appended([(0, 0, 2)])
    ok = state.check_append([header(0, 2, 2), header(0, 4, 1)])
    gap = state.check_append([header(0, 2, 2), header(0, 5, 1)])
    assert isinstance(ok, Accepted)
    assert code(gap) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and gap.batch_index == 1


def test_record_append_assigns_consecutive_offsets():
    state = manager()
    state.record_append([header(0, 0, 2), header(0, 2, 3)], first_offset=50, append_ms=0)
    assert [(b.first_offset, b.last_offset) for b in state.get(PID).batches] == [(50, 51), (52, 54)]


def test_entries_are_bounded_least_recent_first():
    state = ProducerStateManager(expiration_ms=60_000, entries_max=2)
    for pid in (1, 2, 1, 3):
        entry = state.get(pid)
        seq = entry.last_seq + 1 if entry else 0
        state.record_batch(header(0, seq, pid=pid), 0, 0)
    assert sorted(e.producer_id for e in state.entries()) == [1, 3]


def test_expiry_counts_from_the_last_append_on_the_broker_clock():
    """Not from the batch timestamps: a producer replaying old records keeps its state."""
    state = ProducerStateManager(expiration_ms=1_000, entries_max=10)
    state.record_batch(header(0, 0, pid=1, ts=9_000), 0, append_ms=5_000)
    state.record_batch(header(0, 0, pid=2, ts=1), 1, append_ms=6_000)
    assert state.expire(now_ms=6_500) == 1
    assert [e.producer_id for e in state.entries()] == [2]


# ----------------------------------------------------------------------- snapshot format


def test_snapshot_round_trip():
    state = appended([(0, 0, 5), (0, 5, 1), (0, 6, 2)])
    state.record_batch(header(3, 0, 4, pid=9, ts=7), 40, 123)
    decoded = decode_snapshot(encode_snapshot(state.entries()))
    assert _as_dict(decoded) == _as_dict(state.entries())


@pytest.mark.parametrize("damage", ["crc", "truncated", "version", "trailing"])
def test_damaged_snapshots_are_refused(damage):
    data = bytearray(encode_snapshot(appended([(0, 0, 5)]).entries()))
    if damage == "crc":
        data[-1] ^= 1
    elif damage == "truncated":
        data = data[:-3]
    elif damage == "version":
        data[1] = 9
    else:
        data += b"\x00"
    with pytest.raises(SnapshotError):
        decode_snapshot(bytes(data))


def _as_dict(entries) -> dict:
    return {e.producer_id: (e.producer_epoch, list(e.batches)) for e in entries}


# ----------------------------------------------------------------- restart and rebuild

CLOCK = lambda: 1_700_000_000_000  # noqa: E731


def _append(log: Log, state: ProducerStateManager, seq: int, count: int = 2, pid: int = PID) -> int:
    records = [Record(i, 1_000 + i, b"k", b"v") for i in range(count)]
    batch = encode_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq)
    info = log.append_as_leader(batch, leader_epoch=0)
    state.record_append([header(0, seq, count, pid=pid, ts=1_000 + count - 1)], info.first_offset,
                        CLOCK())
    return info.first_offset


def _reload(directory: Path, clean: bool) -> tuple[Log, ProducerStateManager, int]:
    log = Log.open(directory, LogConfig(), CLOCK, clean_shutdown=clean)
    state = manager(expiration_ms=60_000)
    replayed = load_producer_state(log, state, CLOCK())
    return log, state, replayed


def test_clean_restart_loads_the_snapshot_without_scanning(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), CLOCK)
    state = manager(expiration_ms=60_000)
    for seq in range(0, 14, 2):
        _append(log, state, seq)
    take_snapshot(log, state)
    log.close()
    log, loaded, replayed = _reload(tmp_path / "t-0", clean=True)
    assert replayed == 0 and _as_dict(loaded.entries()) == _as_dict(state.entries())
    assert isinstance(verdict(loaded, 0, 12, 2), Duplicate)  # the last batch, after the restart
    log.close()


def test_crash_restart_replays_headers_after_the_snapshot(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), CLOCK)
    state = manager(expiration_ms=60_000)
    for seq in range(0, 6, 2):
        _append(log, state, seq)
    take_snapshot(log, state)
    offsets = [_append(log, state, seq) for seq in range(6, 12, 2)]
    _append(log, state, 0, pid=77)
    log.flush()
    log.close_handles()  # a crash: no snapshot, no clean-shutdown marker
    log, loaded, replayed = _reload(tmp_path / "t-0", clean=False)
    assert replayed == 4
    assert _as_dict(loaded.entries()) == _as_dict(state.entries())
    duplicate = verdict(loaded, 0, 10, 2)
    assert isinstance(duplicate, Duplicate) and duplicate.batch.first_offset == offsets[-1]
    log.close()


def test_snapshot_above_the_log_end_is_dropped(tmp_path):
    """A crash lost the log's tail after the snapshot was taken: the snapshot describes batches
    that no longer exist, so it is deleted and the state rebuilt from the log."""
    log = Log.open(tmp_path / "t-0", LogConfig(), CLOCK)
    state = manager(expiration_ms=60_000)
    for seq in range(0, 8, 2):
        _append(log, state, seq)
    take_snapshot(log, state)
    log.truncate_to(4)  # as recovery would after losing the tail
    log.close()
    log, loaded, replayed = _reload(tmp_path / "t-0", clean=True)
    assert list_snapshots(tmp_path / "t-0") == []
    assert replayed == 2
    assert [b.last_seq for b in loaded.get(PID).batches] == [1, 3]
    log.close()


def test_unreadable_snapshot_falls_back_to_the_log(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), CLOCK)
    state = manager(expiration_ms=60_000)
    for seq in range(0, 6, 2):
        _append(log, state, seq)
    path = take_snapshot(log, state)
    log.close()
    path.write_bytes(path.read_bytes()[:-1])
    log, loaded, replayed = _reload(tmp_path / "t-0", clean=True)
    assert replayed == 3 and not path.exists()
    assert _as_dict(loaded.entries()) == _as_dict(state.entries())
    log.close()
