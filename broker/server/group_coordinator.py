"""``GroupCoordinatorService``: the asyncio shell around the pure ``GroupCoordinatorCore``.

The core (``broker.coordinator.group.core``) decides everything about groups and offsets; this
shell does its I/O, the way ``broker.server.controller`` serves ``ControllerCore``:

- **Requests.** A handler calls ``await handle(api_key, version, request, client_id,
  client_host)``. The request gets a token and a future; the core answers it with a ``Reply``
  effect, now (most requests) or later (JoinGroup and SyncGroup park until the rebalance
  completes; commits wait for their append).
- **Leadership.** ``ReplicaManager`` calls ``on_leadership_change`` whenever this broker starts
  or stops leading a partition. For a ``__consumer_offsets`` partition that becomes led here:
  ``core.begin_load`` at once (its groups answer COORDINATOR_LOAD_IN_PROGRESS), then a load task
  waits until the partition's high watermark reaches the log end offset it found (a new leader's
  high watermark trails its log until the followers fetch again; every write acknowledged by the
  previous leader is in this log, and reading only below the high watermark means the state built
  is one that cannot be truncated away), reads the partition from its log start in chunks of
  ``offsets.load.buffer.size`` bytes, decodes the batches (off the event loop when a chunk is
  large; a transactional batch's records and the COMMIT/ABORT markers come as ``(None,
  TxnRecord/TxnMarker)``, other control batches are skipped) and hands every (key, value) to
  ``core.load_partition`` — or, for a partition of ``_SCAN_BYTES_MIN`` or more without
  transactional batches, its bytes scanned into columns on a thread
  (``bulk_load.ScannedRecords``), which the core replays column-wise. A failed read is retried
  with a backoff (``settings.load_retry``) while the partition is led here. The wait, the read
  and the decoding are ``broker.server.coordinator_runtime``'s, shared with the transaction
  coordinator.
  Leadership lost (another leader, or the partition removed from this broker): the load task is
  cancelled and ``core.unload_partition`` answers the parked requests NOT_COORDINATOR. A new
  leader epoch of a leadership kept changes nothing: the log was not truncated in between.
- **Appends.** An ``Append`` effect becomes one uncompressed record batch (producer id -1)
  appended as leader with acks=all through ``Partition.append_as_coordinator``: Produce's path
  (``append_as_leader``) without the checks a client's batch needs and a batch the broker built
  cannot fail (keys, timestamps, sequences: they were half the CPU of a commit). Produce's
  refusal of internal topics is in its handler, so clients stay refused while the coordinator
  writes. Appends happen in effect order: synchronously, except OffsetCommit's, which wait for
  the end of the event-loop iteration so that the commits read in one go (a client pipelines
  several) become one batch per partition (at most ``_COALESCED_BATCH_BYTES_MAX``): an append
  cost ~15 us of a commit's CPU. Each commit still has its own write and its own answer, in
  order; every other core input (any other request, a tick, a load) first appends the queued
  ones, so it sees them as it would have. Each waits until the
  high watermark passes it (the purgatory, as an acks=all Produce), for at most
  ``offsets.commit.timeout.ms``; then ``core.write_done(write_id, error)``: 0, or the produce
  error (NOT_ENOUGH_REPLICAS 19, NOT_ENOUGH_REPLICAS_AFTER_APPEND 20, NOT_LEADER_OR_FOLLOWER 6,
  REQUEST_TIMED_OUT 7, or the append's own). Writes to one partition complete in append order,
  so a later commit of a partition's offset can never be applied before an earlier one.
- **Transactions.** TxnOffsetCommit's Append is a transactional batch of the request's producer
  (never coalesced), appended within ``handle_txn_offset_commit`` with the KIP-890 guard its
  handler got; ``on_transaction_completed`` (WriteTxnMarkers, once the marker is replicated)
  hands the marker to ``core.transaction_completed``.
- **Timers.** One task sleeps until ``core.next_deadline()`` and calls ``core.tick(now_ms)``; it is
  woken early when a core call brings the next deadline forward.

Every task (the timer, the loads, the replication waits) belongs to the task group of ``run``
and is cancelled with it. ``close`` (broker shutdown) unloads every partition first, so parked
JoinGroups and SyncGroups are answered (NOT_COORDINATOR) instead of holding the drain.
Time (``now_ms``) is injected; the core gets the broker's rng for member ids.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from broker.cluster.internal_topics import GROUP_METADATA_TOPIC_NAME
from broker.coordinator.group import bulk_load
from broker.coordinator.group.core import Append, GroupCoordinatorCore, Reply
from broker.records import HEADER_SIZE, LOG_OVERHEAD, Record, encode_batch
from broker.records.header import ATTRIBUTES_OFFSET, CONTROL_MASK, TRANSACTIONAL_MASK
from broker.server.coordinator_runtime import (
    DeadlineTimer, LoadRetry, decode_chunks, decode_records, read_chunks, read_for_load, wait_for_partition,
)
from broker.wire import ErrorCode

__all__ = ["GroupCoordinatorService", "GroupServiceSettings", "GroupServiceStatistics", "decode_records"]

logger = logging.getLogger(__name__)

_OFFSET_COMMIT = 8  # api key
_TXN_OFFSET_COMMIT = 28  # api key
_COALESCED_BATCH_BYTES_MAX = 256 * 1024  # commits' records in one batch (max.message.bytes is 1 MiB)
_SCAN_BYTES_MIN = 1024 * 1024  # a partition this large is replayed column-wise (bulk_load)


@dataclass(frozen=True)
class GroupServiceSettings:
    commit_timeout_ms: int = 5_000  # offsets.commit.timeout.ms
    load_buffer_bytes: int = 5 * 1024 * 1024  # offsets.load.buffer.size
    load_wait_poll_ms: int = 100  # re-check of the high watermark when the purgatory is full
    load_retry: LoadRetry = LoadRetry()  # a failed load read is retried after this backoff
    # Load the takeover's compiled loops (bulk_load) at start, on a thread: their first use in a
    # process costs ~0.3-0.8 s of numba cache loading, which would otherwise come out of the
    # first large takeover's time.
    warm_up_kernels: bool = True


@dataclass
class GroupServiceStatistics:
    requests: int = 0
    appends: int = 0
    append_errors: int = 0
    loads: int = 0
    records_loaded: int = 0
    last_load_ms: int = -1
    loaded: set = field(default_factory=set)  # partitions loaded
    loading: set = field(default_factory=set)
    requests_waiting: int = 0  # requests the core has not answered yet (parked joins, commits)
    writes_waiting: int = 0  # appends waiting for the high watermark


class _Write:
    """An appended batch waiting for the high watermark of the ``partition`` object it went to
    (a partition removed and opened again is another object: the write is lost with the first)."""

    __slots__ = ("partition", "write_id", "required_offset", "leader_term", "deadline_ms")

    def __init__(self, partition, write_id: int, required_offset: int, leader_term: int,
                 deadline_ms: int) -> None:
        self.partition = partition
        self.write_id = write_id
        self.required_offset = required_offset
        self.leader_term = leader_term
        self.deadline_ms = deadline_ms


class GroupCoordinatorService:
    def __init__(self, core: GroupCoordinatorCore, replicas, settings: GroupServiceSettings,
                 now_ms: Callable[[], int]) -> None:
        self.core = core
        self._replicas = replicas
        self._settings = settings
        self._now_ms = now_ms
        self._tokens: dict[int, asyncio.Future] = {}
        self._next_token = 0
        self._loading: dict[int, asyncio.Task | None] = {}  # partition -> its load task (None: queued)
        self._led: set[int] = set()  # offsets partitions this broker leads (loading or loaded)
        self._writes: dict[int, deque[_Write]] = {}  # partition -> writes waiting for replication
        self._group: asyncio.TaskGroup | None = None
        self._timer = DeadlineTimer(core.next_deadline, now_ms, self._tick)
        self._closed = False
        self._queued: dict[int, list[Append]] = {}  # partition -> commits' appends of this iteration
        self._txn_guard: object | None = None  # the KIP-890 guard of the TxnOffsetCommit being handled
        self._flush_handle: asyncio.Handle | None = None
        self.stats = GroupServiceStatistics()

    # ----------------------------------------------------------------------------- requests

    async def handle(self, api_key: int, api_version: int, request, client_id: str | None,
                     client_host: str):
        """The response to one group request (see the module doc)."""
        return await self.submit(api_key, api_version, request, client_id, client_host)

    def submit(self, api_key: int, api_version: int, request, client_id: str | None,
               client_host: str) -> asyncio.Future:
        """``handle`` without a coroutine of its own: the future of the response, which the
        request handlers await directly (a coroutine frame per request, resumed through, was
        a measurable share of an OffsetCommit's broker CPU)."""
        token = self._next_token
        self._next_token += 1
        future = self._tokens[token] = asyncio.get_running_loop().create_future()
        self.stats.requests += 1
        coalesce = api_key == _OFFSET_COMMIT
        if not coalesce:
            self._flush_appends()  # what it reads or writes comes after every earlier commit
        try:
            effects = self.core.handle(token, api_key, api_version, request, client_id or "", client_host,
                                       self._now_ms())
        except BaseException:
            self._tokens.pop(token, None)  # a core bug: the dispatcher closes the connection, logged
            raise
        self._apply(effects, coalesce)
        return future

    async def handle_txn_offset_commit(self, api_version: int, request, client_id: str | None,
                                       client_host: str, txn_guard: object | None):
        """A TxnOffsetCommit whose ``__consumer_offsets`` partition was verified (KIP-890) with
        ``txn_guard`` (``Partition.start_txn_verification``; None: nothing to verify): its
        transactional batch is appended within this call (never coalesced), presenting the guard,
        so a marker of the producer in between refuses it (INVALID_TXN_STATE)."""
        self._txn_guard = txn_guard
        try:
            return await self.handle(_TXN_OFFSET_COMMIT, api_version, request, client_id, client_host)
        finally:
            self._txn_guard = None

    def on_transaction_completed(self, topic: str, index: int, producer_id: int, producer_epoch: int,
                                 committed: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` is replicated in ``__consumer_offsets``
        partition ``index`` (WriteTxnMarkers): its pending transactional offsets are
        materialized or dropped (Kafka's ``GroupCoordinator.onTransactionCompleted``)."""
        if topic != GROUP_METADATA_TOPIC_NAME or self._closed:
            return
        self._flush_appends()
        self._apply(self.core.transaction_completed(index, producer_id, producer_epoch, committed,
                                                    self._now_ms()))

    def _apply(self, effects, coalesce: bool = False) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                future = self._tokens.pop(effect.token)
                if not future.done():  # done: the client went away (its request task was cancelled)
                    future.set_result(effect.response)
            else:
                assert isinstance(effect, Append), f"unknown effect {effect!r}"
                if coalesce:
                    self._queue_append(effect)
                else:
                    self._flush_appends()
                    self._append([effect])
        self._check_deadline()

    # ------------------------------------------------------------------------------ appends

    def _queue_append(self, append: Append) -> None:
        """An OffsetCommit's append, made at the end of this event-loop iteration together with
        the other commits' appends to its partition (see the module doc)."""
        self._queued.setdefault(append.partition, []).append(append)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush_appends)

    def _flush_appends(self) -> None:
        """Append the queued commits now, each partition's as few batches as the size cap allows."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        while self._queued:
            queued, self._queued = self._queued, {}
            for appends in queued.values():
                batch: list = []
                size = 0
                for append in appends:
                    append_size = 0
                    for key, value in append.records:
                        append_size += len(key) + (len(value) if value is not None else 0)
                    if batch and size + append_size > _COALESCED_BATCH_BYTES_MAX:
                        self._append(batch)
                        batch, size = [], 0
                    batch.append(append)
                    size += append_size
                self._append(batch)

    def _append(self, appends: list[Append]) -> None:
        """Appends to one partition as one batch; each completes on its own through the
        partition's write queue, in order (the high watermark passes them in order)."""
        self.stats.appends += len(appends)
        index = appends[0].partition
        partition = self._replicas.get(GROUP_METADATA_TOPIC_NAME, index)
        if partition is None or not partition.is_leader:
            self._writes_done([a.write_id for a in appends], ErrorCode.NOT_LEADER_OR_FOLLOWER, index)
            return
        now = self._now_ms()
        pairs = appends[0].records if len(appends) == 1 else [kv for a in appends for kv in a.records]
        records = [Record(i, now, key, value) for i, (key, value) in enumerate(pairs)]
        if appends[0].transactional:  # TxnOffsetCommit: the producer's batch, sequence -1 as Kafka's
            assert len(appends) == 1, "a transactional append is never merged"
            batch = encode_batch(records, base_offset=0, producer_id=appends[0].producer_id,
                                 producer_epoch=appends[0].producer_epoch, transactional=True)
            result = partition.append_as_coordinator(memoryview(batch), self._replicas.settings.limits,
                                                     txn_guard=self._txn_guard)
        else:
            batch = encode_batch(records, base_offset=0)
            result = partition.append_as_coordinator(memoryview(batch), self._replicas.settings.limits)
        if result.error_code != ErrorCode.NONE:
            logger.warning("%s-%d: coordinator append failed: %s (%s)", GROUP_METADATA_TOPIC_NAME,
                           index, ErrorCode(result.error_code).name, result.error_message)
            self._writes_done([a.write_id for a in appends], result.error_code, index)
            return
        queue = self._writes.get(index)
        if queue is None:
            done, error = partition.check_enough_replicas_reach_offset(result.last_offset + 1, result.leader_term)
            if done:  # replicated already (ISR = this broker): no task
                self._writes_done([a.write_id for a in appends], error, index)
                return
            queue = self._writes[index] = deque()
            self._spawn(self._await_replication(index), f"group-writes-{index}")
        end_offset = result.last_offset + 1 - len(pairs)
        deadline_ms = now + self._settings.commit_timeout_ms
        for append in appends:
            end_offset += len(append.records)
            queue.append(_Write(partition, append.write_id, end_offset, result.leader_term, deadline_ms))

    async def _await_replication(self, index: int) -> None:
        """Complete the partition's writes in append order as its high watermark passes them
        (Kafka's DelayedProduce for the coordinator's appends)."""
        queue = self._writes[index]
        key = (GROUP_METADATA_TOPIC_NAME, index)
        try:
            while queue:
                head = queue[0]
                if self._replicas.get(*key) is not head.partition:
                    done, error = True, ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    done, error = head.partition.check_enough_replicas_reach_offset(head.required_offset,
                                                                                    head.leader_term)
                if not done and self._now_ms() >= head.deadline_ms:
                    done, error = True, ErrorCode.REQUEST_TIMED_OUT
                if done:
                    queue.popleft()
                    self._writes_done([head.write_id], error, index)
                    continue
                await self._wait_for(key, (head.deadline_ms - self._now_ms()) / 1000)
        finally:
            del self._writes[index]

    async def _wait_for(self, key, timeout_s: float) -> None:
        await wait_for_partition(self._replicas, key, timeout_s, self._settings.load_wait_poll_ms)

    def _writes_done(self, write_ids: list[int], error: int, index: int) -> None:
        """Writes of partition ``index`` ended with ``error`` (0: replicated), in order: the
        core's effects (their answers) applied once for all of them."""
        if error != ErrorCode.NONE:
            self.stats.append_errors += len(write_ids)
        now = self._now_ms()
        effects: list = []
        for write_id in write_ids:
            effects += self.core.write_done(write_id, error, now, index)
        self._apply(effects)

    # --------------------------------------------------------------------------- leadership

    def on_leadership_change(self, topic: str, index: int, is_leader: bool, leader_epoch: int) -> None:
        """``ReplicaManager``'s leadership listener."""
        if topic != GROUP_METADATA_TOPIC_NAME or self._closed:
            return
        if is_leader:
            if index in self._led:
                return  # a new epoch of a leadership kept: nothing to reload
            self._led.add(index)
            self.stats.loading.add(index)
            self._flush_appends()
            self.core.begin_load(index)
            self._loading[index] = None
            self._spawn_load(index)
            return
        if index not in self._led:
            return
        self._unload(index)

    def _unload(self, index: int) -> None:
        self._led.discard(index)
        self.stats.loading.discard(index)
        self.stats.loaded.discard(index)
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        logger.info("%s-%d: no longer led here; unloading its groups", GROUP_METADATA_TOPIC_NAME, index)
        self._flush_appends()
        self._apply(self.core.unload_partition(index))

    def _spawn_load(self, index: int) -> None:
        if self._group is not None:
            self._loading[index] = self._spawn(self._load(index), f"group-load-{index}")

    async def _load(self, index: int) -> None:
        """Wait for the high watermark to reach the log end, read, decode, hand to the core;
        a failed read is retried with a backoff (``coordinator_runtime.read_for_load``)."""
        started = self._now_ms()
        loaded = await read_for_load(self._replicas, (GROUP_METADATA_TOPIC_NAME, index), self._read,
                                     self._settings.load_wait_poll_ms, self._settings.load_retry)
        if loaded is None or self._loading.get(index) is not asyncio.current_task():
            return  # no longer led here, or unloaded (and perhaps led again) while reading
        target, records = loaded
        del self._loading[index]
        self.stats.loading.discard(index)
        self.stats.loaded.add(index)
        self.stats.loads += 1
        self.stats.records_loaded += len(records)
        self.stats.last_load_ms = self._now_ms() - started
        logger.info("%s-%d: loaded %d records up to offset %d in %d ms", GROUP_METADATA_TOPIC_NAME,
                    index, len(records), target, self.stats.last_load_ms)
        self._flush_appends()
        self._apply(self.core.load_partition(index, records, self._now_ms()))

    async def _read(self, partition, end_offset: int):
        """Every (key, value) of the partition below ``end_offset``. A large partition's records
        stay in its bytes (``bulk_load.ScannedRecords``: the core replays them column-wise); a
        small one's, or any with a batch the scan does not take (compressed, transactional,
        corrupt), are decoded into pairs (``decode_records``, which raises on a corrupt batch)."""
        chunks = await read_chunks(partition, end_offset, self._settings.load_buffer_bytes)
        if sum(len(chunk) for _, chunk in chunks) >= _SCAN_BYTES_MIN:
            scanned = await asyncio.to_thread(_scan_chunks, chunks, chunks[0][0])
            if scanned is not None:
                return scanned
        return await decode_chunks(chunks)

    # -------------------------------------------------------------------------------- timer

    def _check_deadline(self) -> None:
        self._timer.deadline_added(self.core.added_deadline())

    def _tick(self) -> None:
        self._flush_appends()
        self._apply(self.core.tick(self._now_ms()))

    # ---------------------------------------------------------------------------- lifecycle

    def _spawn(self, coroutine, name: str) -> asyncio.Task:
        assert self._group is not None, "tasks start once run() is running"
        return self._group.create_task(coroutine, name=name)

    async def run(self) -> None:
        """Serve until cancelled; owns every task of the service."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            if self._settings.warm_up_kernels:
                self._spawn(self._warm_up_kernels(), "group-kernels-warm-up")
            try:
                for index in [i for i, task in self._loading.items() if task is None]:
                    self._spawn_load(index)  # leaderships gained before run() started
                await self._timer.run()
            finally:
                self._group = None

    @staticmethod
    async def _warm_up_kernels() -> None:
        try:
            await asyncio.to_thread(warm_up_takeover_kernels)
        except Exception:  # a large load then compiles them itself (or replays record by record)
            logger.exception("loading the coordinator's takeover kernels failed")

    def close(self) -> None:
        """Broker shutdown: unload every partition so parked requests are answered now."""
        for index in sorted(self._led):
            self._unload(index)
        self._closed = True

    def statistics(self) -> GroupServiceStatistics:
        return GroupServiceStatistics(**{**vars(self.stats), "loaded": set(self.stats.loaded),
                                         "loading": set(self.stats.loading),
                                         "requests_waiting": len(self._tokens),
                                         "writes_waiting": sum(map(len, self._writes.values()))})


def _scan_chunks(chunks: list, from_offset: int):
    """The chunks' whole batches as one ``ScannedRecords``, or None (see ``_read``). Each read
    after the first starts at the batch after the last whole one before it: no batch twice."""
    parts = []
    for _, chunk in chunks:
        walked = bulk_load.whole_batches(chunk)
        if walked is None or _has_transactional_batches(chunk, walked):
            return None
        parts.append(memoryview(chunk)[:walked])
    return bulk_load.scan(b"".join(parts), from_offset)


def _has_transactional_batches(chunk, size: int) -> bool:
    """Whether the first ``size`` bytes (whole batches) hold a transactional or control batch:
    those partitions replay record by record (``bulk_load`` takes plain batches only)."""
    position = 0
    while position + HEADER_SIZE <= size:
        batch_length, = struct.unpack_from(">i", chunk, position + 8)
        if struct.unpack_from(">h", chunk, position + ATTRIBUTES_OFFSET)[0] & (TRANSACTIONAL_MASK | CONTROL_MASK):
            return True
        position += batch_length + LOG_OVERHEAD
    return False


def warm_up_takeover_kernels() -> None:
    """Compile the takeover's loops (``bulk_load``) into numba's on-disk cache (``make setup``;
    the broker also loads them on a thread at start), through this shell's own path so the
    argument types (read-only bytes, strided columns) are the ones a takeover looks up: a first
    takeover would otherwise spend seconds compiling. It lives here, not in ``bulk_load``, because
    the pure core may not import the shell or the record codec."""
    from broker.coordinator.group.records import encode_offset_commit_key, encode_offset_commit_value_v3

    batch = encode_batch([Record(0, 0, encode_offset_commit_key("g", "t", 0),
                                 encode_offset_commit_value_v3(1, -1, "m", 0))], base_offset=0)
    scanned = _scan_chunks([(0, batch)], 0)
    assert scanned is not None and bulk_load.replay(scanned, {}, tuple, lambda key, value: None)


if __name__ == "__main__":  # make setup
    warm_up_takeover_kernels()
