"""An in-memory disk for simulated brokers: partition logs that can lose their unflushed tail.

``MemoryLog`` has the part of ``broker.log.Log``'s interface that ``broker.replica`` uses
(append as leader or follower, read, truncate, offsets), with the same validation: appends go
through ``broker.log.validation`` (CRC, offsets, sizes), so the batches a simulated broker
stores are byte for byte those a real one would. Each log also keeps its leader epoch cache
(``leader_epochs``), which a real broker keeps in a file next to the log.

Durability: ``flush`` marks everything written so far as durable (the recovery point). A
process crash keeps every byte (the page cache survives: ``crash(lose_unflushed=False)``); a
machine crash (``lose_unflushed=True``) keeps the flushed prefix and a random number of the
batches after it, as a torn write would after recovery truncated its garbage. The epoch cache
is cut to the surviving log end, as ``LeaderEpochCache.load`` does.
"""

from __future__ import annotations

import bisect
from random import Random
from typing import NamedTuple

from broker.log import AppendInfo, FetchData, OffsetOutOfRangeError
from broker.log.validation import prepare_follower_append, prepare_leader_append
from broker.records import DEFAULT_LIMITS
from broker.replica.leader_epoch import LeaderEpochCache

__all__ = ["MemoryLog", "MemoryDisk", "StoredBatch"]

_SEGMENT_BYTES = 1 << 30


class _Config(NamedTuple):
    message_max_bytes: int = 1_048_588
    compact: bool = False  # the simulated topics use cleanup.policy=delete
    log_append_time: bool = False  # and CreateTime, Kafka 4's timestamp bounds
    message_timestamp_before_max_ms: int = (1 << 63) - 1
    message_timestamp_after_max_ms: int = 3_600_000


class StoredBatch(NamedTuple):
    base_offset: int
    last_offset: int
    data: bytes

    @property
    def fingerprint(self) -> tuple[int, int, bytes]:
        return self.base_offset, self.last_offset, self.data[12:]  # from the leader epoch on


class MemoryLog:
    directory = None
    is_offline = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.config = _Config()
        self.batches: list[StoredBatch] = []
        self._bases: list[int] = []
        self._start = 0
        self._end = 0
        self.flushed_batches = 0
        self.truncations = 0  # bumped whenever batches are removed: prefix checks start over
        self.leader_epochs = LeaderEpochCache(None)

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def recovery_point(self) -> int:
        return self.batches[self.flushed_batches - 1].last_offset + 1 if self.flushed_batches else self._start

    # --------------------------------------------------------------------------- append

    def append_as_leader(self, records, leader_epoch: int) -> AppendInfo:
        prepared = prepare_leader_append(memoryview(records), DEFAULT_LIMITS, _SEGMENT_BYTES, self._end,
                                         leader_epoch)
        return self._store(prepared)

    def append_as_follower(self, records) -> AppendInfo:
        prepared = prepare_follower_append(memoryview(records), DEFAULT_LIMITS, _SEGMENT_BYTES, self._end)
        return self._store(prepared)

    def _store(self, prepared) -> AppendInfo:
        if prepared is None:
            return AppendInfo(-1, -1, -1, -1, -1, 0, 0)
        data = b"".join(bytes(b) for b in prepared.buffers)
        position = 0
        for info in prepared.batches:
            self.batches.append(StoredBatch(info.base_offset, info.last_offset,
                                            data[position:position + info.size]))
            self._bases.append(info.base_offset)
            position += info.size
        self._end = prepared.batches[-1].last_offset + 1
        first = prepared.batches[0]
        return AppendInfo(first.base_offset, prepared.batches[-1].last_offset, prepared.max_timestamp,
                          prepared.offset_of_max_timestamp, -1, prepared.size, len(prepared.batches))

    # ----------------------------------------------------------------------------- read

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> FetchData:
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{self._start}, {self._end}] of {self.name}")
        index = max(0, bisect.bisect_right(self._bases, offset) - 1)
        out, size, first, next_offset = [], 0, -1, offset
        for batch in self.batches[index:]:
            if batch.last_offset < offset:
                continue
            if max_offset is not None and batch.base_offset >= max_offset:
                break
            if size + len(batch.data) > max_bytes and not (min_one_batch and not out):
                break
            out.append(batch.data)
            size += len(batch.data)
            first = batch.base_offset if first < 0 else first
            next_offset = batch.last_offset + 1
        return FetchData(b"".join(out), first, next_offset, len(out), self._start, self._end)

    # ------------------------------------------------------------------------- truncate

    def truncate_to(self, offset: int) -> bool:
        if offset >= self._end:
            return False
        keep = bisect.bisect_left([b.last_offset for b in self.batches], offset)
        while keep > 0 and self.batches[keep - 1].last_offset >= offset:
            keep -= 1
        self.truncations += 1
        del self.batches[keep:]
        del self._bases[keep:]
        self._end = self.batches[-1].last_offset + 1 if self.batches else min(offset, self._start)
        self._start = min(self._start, self._end)
        self.flushed_batches = min(self.flushed_batches, len(self.batches))
        return True

    def increment_log_start_offset(self, offset: int) -> bool:
        """As ``Log.increment_log_start_offset``: forward only, never past the end (batches stay
        until retention, which the simulation does not run)."""
        offset = min(offset, self._end)
        if offset <= self._start:
            return False
        self._start = offset
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.truncations += 1
        self.batches.clear()
        self._bases.clear()
        self._start = self._end = offset
        self.flushed_batches = 0

    # ---------------------------------------------------------------------- durability

    def flush(self, offset: int | None = None) -> None:
        self.flushed_batches = len(self.batches)

    def crash(self, rng: Random, lose_unflushed: bool) -> int:
        """What survives a crash; returns the number of batches lost."""
        if not lose_unflushed:
            return 0
        unflushed = len(self.batches) - self.flushed_batches
        survive = rng.randint(0, unflushed)
        lost = unflushed - survive
        if lost:
            self.truncations += 1
            keep = self.flushed_batches + survive
            del self.batches[keep:]
            del self._bases[keep:]
            self._end = self.batches[-1].last_offset + 1 if self.batches else self._start
        self.leader_epochs.truncate_from_end(self._end)
        return lost

    def fingerprints(self, up_to: int) -> list[tuple[int, int, bytes]]:
        """The batches holding offsets below ``up_to``."""
        return [b.fingerprint for b in self.batches if b.base_offset < up_to]


class MemoryDisk:
    """A simulated broker's disk: its partition logs by (topic, partition); the log manager
    interface ``ReplicaManager`` needs."""

    log_dirs: list = []
    offline_log_dirs: set = set()

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], MemoryLog] = {}

    def get_or_create(self, topic: str, partition: int, overrides=None) -> MemoryLog:
        key = (topic, partition)
        if key not in self.logs:
            self.logs[key] = MemoryLog(f"{topic}-{partition}")
        return self.logs[key]

    def get(self, topic: str, partition: int) -> MemoryLog | None:
        return self.logs.get((topic, partition))

    def delete(self, topic: str, partition: int) -> bool:
        return self.logs.pop((topic, partition), None) is not None

    def all_logs(self) -> dict:
        return dict(self.logs)

    def log_dir_of(self, topic: str, partition: int):
        return None

    def checkpoint(self) -> None:
        pass

    def flush_due(self) -> int:
        for log in self.logs.values():
            log.flush()
        return len(self.logs)

    def run_retention(self) -> int:
        return 0

    def close(self) -> None:
        for log in self.logs.values():
            log.flush()

    def crash(self, rng: Random, lose_unflushed: bool) -> int:
        return sum(log.crash(rng, lose_unflushed) for _, log in sorted(self.logs.items()))
