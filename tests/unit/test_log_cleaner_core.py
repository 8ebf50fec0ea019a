"""The cleaner's pure core: key hashes, the bounded offset map, and what a pass keeps.

The property tests run the core over an in-memory log (batches of (offset, key, value) records)
the way the cleaner's shell runs it over segments: build the offset map over the dirty section
(possibly in several passes when it does not fit), decide every batch from the log start, apply
the decisions, repeat; then check the result against a model: the last value of every key that
was not deleted, at its original offset.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.cleaner.key_hash import _siphash24, _siphash24_pair, hash_keys, new_hash_keys
from broker.log.cleaner.offset_map import OffsetMapBuilder, capacity_for
from broker.log.cleaner.retention import (
    DROP,
    EMPTY,
    KEEP,
    ACT_DROP,
    ACT_EMPTY,
    ACT_KEEP,
    ACT_REWRITE,
    NO_HORIZON,
    REWRITE,
    AbortedTxn,
    BatchFacts,
    ChunkRecords,
    PlainBatches,
    RetentionPass,
)

HASH_KEYS = (0x0706050403020100, 0x0F0E0D0C0B0A0908, 11, 12)
DELETE_RETENTION_MS = 1000


# -- key hashes ------------------------------------------------------------------------------------

def test_siphash_matches_the_reference_vectors():
    # SipHash-2-4 paper (Aumasson, Bernstein), key 00..0f, message 00..(n-1).
    k0, k1 = struct.unpack("<QQ", bytes(range(16)))
    message = np.frombuffer(bytes(range(64)), dtype=np.uint8)
    expected = {0: 0x726FDB47DD0E0E31, 1: 0x74F839C593DC67FD, 8: 0x93F5F5799A932462,
                15: 0xA129CA6149BE45E5, 63: 0x958A324CEB064572}
    for length, value in expected.items():
        assert int(_siphash24(message, 0, length, np.uint64(k0), np.uint64(k1))) == value


def test_the_hash_pair_is_two_siphashes_computed_side_by_side():
    message = np.frombuffer(bytes(range(64)), dtype=np.uint8)
    keys = [np.uint64(k) for k in (0x0706050403020100, 0x0F0E0D0C0B0A0908, 0xDEADBEEF, 1 << 63)]
    for start, end in [(0, 0), (0, 1), (3, 11), (0, 8), (5, 64), (7, 22)]:
        pair = _siphash24_pair(message, start, end, *keys)
        assert pair == (_siphash24(message, start, end, keys[0], keys[1]),
                        _siphash24(message, start, end, keys[2], keys[3]))


def _binary(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(k) for k in keys])
    data = np.frombuffer(b"".join(keys), dtype=np.uint8) if keys else np.empty(0, np.uint8)
    return offsets, data


def test_equal_keys_hash_equal_and_keys_change_the_hash():
    keys = [b"a", b"b", b"a", b"", b"longer key with more than eight bytes", b"b"]
    hi, lo = hash_keys(*_binary(keys), HASH_KEYS)
    assert (hi[0], lo[0]) == (hi[2], lo[2]) and (hi[1], lo[1]) == (hi[5], lo[5])
    assert len({(int(h), int(l)) for h, l in zip(hi, lo)}) == 4
    other_hi, _ = hash_keys(*_binary(keys), (1, 2, 3, 4))
    assert not np.array_equal(hi, other_hi)


def test_hash_keys_are_drawn_from_the_rng_given():
    assert new_hash_keys(random.Random(7)) == new_hash_keys(random.Random(7))
    assert new_hash_keys(random.Random(7)) != new_hash_keys(random.Random(8))


# -- the offset map ---------------------------------------------------------------------------------

def _hashes(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    return hash_keys(*_binary(keys), HASH_KEYS)


def test_offset_map_keeps_the_newest_offset_per_key():
    keys = [b"a", b"b", b"a", b"c", b"b"]
    hi, lo = _hashes(keys)
    builder = OffsetMapBuilder(capacity=10, start_offset=100)
    offsets = np.arange(100, 105, dtype=np.int64)
    assert builder.add(offsets, hi, lo, np.ones(5, bool)) == 5
    offset_map = builder.build(105)
    qhi, qlo = _hashes([b"a", b"b", b"c", b"d"])
    assert offset_map.latest_offsets(qhi, qlo).tolist() == [102, 104, 103, -1]


def test_a_full_offset_map_stops_at_the_record_that_brings_one_key_too_many():
    keys = [b"a", b"b", b"a", b"c", b"b", b"d"]
    hi, lo = _hashes(keys)
    builder = OffsetMapBuilder(capacity=2, start_offset=0)
    consumed = builder.add(np.arange(6, dtype=np.int64), hi, lo, np.ones(6, bool))
    assert consumed == 3 and builder.full  # "c" at index 3 is the third key
    offset_map = builder.build(3)
    qhi, qlo = _hashes([b"a", b"b", b"c"])
    assert offset_map.latest_offsets(qhi, qlo).tolist() == [2, 1, -1]


def test_unmapped_records_take_no_room():
    hi, lo = _hashes([b"a", b"b", b"c"])
    builder = OffsetMapBuilder(capacity=1, start_offset=0)
    assert builder.add(np.arange(3, dtype=np.int64), hi, lo, np.array([False, True, False])) == 3
    assert len(builder) == 1


def test_capacity_follows_the_dedupe_buffer():
    assert capacity_for(24 * 1000) == 750  # 24-byte slots, full at a load factor of 0.75
    assert capacity_for(1) == 1


def test_a_map_full_of_colliding_slots_still_finds_every_key():
    # Keys whose hashes all start probing at the same slot: linear probing must still work.
    builder = OffsetMapBuilder(capacity=6, start_offset=0)
    hi = np.full(6, 8 * 1000, dtype=np.uint64)  # same slot modulo any table size that divides 8000
    lo = np.arange(6, dtype=np.uint64)
    assert builder.add(np.arange(6, dtype=np.int64), hi, lo, np.ones(6, bool)) == 6
    offset_map = builder.build(6)
    assert offset_map.latest_offsets(hi, lo).tolist() == list(range(6))
    assert offset_map.latest_offsets(hi[:1], np.array([99], np.uint64)).tolist() == [-1]


# -- passes over an in-memory log -------------------------------------------------------------------

@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    records: tuple[Rec, ...]
    producer_id: int = -1
    transactional: bool = False
    control: bool = False
    delete_horizon_ms: int = NO_HORIZON


def _facts_and_records(batches: list[Batch]) -> tuple[list[BatchFacts], ChunkRecords]:
    facts, recs = [], []
    for batch in batches:
        first = len(recs)
        if not batch.control:
            recs.extend(batch.records)
        facts.append(BatchFacts(batch.base_offset, batch.last_offset, batch.producer_id,
                                batch.transactional, batch.control, batch.delete_horizon_ms,
                                first, len(recs)))
    hi, lo = _hashes([r.key or b"" for r in recs])
    return facts, ChunkRecords(
        offsets=np.array([r.offset for r in recs], dtype=np.int64), hi=hi, lo=lo,
        has_key=np.array([r.key is not None for r in recs], dtype=bool),
        is_tombstone=np.array([r.value is None for r in recs], dtype=bool))


def _apply(batch: Batch, decision) -> Batch | None:
    """What the shell writes for one decision (offsets, producer fields and span kept)."""
    if decision.action == DROP:
        return None
    if decision.action == KEEP:
        return batch
    if decision.action == EMPTY:
        return replace(batch, records=())
    assert decision.action == REWRITE
    records = batch.records if decision.keep is None else tuple(
        r for r, k in zip(batch.records, decision.keep) if k)
    return replace(batch, records=records, delete_horizon_ms=decision.delete_horizon_ms)


def clean(log: list[Batch], first_dirty: int, capacity: int, now_ms: int, *, chunk_batches: int = 3,
          aborted=(), producer_last=None) -> tuple[list[Batch], int]:
    """One pass: map from ``first_dirty`` as far as ``capacity`` allows, decide every batch from
    the log start in chunks of ``chunk_batches``; returns the new log and the new first dirty offset."""
    builder = OffsetMapBuilder(capacity, first_dirty)
    end = log[-1].last_offset + 1 if log else first_dirty
    for batch in log:
        if batch.last_offset < first_dirty or batch.control:
            continue
        facts, recs = _facts_and_records([batch])
        mapped = recs.has_key & ~np.array(
            [batch.transactional and any(a.producer_id == batch.producer_id and a.first_offset <= batch.base_offset <= a.last_offset for a in aborted)] * len(recs.offsets), dtype=bool)
        mapped &= recs.offsets >= first_dirty
        consumed = builder.add(recs.offsets, recs.hi, recs.lo, mapped)
        if consumed < len(recs.offsets):
            end = int(recs.offsets[consumed])
            break
    offset_map = builder.build(end)
    if producer_last is None:
        producer_last = {}
        for batch in log:
            if batch.producer_id >= 0:
                producer_last[batch.producer_id] = batch.last_offset
    retention, twin = (RetentionPass(offset_map, now_ms=now_ms, delete_retention_ms=DELETE_RETENTION_MS,
                                     producer_last_offsets=producer_last, aborted=list(aborted)) for _ in range(2))
    out: list[Batch] = []
    for i in range(0, len(log), chunk_batches):
        chunk = log[i:i + chunk_batches]
        facts, recs = _facts_and_records(chunk)
        decisions = retention.decide(facts, recs)
        if any(b.transactional or b.control for b in chunk):
            twin.decide(facts, recs)
        else:  # the shell decides such a chunk with decide_plain: it must say the same
            _assert_plain_says_the_same(twin, facts, recs, decisions)
        for batch, decision in zip(chunk, decisions):
            kept = _apply(batch, decision)
            if kept is not None:
                out.append(kept)
    return out, end


def _assert_plain_says_the_same(retention: RetentionPass, facts: list[BatchFacts], recs: ChunkRecords,
                                decisions) -> None:
    column = lambda name: np.array([getattr(f, name) for f in facts], dtype=np.int64)  # noqa: E731
    plain = retention.decide_plain(PlainBatches(
        column("base_offset"), column("last_offset"), column("producer_id"), column("delete_horizon_ms"),
        column("first_record"), column("end_record")), recs)
    actions = {KEEP: ACT_KEEP, REWRITE: ACT_REWRITE, DROP: ACT_DROP, EMPTY: ACT_EMPTY}
    for i, (fact, decision) in enumerate(zip(facts, decisions)):
        assert plain.actions[i] == actions[decision.action], (i, decision)
        if decision.action in (REWRITE, EMPTY):
            assert plain.delete_horizons[i] == decision.delete_horizon_ms
        if decision.action == REWRITE:
            assert np.array_equal(plain.keep[fact.first_record:fact.end_record], decision.keep)


def clean_fully(log, capacity, now_ms, **kw):
    first_dirty = log[0].base_offset if log else 0
    end = log[-1].last_offset + 1 if log else 0
    passes = 0
    while first_dirty < end:
        log, first_dirty = clean(log, first_dirty, capacity, now_ms, **kw)
        passes += 1
        assert passes <= end + 1, "cleaning makes no progress"
    return log, passes


def _survivors(log: list[Batch]) -> dict[bytes, tuple[int, bytes | None]]:
    seen = {}
    for batch in log:
        if batch.control:
            continue
        for rec in batch.records:
            assert rec.key not in seen, f"key {rec.key!r} survives twice"
            seen[rec.key] = (rec.offset, rec.value)
    return seen


def _model(writes: list[Rec], drop_tombstones: bool) -> dict[bytes, tuple[int, bytes | None]]:
    last = {}
    for rec in writes:
        last[rec.key] = (rec.offset, rec.value)
    return {k: v for k, v in last.items() if not (drop_tombstones and v[1] is None)}


writes_strategy = st.lists(
    st.tuples(st.sampled_from([b"k%d" % i for i in range(12)]),
              st.one_of(st.none(), st.binary(min_size=0, max_size=4))),
    min_size=1, max_size=60)


def _log_of(writes, batch_sizes, gap_every: int = 0) -> tuple[list[Batch], list[Rec]]:
    log, recs, offset, i = [], [], 0, 0
    sizes = iter(batch_sizes)
    while i < len(writes):
        size = max(1, next(sizes, 3))
        chunk = writes[i:i + size]
        records = tuple(Rec(offset + j, k, v) for j, (k, v) in enumerate(chunk))
        log.append(Batch(offset, offset + len(chunk) - 1, records))
        recs.extend(records)
        offset += len(chunk) + (1 if gap_every else 0)
        i += size
    return log, recs


@settings(max_examples=150, deadline=None)
@given(writes=writes_strategy, batch_sizes=st.lists(st.integers(1, 6), max_size=30),
       capacity=st.integers(1, 20), chunk_batches=st.integers(1, 5), gaps=st.booleans())
def test_cleaning_keeps_exactly_the_last_value_of_each_key_at_its_offset(writes, batch_sizes, capacity,
                                                                          chunk_batches, gaps):
    log, recs = _log_of(writes, batch_sizes, gap_every=int(gaps))
    cleaned, _ = clean_fully(log, capacity, now_ms=0, chunk_batches=chunk_batches)
    # Before the delete horizon, tombstones are the last value of their key and stay.
    assert _survivors(cleaned) == _model(recs, drop_tombstones=False)
    # Batches keep their base and last offsets; offsets only go up.
    originals = {b.base_offset: b for b in log}
    for batch in cleaned:
        assert originals[batch.base_offset].last_offset == batch.last_offset
    offsets = [r.offset for b in cleaned for r in b.records]
    assert offsets == sorted(offsets)
    # A pass at the horizon drops tombstones; cleaning again changes nothing more.
    after, _ = clean(cleaned, cleaned[-1].last_offset + 1 if cleaned else 0, capacity,
                     now_ms=DELETE_RETENTION_MS)
    assert _survivors(after) == _model(recs, drop_tombstones=True)
    again, _ = clean(after, after[-1].last_offset + 1 if after else 0, capacity, now_ms=10 * DELETE_RETENTION_MS)
    assert _survivors(again) == _survivors(after)


def test_a_tombstone_survives_its_first_cleaning_and_goes_after_the_horizon():
    log = [Batch(0, 1, (Rec(0, b"a", b"1"), Rec(1, b"a", None)))]
    once, _ = clean(log, 0, 10, now_ms=500)
    assert once[0].records == (Rec(1, b"a", None),) and once[0].delete_horizon_ms == 500 + DELETE_RETENTION_MS
    early, _ = clean(once, 2, 10, now_ms=500 + DELETE_RETENTION_MS - 1)
    assert early[0].records == (Rec(1, b"a", None),)
    late, _ = clean(once, 2, 10, now_ms=500 + DELETE_RETENTION_MS)
    assert late == []


def test_the_last_batch_of_a_producer_stays_as_an_empty_batch():
    log = [Batch(0, 1, (Rec(0, b"a", b"1"), Rec(1, b"b", b"1")), producer_id=7),
           Batch(2, 3, (Rec(2, b"a", b"2"), Rec(3, b"b", b"2")))]
    log.append(Batch(4, 5, (Rec(4, b"a", b"3"), Rec(5, b"b", b"3")), producer_id=9))
    log[1] = replace(log[1], producer_id=7)
    cleaned, _ = clean(log, 0, 10, now_ms=0)
    assert [(b.base_offset, b.last_offset, b.producer_id, b.records) for b in cleaned] == [
        (2, 3, 7, ()),  # all its records superseded, kept empty: producer 7's sequence survives
        (4, 5, 9, (Rec(4, b"a", b"3"), Rec(5, b"b", b"3"))),
    ]


def test_aborted_transactions_are_removed_and_their_marker_goes_after_the_horizon():
    log = [Batch(0, 0, (Rec(0, b"a", b"committed"),), producer_id=1, transactional=True),
           Batch(1, 1, (), producer_id=1, transactional=True, control=True),  # commit
           Batch(2, 2, (Rec(2, b"b", b"aborted"),), producer_id=2, transactional=True),
           Batch(3, 3, (), producer_id=2, transactional=True, control=True),  # abort
           Batch(4, 4, (Rec(4, b"c", b"plain"),))]
    aborted = [AbortedTxn(producer_id=2, first_offset=2, last_offset=3)]
    last = {1: 1, 2: 99}  # producer 2 wrote later elsewhere: its batches here are not its last
    once, _ = clean(log, 0, 10, now_ms=0, aborted=aborted, producer_last=last)
    assert _survivors(once) == {b"a": (0, b"committed"), b"c": (4, b"plain")}
    markers = {b.base_offset: b for b in once if b.control}
    assert markers[1].delete_horizon_ms == NO_HORIZON  # its transaction's data remains
    assert markers[3].delete_horizon_ms == DELETE_RETENTION_MS  # empty transaction: stamped
    later, _ = clean(once, 5, 10, now_ms=DELETE_RETENTION_MS, aborted=aborted, producer_last=last)
    assert [b.base_offset for b in later if b.control] == [1]


def test_records_with_null_keys_are_dropped():
    log = [Batch(0, 1, (Rec(0, None, b"x"), Rec(1, b"k", b"y")))]
    cleaned, _ = clean(log, 0, 10, now_ms=0)
    assert _survivors(cleaned) == {b"k": (1, b"y")}


@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_a_dirty_section_larger_than_the_map_is_cleaned_in_several_passes(capacity):
    writes = [(b"k%d" % (i % 6), b"v%d" % i) for i in range(30)]
    log, recs = _log_of(writes, [4] * 10)
    cleaned, passes = clean_fully(log, capacity, now_ms=0)
    assert passes >= 6 // capacity
    assert _survivors(cleaned) == _model(recs, drop_tombstones=False)


def test_the_io_throttler_sleeps_to_keep_the_rate():
    from broker.log.cleaner.segment_cleaner import Throttler

    clock = [0.0]
    slept = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    throttler = Throttler(1000.0, clock=lambda: clock[0], sleep=sleep)  # 1000 bytes/s
    throttler.note(500)
    assert slept == [0.5]
    clock[0] += 2.0  # time passed elsewhere: no sleep owed
    throttler.note(100)
    assert slept == [0.5]
    unlimited = Throttler(float("inf"), clock=lambda: 0.0, sleep=sleep)
    unlimited.note(10**12)
    assert slept == [0.5]
