"""Rule-based test of Log against an in-memory model: a list of (base offset, stored batch bytes).

Random appends (record counts, gzip/lz4/none, keys, values, headers), rolls by size and time,
retention by time and bytes, DeleteRecords, follower truncation, clean and unclean reopen, and
reads and timestamp lookups at random offsets, which must answer exactly what the model says.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from broker.log import Log, LogConfig, OffsetOutOfRangeError
from broker.records import Compression, Record, decode_batch, encode_batch, iter_batches

T0 = 1_700_000_000_000


@dataclass(frozen=True)
class ModelBatch:
    base: int
    last: int
    raw: bytes  # exactly as stored: offsets and leader epoch assigned
    records: tuple[Record, ...]  # with absolute offsets


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                   max_size=2)
record_specs = st.lists(
    st.tuples(
        st.integers(-5_000, 5_000),  # timestamp relative to the clock
        st.one_of(st.none(), st.binary(max_size=12)),
        st.one_of(st.none(), st.binary(max_size=150)),
        headers,
    ),
    min_size=1,
    max_size=8,
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pylog-props-"))
        self.directory = self.tmp / "topic-0"
        self.clock = Clock()
        self.config = LogConfig(segment_bytes=2500, segment_ms=60_000, index_interval_bytes=150)
        self.log = Log.open(self.directory, self.config, self.clock)
        self.batches: list[ModelBatch] = []  # what is physically in the log
        self.log_start = 0
        self.log_end = 0

    def teardown(self) -> None:
        self.log.close_handles()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ----------------------------------------------------------------------------- model

    def visible(self) -> list[ModelBatch]:
        return [b for b in self.batches if b.last >= self.log_start]

    def drop_below_first_segment(self) -> None:
        first = self.log.segments[0].base_offset
        assert all(b.base >= first or b.last < first for b in self.batches), "split batch"
        self.batches = [b for b in self.batches if b.base >= first]

    # ----------------------------------------------------------------------------- rules

    @rule(
        specs=record_specs,
        compression=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]),
        epoch=st.integers(0, 1000),
    )
    def append(self, specs, compression, epoch) -> None:
        records = [
            Record(i, self.clock.now + ts, k, v, tuple(h)) for i, (ts, k, v, h) in enumerate(specs)
        ]
        raw = encode_batch(records, compression=compression)
        info = self.log.append_as_leader(raw, epoch)
        assert info.first_offset == self.log_end
        assert info.last_offset == self.log_end + len(records) - 1
        assert info.max_timestamp == max(r.timestamp for r in records)
        stored = struct.pack(">qii", self.log_end, len(raw) - 12, epoch) + raw[16:]
        absolute = tuple(
            Record(self.log_end + r.offset, r.timestamp, r.key, r.value, r.headers) for r in records
        )
        self.batches.append(ModelBatch(self.log_end, info.last_offset, stored, absolute))
        self.log_end = info.last_offset + 1
        self.clock.now += 7

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(advance_ms=st.integers(0, 70_000))
    def tick(self, advance_ms: int) -> None:
        self.clock.now += advance_ms

    @rule(retention_ms=st.sampled_from([-1, 0, 3_000, 60_000]),
          retention_bytes=st.sampled_from([-1, 0, 800, 3_000]))
    def retention(self, retention_ms: int, retention_bytes: int) -> None:
        config = LogConfig(
            segment_bytes=self.config.segment_bytes, segment_ms=self.config.segment_ms,
            index_interval_bytes=self.config.index_interval_bytes,
            retention_ms=retention_ms, retention_bytes=retention_bytes,
        )
        self.log.update_config(config)
        active_before = self.log.active_segment.base_offset
        self.log.delete_old_segments()
        self.log.update_config(self.config)
        assert self.log.active_segment.base_offset == active_before  # never the active segment
        first = self.log.segments[0]
        if len(self.log.segments) > 1 and retention_ms >= 0:
            assert self.clock.now - first.largest_timestamp <= retention_ms
        if retention_bytes >= 0 and len(self.log.segments) > 1:
            assert self.log.size_in_bytes - first.size < retention_bytes
        self.log_start = max(self.log_start, first.base_offset)
        self.drop_below_first_segment()

    @rule(data=st.data())
    def delete_records(self, data) -> None:
        offset = data.draw(st.integers(self.log_start, self.log_end), label="delete before")
        assert self.log.delete_records_before(offset) == max(self.log_start, offset)
        self.log_start = max(self.log_start, offset)
        self.drop_below_first_segment()

    @rule(data=st.data())
    def truncate(self, data) -> None:
        boundaries = [b.base for b in self.batches] + [self.log_end]
        target = data.draw(
            st.one_of(st.sampled_from(boundaries), st.integers(0, self.log_end + 2)), label="to"
        )
        first_base = self.log.segments[0].base_offset
        changed = self.log.truncate_to(target)
        assert changed == (target < self.log_end)
        if not changed:
            return
        if first_base > target:
            self.batches, self.log_start, self.log_end = [], target, target
            return
        self.batches = [b for b in self.batches if b.last < target]
        self.log_end = self.batches[-1].last + 1 if self.batches else first_base
        self.log_start = min(self.log_start, target, self.log_end)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        log_start = self.log.log_start_offset
        if clean:
            self.log.close()
            assert self.log.recovery_point == self.log_end
        else:
            self.log.close_handles()  # a crash: nothing flushed, nothing checkpointed
        self.log = Log.open(
            self.directory, self.config, self.clock,
            recovery_point=self.log.recovery_point, clean_shutdown=clean,
            log_start_offset=log_start,
        )

    @rule(data=st.data())
    def read_random(self, data) -> None:
        offset = data.draw(st.integers(self.log_start - 2, self.log_end + 2), label="offset")
        max_bytes = data.draw(st.integers(0, 2500), label="max_bytes")
        bound = st.integers(min(offset, self.log_end + 1), self.log_end + 1)
        max_offset = data.draw(st.one_of(st.none(), bound), label="max_offset")
        min_one = data.draw(st.booleans(), label="min_one")
        if offset < self.log_start or offset > self.log_end:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(offset, max_bytes, max_offset, min_one)
            return
        got = self.log.read(offset, max_bytes, max_offset, min_one)
        self.check_read(offset, max_bytes, max_offset, min_one, got.records)

    def check_read(self, offset, max_bytes, max_offset, min_one, records: bytes) -> None:
        candidates = [b for b in self.batches if b.last >= offset]
        returned = [records[p : p + h.size] for p, h in iter_batches(records)]
        assert b"".join(returned) == records, "only whole batches"
        count = len(returned)
        assert [b.raw for b in candidates[:count]] == returned
        if count == 0:
            if candidates:
                first = candidates[0]
                assert (max_offset is not None and first.base >= max_offset) or (
                    not min_one and len(first.raw) > max_bytes
                )
            return
        assert count == 1 or len(records) <= max_bytes
        assert max_offset is None or candidates[count - 1].base < max_offset
        if count < len(candidates):  # why did it stop: size, bound, or a segment boundary
            following = candidates[count]
            segment_bases = [s.base_offset for s in self.log.segments]
            assert (
                len(records) + len(following.raw) > max_bytes
                or (max_offset is not None and following.base >= max_offset)
                or any(candidates[0].base < base <= following.base for base in segment_bases)
            )

    @rule()
    def read_everything(self) -> None:
        offset, stored = self.log_start, []
        while offset < self.log_end:
            data = self.log.read(offset, 1 << 20)
            assert data.batches > 0
            stored.append(data.records)
            offset = data.next_offset
        assert b"".join(stored) == b"".join(b.raw for b in self.visible())
        records = [r for raw in stored for p, _ in iter_batches(raw)
                   for r in decode_batch(raw, p).records]
        assert records == [r for b in self.visible() for r in b.records]

    @rule(delta=st.integers(-6_000, 6_000))
    def offset_for_timestamp(self, delta: int) -> None:
        target = self.clock.now + delta
        expected = next(
            ((r.offset, r.timestamp) for b in self.batches for r in b.records
             if r.offset >= self.log_start and r.timestamp >= target),
            None,
        )
        assert self.log.offset_for_timestamp(target) == expected

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_start_offset == self.log_start
        assert self.log.log_end_offset == self.log_end
        assert self.log.recovery_point <= self.log_end
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(set(bases))
        event(f"segments: {min(len(bases), 4)}{'+' if len(bases) >= 4 else ''}")


LogMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_log_matches_model = LogMachine.TestCase
