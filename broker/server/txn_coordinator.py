"""``TxnCoordinatorService``: the asyncio shell around the pure ``TxnCoordinatorCore``.

The core (``broker.coordinator.txn.core``) decides everything about transactional ids; this shell
does its I/O, the way ``broker.server.group_coordinator`` serves the group core:

- **Requests.** A handler calls ``await handle(api_key, version, request)``. The request gets a
  token and a future; the core answers it with a ``Reply`` effect, now or later (a state change
  answers once its write is replicated; InitProducerId also waits for a producer id).
- **Leadership.** ``ReplicaManager``'s leadership listener: a ``__transaction_state`` partition
  led here is ``begin_load``-ed at once with its leader epoch as the coordinator epoch (Kafka's
  ``coordinatorEpoch``, which partition leaders use to fence markers of a deposed coordinator),
  then a load task waits until the high watermark reaches the log end it found (nothing read can
  be truncated away), reads and decodes the partition and hands every (key, value) to
  ``core.load_partition`` (which resumes the Prepare* transactions with ``WriteMarkers``). A new
  leader epoch of a leadership kept is a new coordinator epoch: unload and load again (Kafka
  reloads on every election). Leadership lost: load cancelled, ``core.unload_partition``.
- **Appends.** ``Append`` becomes one uncompressed batch appended with acks=all through
  ``Partition.append_as_coordinator`` (the topic's ``min.insync.replicas`` is
  ``transaction.state.log.min.isr``: below it the append fails NOT_ENOUGH_REPLICAS); each waits
  until the high watermark passes it, for at most ``append_timeout_ms``, then
  ``core.write_done``. Writes of one partition complete in append order.
- **Producer ids.** ``AllocateProducerId`` takes the next id of the broker's ZooKeeper block
  (``ProducerIdManager``) in a task; a failure answers -1 (the core replies
  COORDINATOR_NOT_AVAILABLE, which clients retry).
- **Markers.** ``WriteMarkers`` goes to the ``MarkerSender`` (``broker.server.txn_markers``):
  grouped per destination broker, in-process to this broker's own partitions, retried per
  partition until written; then ``core.markers_written``.
- **Timer.** One task sleeps until ``core.next_deadline()`` and calls ``core.tick``.
  The timer, the load's wait/read/decode (with its retry of a failed read) are
  ``broker.server.coordinator_runtime``'s, shared with the group coordinator.
- **Verification (KIP-890 part 1).** ``verify`` answers for transactional ids this broker
  coordinates from the core (in-process, read-only); for others it asks the coordinator with a
  verify-only AddPartitionsToTxn (v4+), which that broker's handler hands to its core.
- **Implicit add (KIP-890 part 2, transaction version 2).** ``add_partitions`` adds a Produce
  v12's (or TxnOffsetCommit v5's) partitions to the producer's transaction: in-process through
  ``handle_settled`` (asked again after each completed write while the previous transaction of
  the id is still completing, instead of answering CONCURRENT_TRANSACTIONS), or with one
  AddPartitionsToTxn v5 to the coordinator broker, whose handler does the same.

Every task belongs to the task group of ``run`` and is cancelled with it; ``close`` unloads every
partition so parked requests are answered NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from broker.cluster.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from broker.coordinator.txn import responses as rsp
from broker.coordinator.txn.core import Append, AllocateProducerId, Reply, WriteMarkers, partition_for
from broker.records import Record, encode_batch
from broker.server.coordinator_runtime import (
    DeadlineTimer, LoadRetry, decode_chunks, read_chunks, read_for_load, wait_for_partition,
)
from broker.server.txn_markers import MarkerJob, MarkerSender
from broker.server.txn_verify import ADD_VERSION, add_request, partition_codes
from broker.wire import ApiKey, ErrorCode

__all__ = ["TxnCoordinatorService", "TxnServiceSettings", "TxnServiceStatistics"]

logger = logging.getLogger(__name__)

TOPIC = TRANSACTION_STATE_TOPIC_NAME
ADD_PARTITIONS_TO_TXN = ApiKey.ADD_PARTITIONS_TO_TXN
# How long an implicit add (transaction version 2) waits at the coordinator for the previous
# transaction of its id to complete before CONCURRENT_TRANSACTIONS goes back (handle_settled).
IMPLICIT_ADD_WAIT_MAX_MS = 1_000


def _names_concurrent(response) -> bool:
    """An AddPartitionsToTxn v4+ answer with CONCURRENT_TRANSACTIONS for some partition."""
    return any(p.partition_error_code == ErrorCode.CONCURRENT_TRANSACTIONS
               for result in response.results_by_transaction for t in result.topic_results
               for p in t.results_by_partition)


@dataclass(frozen=True)
class TxnServiceSettings:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    append_timeout_ms: int = 30_000  # Kafka: the coordinator's appends wait request.timeout.ms
    load_buffer_bytes: int = 5 * 1024 * 1024  # transaction.state.log.load.buffer.size
    load_wait_poll_ms: int = 100


@dataclass
class TxnServiceStatistics:
    requests: int = 0
    appends: int = 0
    append_errors: int = 0
    loads: int = 0
    records_loaded: int = 0
    marker_jobs: int = 0
    loaded: dict = field(default_factory=dict)  # partition -> coordinator epoch
    loading: set = field(default_factory=set)


class _Write:
    __slots__ = ("partition", "write_id", "required_offset", "leader_term", "deadline_ms")

    def __init__(self, partition, write_id, required_offset, leader_term, deadline_ms) -> None:
        self.partition = partition
        self.write_id = write_id
        self.required_offset = required_offset
        self.leader_term = leader_term
        self.deadline_ms = deadline_ms


class TxnCoordinatorService:
    def __init__(self, core, replicas, settings: TxnServiceSettings, now_ms: Callable[[], int],
                 next_producer_id: Callable[[], Awaitable[int]], markers: MarkerSender | None = None,
                 remote_verify: Callable[..., Awaitable[int]] | None = None) -> None:
        """``markers``: the marker sender (``run`` runs it, reporting to ``markers_written``);
        ``remote_verify(transactional_id, ...)``: asks the
        coordinator broker of an id this broker does not coordinate."""
        self.core = core
        self._replicas = replicas
        self._settings = settings
        self._now_ms = now_ms
        self._next_producer_id = next_producer_id
        self.markers = markers
        self._remote_verify = remote_verify
        self._tokens: dict[int, asyncio.Future] = {}
        self._next_token = 0
        self._led: dict[int, int] = {}  # partition -> coordinator epoch (loading or loaded)
        self._loading: dict[int, asyncio.Task | None] = {}
        self._writes: dict[int, deque[_Write]] = {}
        self._group: asyncio.TaskGroup | None = None
        self._timer = DeadlineTimer(core.next_deadline, now_ms, self._tick)
        self._closed = False
        self._before_run: list = []
        self.stats = TxnServiceStatistics()
        self._written = asyncio.Event()  # set (and replaced) whenever a state write completes
        self._adds_waiting: dict[tuple, list] = {}  # (id, producer id, epoch) -> [(partitions, future)]

    # ----------------------------------------------------------------------------- requests

    async def handle(self, api_key: int, api_version: int, request):
        """The response to one transaction request (see the module doc)."""
        token = self._next_token
        self._next_token += 1
        future = self._tokens[token] = asyncio.get_running_loop().create_future()
        self.stats.requests += 1
        try:
            effects = self.core.handle(token, api_key, api_version, request, self._now_ms())
        except BaseException:
            self._tokens.pop(token, None)
            raise
        self._apply(effects)
        return await future

    async def handle_settled(self, api_key: int, api_version: int, request, wait_ms: int = IMPLICIT_ADD_WAIT_MAX_MS):
        """``handle`` for a request that would rather wait than be answered
        CONCURRENT_TRANSACTIONS: another leader's implicit adds (each transaction of the request)
        go through ``_settled_add`` (asked together with the adds of the same transaction
        waiting here), anything else through ``_handle_settled``."""
        transactions = getattr(request, "transactions", None)
        if api_key == ADD_PARTITIONS_TO_TXN and transactions and not any(t.verify_only for t in transactions):
            codes = await asyncio.gather(*(self._settled_add(
                txn.transactional_id, txn.producer_id, txn.producer_epoch,
                [(t.name, p) for t in txn.topics for p in t.partitions], wait_ms) for txn in transactions))
            return rsp.add_partitions_v4([(txn.transactional_id, c) for txn, c in zip(transactions, codes)])
        return await self._handle_settled(api_key, api_version, request, wait_ms)

    async def _settled_add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list, wait_ms: int) -> dict:
        """One implicit add (transaction version 2) of ``partitions``; {(topic, partition): error}.

        Every partition leader of a transaction adds its own partitions, and they all arrive
        while the previous transaction of the id is completing: asked one by one after each
        completed write (``_handle_settled``), three leaders cost three serial acks=all state
        writes per transaction. Adds of one producer and epoch that wait at the same time are
        asked together instead: the first waiter asks (and asks again while the answer is
        CONCURRENT_TRANSACTIONS, for up to ``wait_ms``) with the union of every waiter's
        partitions, and each waiter gets its own partitions' codes. Same outcome as adding them
        one by one: the core answers an add with one code for all its partitions (it checks the
        producer and the transaction's state, never a partition), and the Ongoing record written
        holds the union either way."""
        key = (transactional_id, producer_id, producer_epoch)
        answer = asyncio.get_running_loop().create_future()
        waiting = self._adds_waiting.get(key)
        if waiting is not None:  # another add of this transaction is being asked: ride along
            waiting.append((partitions, answer))
            return await answer
        waiting = self._adds_waiting[key] = [(partitions, answer)]
        try:
            await self._ask_adds(key, waiting, wait_ms)
        finally:
            del self._adds_waiting[key]
            for partitions_left, left in waiting:  # only when the asker was cancelled or failed:
                if not left.done():  # the riders' leaders ask again (retriable, as on a timeout)
                    left.set_result({tp: ErrorCode.CONCURRENT_TRANSACTIONS for tp in partitions_left})
        return await answer

    async def _ask_adds(self, key: tuple, waiting: list, wait_ms: int) -> None:
        """Ask the core for every add in ``waiting`` (which riders join meanwhile) until none is left."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait_ms / 1000
        while waiting:
            written = self._written
            asking = sorted({tp for partitions, _ in waiting for tp in partitions})
            taken = len(waiting)
            codes = partition_codes(await self.handle(ADD_PARTITIONS_TO_TXN, ADD_VERSION, add_request(
                *key, asking)), asking)
            remaining = give_up - loop.time()
            if remaining > 0 and ErrorCode.CONCURRENT_TRANSACTIONS in codes.values():
                try:
                    await asyncio.wait_for(written.wait(), remaining)
                except TimeoutError:
                    pass
                continue  # ask again, with whoever joined meanwhile
            for partitions, answer in waiting[:taken]:
                answer.set_result({tp: codes[tp] for tp in partitions})
            del waiting[:taken]

    async def _handle_settled(self, api_key: int, api_version: int, request, wait_ms: int):
        """``handle``, asked again after each completed state write while the answer names
        CONCURRENT_TRANSACTIONS, for up to ``wait_ms``: the implicit add of transaction version 2
        (a partition leader's AddPartitionsToTxn v5, local or from another broker) usually
        arrives while the previous transaction's markers are being written, and would otherwise
        go back to the leader and the client to be retried after a backoff (Kafka's leader
        polls every 20 ms for 100 ms, then the client waits retry.backoff.ms). An add is
        idempotent, so asking again is safe."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait_ms / 1000
        while True:
            written = self._written
            response = await self.handle(api_key, api_version, request)
            remaining = give_up - loop.time()
            if remaining <= 0 or not _names_concurrent(response):
                return response
            try:
                await asyncio.wait_for(written.wait(), remaining)
            except TimeoutError:
                pass

    def coordinates(self, transactional_id: str) -> bool:
        """This broker leads the ``__transaction_state`` partition of ``transactional_id``."""
        return partition_for(transactional_id, self._settings.num_partitions) in self._led

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> int:
        """KIP-890 part 1: may this transactional produce go to (topic, partition)?"""
        if self.coordinates(transactional_id):
            return self.core.verify(transactional_id, producer_id, producer_epoch, topic, partition)
        if self._remote_verify is None:
            return ErrorCode.NOT_COORDINATOR
        return await self._remote_verify(transactional_id, producer_id, producer_epoch, topic, partition)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list) -> dict:
        """KIP-890 part 2 (transaction version 2: a Produce v12 or TxnOffsetCommit v5): add
        ``partitions`` to the producer's transaction, starting one if none is open, as a
        partition leader's AddPartitionsToTxn v5 that is not verify-only (Kafka's
        AddPartitionsToTxnManager); {(topic, partition): error}. In-process when this broker
        coordinates the id, else one request to the coordinator broker."""
        if self.coordinates(transactional_id):
            return await self._settled_add(transactional_id, producer_id, producer_epoch, list(partitions),
                                           IMPLICIT_ADD_WAIT_MAX_MS)
        if self._remote_verify is None:
            return {tp: ErrorCode.NOT_COORDINATOR for tp in partitions}
        codes = await asyncio.gather(*(
            self._remote_verify(transactional_id, producer_id, producer_epoch, topic, partition, add=True)
            for topic, partition in partitions))
        return dict(zip(partitions, codes))

    def _apply(self, effects) -> None:
        for effect in effects:
            if isinstance(effect, Reply):
                future = self._tokens.pop(effect.token, None)
                if future is not None and not future.done():
                    future.set_result(effect.response)
            elif isinstance(effect, Append):
                self._append(effect)
            elif isinstance(effect, AllocateProducerId):
                self._spawn(self._allocate(effect.request_id), f"txn-producer-id-{effect.request_id}")
            else:
                assert isinstance(effect, WriteMarkers), f"unknown effect {effect!r}"
                self._write_markers(effect)
        self._check_deadline()

    async def _allocate(self, request_id: int) -> None:
        try:
            producer_id = await self._next_producer_id()
        except Exception as exc:  # ZooKeeper unreachable: the client retries
            logger.warning("no producer id for a transactional producer: %s", exc)
            producer_id = -1
        self._apply(self.core.producer_id_allocated(request_id, producer_id, self._now_ms()))

    def _write_markers(self, effect: WriteMarkers) -> None:
        self.stats.marker_jobs += 1
        if self.markers is None:
            return  # a context without a sender (unit tests of the requests)
        self.markers.submit(MarkerJob(effect.marker_id, effect.producer_id, effect.producer_epoch,
                                      effect.committed, effect.coordinator_epoch), effect.partitions)

    def markers_written(self, marker_id: int) -> None:
        """Every marker of ``marker_id`` is written (the ``MarkerSender`` calls it: ``run``)."""
        self._apply(self.core.markers_written(marker_id, self._now_ms()))

    # ------------------------------------------------------------------------------ appends

    def _append(self, append: Append) -> None:
        self.stats.appends += 1
        partition = self._replicas.get(TOPIC, append.partition)
        if partition is None or not partition.is_leader:
            self._write_done(append.write_id, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        now = self._now_ms()
        batch = encode_batch([Record(i, now, key, value) for i, (key, value) in enumerate(append.records)],
                             base_offset=0)
        result = partition.append_as_coordinator(memoryview(batch), self._replicas.settings.limits)
        if result.error_code != ErrorCode.NONE:
            logger.warning("%s-%d: coordinator append failed: %s (%s)", TOPIC, append.partition,
                           ErrorCode(result.error_code).name, result.error_message)
            self._write_done(append.write_id, result.error_code)
            return
        write = _Write(partition, append.write_id, result.last_offset + 1, result.leader_term,
                       now + self._settings.append_timeout_ms)
        queue = self._writes.get(append.partition)
        if queue is None:
            done, error = partition.check_enough_replicas_reach_offset(write.required_offset, write.leader_term)
            if done:
                self._write_done(write.write_id, error)
                return
            queue = self._writes[append.partition] = deque()
            self._spawn(self._await_replication(append.partition), f"txn-writes-{append.partition}")
        queue.append(write)

    async def _await_replication(self, index: int) -> None:
        queue = self._writes[index]
        key = (TOPIC, index)
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
                    self._write_done(head.write_id, error)
                    continue
                await self._wait_for(key, (head.deadline_ms - self._now_ms()) / 1000)
        finally:
            del self._writes[index]

    async def _wait_for(self, key, timeout_s: float) -> None:
        await wait_for_partition(self._replicas, key, timeout_s, self._settings.load_wait_poll_ms)

    def _write_done(self, write_id: int, error: int) -> None:
        if error != ErrorCode.NONE:
            self.stats.append_errors += 1
        self._apply(self.core.write_done(write_id, error, self._now_ms()))
        self._written.set()
        self._written = asyncio.Event()

    # --------------------------------------------------------------------------- leadership

    def on_leadership_change(self, topic: str, index: int, is_leader: bool, leader_epoch: int) -> None:
        """``ReplicaManager``'s leadership listener."""
        if topic != TOPIC or self._closed:
            return
        if is_leader:
            if self._led.get(index) == leader_epoch:
                return
            if index in self._led:
                self._unload(index)  # a new coordinator epoch: load again
            self._led[index] = leader_epoch
            self.stats.loading.add(index)
            self.core.begin_load(index, leader_epoch)
            self._loading[index] = None
            self._spawn_load(index)
        elif index in self._led:
            self._unload(index)

    def _unload(self, index: int) -> None:
        self._led.pop(index, None)
        self.stats.loading.discard(index)
        self.stats.loaded.pop(index, None)
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        logger.info("%s-%d: no longer led here (or a new epoch); unloading its transactions", TOPIC, index)
        if self.markers is not None:
            self.markers.drop(self.core.marker_ids(index))
        self._apply(self.core.unload_partition(index))

    def _spawn_load(self, index: int) -> None:
        if self._group is not None:
            self._loading[index] = self._spawn(self._load(index), f"txn-load-{index}")

    async def _load(self, index: int) -> None:
        loaded = await read_for_load(self._replicas, (TOPIC, index), self._read, self._settings.load_wait_poll_ms,
                                     LoadRetry())
        if loaded is None or self._loading.get(index) is not asyncio.current_task():
            return
        target, records = loaded
        del self._loading[index]
        self.stats.loading.discard(index)
        self.stats.loaded[index] = self._led[index]
        self.stats.loads += 1
        self.stats.records_loaded += len(records)
        effects = self.core.load_partition(index, records, self._now_ms())
        resumed = sum(isinstance(e, WriteMarkers) for e in effects)
        logger.info("%s-%d: loaded %d records up to offset %d (coordinator epoch %d); %d prepared "
                    "transactions resumed", TOPIC, index, len(records), target, self._led[index], resumed)
        self._apply(effects)

    async def _read(self, partition, end_offset: int) -> list:
        return await decode_chunks(await read_chunks(partition, end_offset, self._settings.load_buffer_bytes))

    # -------------------------------------------------------------------------------- timer

    def _check_deadline(self) -> None:
        self._timer.deadline_added(self.core.next_deadline())

    def _tick(self) -> None:
        self._apply(self.core.tick(self._now_ms()))

    # ---------------------------------------------------------------------------- lifecycle

    def _spawn(self, coroutine, name: str) -> asyncio.Task | None:
        if self._group is None:
            if self._closed:
                coroutine.close()  # after run(): nothing may outlive the service
            else:
                self._before_run.append((coroutine, name))  # started by run()
            return None
        return self._group.create_task(coroutine, name=name)

    async def run(self) -> None:
        """Serve until cancelled; owns every task of the service (and the marker sender's)."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                if self.markers is not None:
                    group.create_task(self.markers.run(self.markers_written), name="txn-markers")
                queued, self._before_run = self._before_run, []
                for coroutine, name in queued:
                    group.create_task(coroutine, name=name)
                for index in [i for i, task in self._loading.items() if task is None]:
                    self._spawn_load(index)
                await self._timer.run()
            finally:
                self._group = None
                close = getattr(self._remote_verify, "close", None)
                if close is not None:
                    await close()  # the verifier's connections to other coordinators

    def close(self) -> None:
        """Broker shutdown: unload every partition so parked requests are answered now."""
        for index in sorted(self._led):
            self._unload(index)
        if self.markers is not None:
            self.markers.clear()
        self._closed = True

    def statistics(self) -> TxnServiceStatistics:
        return TxnServiceStatistics(**{**vars(self.stats), "loaded": dict(self.stats.loaded),
                                       "loading": set(self.stats.loading)})
