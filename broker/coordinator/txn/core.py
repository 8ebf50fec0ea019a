"""``TxnCoordinatorCore``: the transaction coordinator of one broker, pure and synchronous.

INTERFACE CONTRACT (fixed; the shell in ``broker.server.txn_coordinator`` and the simulation tier
are written against it — change it only together with them; adding is fine):

Inputs
------
* ``handle(token, api_key, api_version, request, now_ms) -> list[Effect]`` — one decoded request of
  InitProducerId (with a transactional id; the shell answers non-transactional ones itself),
  AddPartitionsToTxn (v0-3 client form; v4+ batched/verify-only broker form), AddOffsetsToTxn,
  EndTxn, DescribeTransactions, ListTransactions. ``request`` is the ``broker.wire`` request object
  at ``api_version``. Every token gets exactly one ``Reply``, now or later (InitProducerId waits
  for a producer id and for its write; EndTxn for the Prepare* write; everything that changes
  state waits for its write).
* ``begin_load(partition, coordinator_epoch)`` — this broker now leads ``__transaction_state``
  partition ``partition`` at that leader epoch (Kafka's coordinator epoch); its ids answer
  COORDINATOR_LOAD_IN_PROGRESS (14) until ``load_partition``.
* ``load_partition(partition, records, now_ms) -> list[Effect]`` — every (key, value-or-None) of
  the partition up to its high watermark, in offset order. Transactions found in
  PrepareCommit/PrepareAbort/PrepareEpochFence are resumed (``WriteMarkers`` effects).
* ``unload_partition(partition) -> list[Effect]`` — leadership lost: parked requests are answered
  NOT_COORDINATOR (16), pending writes and marker sends are forgotten (their completions ignored).
* ``write_done(write_id, error_code, now_ms) -> list[Effect]`` — an ``Append`` finished (0 = written
  with acks=all, else the produce error code). The in-memory state changes only now.
* ``producer_id_allocated(request_id, producer_id, now_ms) -> list[Effect]`` — answer to
  ``AllocateProducerId`` (``producer_id`` < 0: allocation failed; the request answers
  COORDINATOR_NOT_AVAILABLE so the client retries).
* ``markers_written(marker_id, now_ms) -> list[Effect]`` — every partition of a ``WriteMarkers``
  has its marker (the shell retries each partition until its leader accepts it, and treats a
  partition that no longer exists as written, as Kafka does). Then the core writes Complete*.
* ``tick(now_ms) -> list[Effect]`` — timers: aborting transactions open longer than their timeout
  (checked every ``abort_timed_out_check_interval_ms``), expiring idle transactional ids.
  ``next_deadline()`` says when the next tick is due (None: no timer).
* ``verify(transactional_id, producer_id, producer_epoch, topic, partition) -> int`` — KIP-890
  part 1: NONE (0) if that partition was added to the producer's ongoing transaction, else
  INVALID_TXN_STATE (48) (or PRODUCER_FENCED / INVALID_PRODUCER_ID_MAPPING / NOT_COORDINATOR /
  COORDINATOR_LOAD_IN_PROGRESS as Kafka answers the verify-only AddPartitionsToTxn). Read-only.

Outputs (effects, in order)
---------------------------
* ``Reply(token, response)`` — send ``response`` (a ``broker.wire`` response object) for ``token``.
* ``Append(write_id, partition, records)`` — append ``records`` (list of (key, value-or-None))
  as one batch to ``__transaction_state`` partition ``partition`` with acks=all, then call
  ``write_done(write_id, ...)``.
* ``AllocateProducerId(request_id)`` — get a new producer id (ZooKeeper block allocator), then call
  ``producer_id_allocated``.
* ``WriteMarkers(marker_id, producer_id, producer_epoch, committed, coordinator_epoch,
  partitions)`` — write a COMMIT (``committed``) or ABORT control batch to each
  (topic, partition) through WriteTxnMarkers to its leader, then call ``markers_written``.

The coordinator of a transactional id is ``partition_for(transactional_id, num_partitions)``
(the group coordinator's function: ``Utils.abs(String.hashCode) % n``).

Additions to the contract (nothing above changed)
-------------------------------------------------
* ``TxnSettings.offsets_num_partitions`` (offsets.topic.num.partitions, default 50): AddOffsetsToTxn
  adds ``("__consumer_offsets", partition_for(group_id, offsets_num_partitions))``.
* ``begin_load`` of a partition that is still loaded (re-elected without ``unload_partition``)
  drops the old state first; the NOT_COORDINATOR replies that owes come out of the next call that
  returns effects, and ``next_deadline()`` is 0 until then (call ``tick``).
* ``load_partition`` raises ``RecordFormatError`` for a value it cannot decode (an unknown value
  version, as Kafka's loader fails); the partition then stays "loading" until ``unload_partition``.
* ``route(transactional_id) -> (shard or None, error)`` and ``shards()`` are read-only views for the
  shell and the simulation.
* A failed Complete* append is retried by the core (a new ``Append`` from ``tick`` after
  ``COMPLETE_RETRY_BACKOFF_MS``; ``next_deadline`` says when) unless it maps to NOT_COORDINATOR,
  as Kafka's marker channel manager does; every other failed append drops the
  pending transition and answers the mapped error (TransactionStateManager.appendTransactionToLog).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from broker.coordinator.group.core import partition_for
from broker.coordinator.txn import apis
from broker.coordinator.txn import responses as rsp
from broker.coordinator.txn.effects import (Append, AllocateProducerId, Effect, Reply, TxnSettings,
                                            WriteMarkers)
from broker.coordinator.txn.records import RecordFormatError, encode_key
from broker.coordinator.txn.shard import Shard, replay, transit_value
from broker.coordinator.txn.state import Transit, TxnMetadata, TxnState

__all__ = ["TxnSettings", "Reply", "Append", "AllocateProducerId", "WriteMarkers", "Effect",
           "TxnCoordinatorCore", "partition_for", "RecordFormatError"]

Done = Callable[[int, int], list]  # (error code, now_ms) -> effects
COMPLETE_RETRY_BACKOFF_MS = 100  # a failed Complete* append is tried again after this long


@dataclass
class _Write:
    shard: Shard
    transactional_id: str
    transit: Transit
    done: Done
    retry_unavailable: bool = False  # the Complete* write: retried on COORDINATOR_NOT_AVAILABLE


@dataclass
class _Parked:
    """An InitProducerId waiting for ``producer_id_allocated`` (or, with ``resume``, another
    request: an EndTxn whose decision rotates the producer id)."""

    shard: Shard
    token: object
    api_version: int
    request: object
    resume: Callable | None = None   # (producer id, now_ms) -> effects
    abandon: Done | None = None      # (error code, now_ms) -> effects


@dataclass
class _Markers:
    shard: Shard
    transactional_id: str
    transit: Transit  # the Complete* to write once every marker is written


class TxnCoordinatorCore:
    def __init__(self, settings: TxnSettings) -> None:
        self.settings = settings
        self._shards: dict[int, Shard] = {}
        self._loading: dict[int, int] = {}   # partition -> coordinator epoch, between begin and load
        self._writes: dict[int, _Write] = {}
        self._tombstones: dict[int, tuple] = {}  # write id -> (shard, [transactional id])
        self._retries: list[tuple] = []  # (due ms, _Write): Complete* appends to try again
        self._parked: dict[int, _Parked] = {}
        self._markers: dict[int, _Markers] = {}
        self._ids = itertools.count(1)
        self._deferred: list[Effect] = []     # replies owed from begin_load (which returns none)
        self._next_abort_check_ms: int | None = None
        self._next_expire_check_ms: int | None = None
        # Decisions carried out here since start, by result: counted when the Prepare* record is
        # written (a retried EndTxn is not counted twice), and aborts the coordinator makes on its
        # own (transaction.timeout.ms ran out; InitProducerId fencing an open transaction) count
        # as aborted. Read by the metrics snapshot (kafka_coordinator_transaction_ended_total).
        self.ended: dict[str, int] = {"committed": 0, "aborted": 0}

    # -- requests -------------------------------------------------------------------------------
    def handle(self, token, api_key: int, api_version: int, request, now_ms: int) -> list[Effect]:
        out = self._take_deferred()
        out += apis.handle(self, token, api_key, api_version, request, now_ms)
        return out

    def route(self, transactional_id: str) -> tuple[Shard | None, int]:
        """The shard of an id, or why there is none (Kafka's getTransactionState)."""
        partition = partition_for(transactional_id, self.settings.num_partitions)
        if partition in self._loading:
            return None, rsp.COORDINATOR_LOAD_IN_PROGRESS
        shard = self._shards.get(partition)
        return (shard, rsp.NONE) if shard is not None else (None, rsp.NOT_COORDINATOR)

    def any_loading(self) -> bool:
        return bool(self._loading)

    def shards(self):
        return self._shards.values()

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               topic: str, partition: int) -> int:
        code = apis.verify_errors(self, transactional_id, producer_id, producer_epoch,
                                  [(topic, partition)])[(topic, partition)]
        # the contract's answer for "not added" (Kafka's AddPartitionsToTxnManager gives older
        # producers INVALID_TXN_STATE for the verify-only answer TRANSACTION_ABORTABLE)
        return rsp.INVALID_TXN_STATE if code == rsp.TRANSACTION_ABORTABLE else code

    # -- what the API handlers ask for ------------------------------------------------------------
    def write(self, shard: Shard, meta: TxnMetadata, transit: Transit, done: Done,
              retry_unavailable: bool = False) -> Append:
        """Append ``transit`` (already prepared: ``meta.pending`` is set); ``done`` runs on the
        outcome, after the state changed (success) or the pending transition was dropped."""
        write_id = next(self._ids)
        self._writes[write_id] = _Write(shard, meta.transactional_id, transit, done, retry_unavailable)
        return Append(write_id, shard.partition,
                      [(encode_key(meta.transactional_id), transit_value(transit))])

    def write_tombstones(self, shard: Shard, metas: list) -> Append:
        """One batch of tombstones for expired ids (each already prepared Dead), as Kafka writes
        the expired ids of a partition together; on success they leave the cache."""
        write_id = next(self._ids)
        self._tombstones[write_id] = (shard, [m.transactional_id for m in metas])
        return Append(write_id, shard.partition, [(encode_key(m.transactional_id), None) for m in metas])

    def allocate(self, shard: Shard, token, api_version: int, request) -> AllocateProducerId:
        request_id = next(self._ids)
        self._parked[request_id] = _Parked(shard, token, api_version, request)
        return AllocateProducerId(request_id)

    def allocate_then(self, shard: Shard, resume: Callable, abandon: Done) -> AllocateProducerId:
        """Get a producer id, then ``resume(producer_id, now_ms)``; ``abandon(code, now_ms)``
        if there is none (COORDINATOR_NOT_AVAILABLE) or the partition is unloaded first."""
        request_id = next(self._ids)
        self._parked[request_id] = _Parked(shard, None, 0, None, resume, abandon)
        return AllocateProducerId(request_id)

    def send_markers(self, shard: Shard, meta: TxnMetadata, now_ms: int) -> list[Effect]:
        """The Prepare* is written: write the markers, then Complete* (pending meanwhile)."""
        transit = meta.prepare_complete(now_ms)
        if not meta.partitions:
            return [self._write_complete(shard, meta, transit)]
        marker_id = next(self._ids)
        self._markers[marker_id] = _Markers(shard, meta.transactional_id, transit)
        return [WriteMarkers(marker_id, meta.producer_id, meta.producer_epoch,
                             meta.state is TxnState.PrepareCommit, shard.coordinator_epoch,
                             tuple(sorted(meta.partitions)))]

    def _write_complete(self, shard: Shard, meta: TxnMetadata, transit: Transit) -> Append:
        return self.write(shard, meta, transit, lambda code, now_ms: [], retry_unavailable=True)

    # -- completions ------------------------------------------------------------------------------
    def write_done(self, write_id: int, error_code: int, now_ms: int) -> list[Effect]:
        out = self._take_deferred()
        if write_id in self._tombstones:
            self._tombstones_done(write_id, error_code)
            return out
        w = self._writes.pop(write_id, None)
        if w is None or self._shards.get(w.shard.partition) is not w.shard:
            return out  # forgotten: the partition was unloaded meanwhile
        meta = w.shard.txns.get(w.transactional_id)
        assert meta is not None and meta.pending is w.transit.state, (meta, w.transit)
        if error_code == rsp.NONE:
            if w.transit.state is TxnState.Dead:
                del w.shard.txns[w.transactional_id]
            else:
                meta.complete(w.transit)
            return out + w.done(rsp.NONE, now_ms)
        code = rsp.append_error(error_code)
        if w.retry_unavailable and code not in (rsp.NOT_COORDINATOR, rsp.COORDINATOR_LOAD_IN_PROGRESS):
            # TransactionMarkerChannelManager retries the completion (the state stays pending),
            # after a backoff so a partition below min.insync.replicas is not hammered
            self._retries.append((now_ms + COMPLETE_RETRY_BACKOFF_MS, w))
            return out
        meta.pending = None
        return out + w.done(code, now_ms)

    def _tombstones_done(self, write_id: int, error_code: int) -> None:
        shard, tids = self._tombstones.pop(write_id)
        if self._shards.get(shard.partition) is not shard:
            return
        for tid in tids:
            meta = shard.txns.get(tid)
            if meta is None or meta.pending is not TxnState.Dead:
                continue
            if error_code == rsp.NONE:
                del shard.txns[tid]
            else:
                meta.pending = None  # expired again at the next check

    def producer_id_allocated(self, request_id: int, producer_id: int, now_ms: int) -> list[Effect]:
        out = self._take_deferred()
        parked = self._parked.pop(request_id, None)
        if parked is None:
            return out  # answered NOT_COORDINATOR at unload
        if parked.resume is not None:
            if producer_id < 0:
                return out + parked.abandon(rsp.COORDINATOR_NOT_AVAILABLE, now_ms)
            return out + parked.resume(producer_id, now_ms)
        if producer_id < 0:
            return out + [Reply(parked.token, rsp.init_producer_id(
                parked.api_version, rsp.COORDINATOR_NOT_AVAILABLE))]
        return out + apis.init_producer_id(self, parked.token, parked.api_version, parked.request,
                                           now_ms, new_producer_id=producer_id)

    def marker_ids(self, partition: int) -> list[int]:
        """The ``WriteMarkers`` still being carried out for transactions of ``partition`` (the
        shell stops sending them when the partition is unloaded: the new coordinator resends)."""
        return [i for i, m in self._markers.items() if m.shard.partition == partition]

    def markers_written(self, marker_id: int, now_ms: int) -> list[Effect]:
        out = self._take_deferred()
        m = self._markers.pop(marker_id, None)
        if m is None or self._shards.get(m.shard.partition) is not m.shard:
            return out
        meta = m.shard.txns.get(m.transactional_id)
        assert meta is not None and meta.pending is m.transit.state, (meta, m.transit)
        return out + [self._write_complete(m.shard, meta, m.transit)]

    # -- partitions -------------------------------------------------------------------------------
    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        if partition in self._shards:  # re-elected without an unload: drop the old state first
            self._deferred += self.unload_partition(partition)
        self._loading[partition] = coordinator_epoch

    def load_partition(self, partition: int, records, now_ms: int) -> list[Effect]:
        out = self._take_deferred()
        shard = replay(partition, self._loading.get(partition, 0), records)  # may raise: still loading
        self._loading.pop(partition, None)
        if partition in self._shards:
            out += self.unload_partition(partition)
        self._shards[partition] = shard
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = now_ms + self.settings.abort_timed_out_check_interval_ms
            self._next_expire_check_ms = now_ms + self.settings.remove_expired_check_interval_ms
        for meta in shard.txns.values():  # resume what the previous coordinator left prepared
            if meta.state.is_prepare:
                out += self.send_markers(shard, meta, now_ms)
        return out

    def unload_partition(self, partition: int) -> list[Effect]:
        self._loading.pop(partition, None)
        shard = self._shards.pop(partition, None)
        out: list[Effect] = []
        if shard is None:
            return out
        for write_id in [i for i, w in self._writes.items() if w.shard is shard]:
            out += self._writes.pop(write_id).done(rsp.NOT_COORDINATOR, 0)
        for request_id in [i for i, p in self._parked.items() if p.shard is shard]:
            p = self._parked.pop(request_id)
            if p.resume is not None:
                out += p.abandon(rsp.NOT_COORDINATOR, 0)
            else:
                out.append(Reply(p.token, rsp.init_producer_id(p.api_version, rsp.NOT_COORDINATOR)))
        for marker_id in [i for i, m in self._markers.items() if m.shard is shard]:
            del self._markers[marker_id]
        for write_id in [i for i, (s, _) in self._tombstones.items() if s is shard]:
            del self._tombstones[write_id]
        self._retries = [(due, w) for due, w in self._retries if w.shard is not shard]
        return out

    # -- timers -----------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Effect]:
        out = self._take_deferred()
        due = [w for t, w in self._retries if t <= now_ms]
        self._retries = [(t, w) for t, w in self._retries if t > now_ms]
        for w in due:
            meta = w.shard.txns.get(w.transactional_id)
            if self._shards.get(w.shard.partition) is w.shard and meta is not None and meta.pending is w.transit.state:
                out.append(self.write(w.shard, meta, w.transit, w.done, True))
        if self._next_abort_check_ms is not None and now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.settings.abort_timed_out_check_interval_ms
            out += apis.abort_timed_out(self, now_ms)
        if self._next_expire_check_ms is not None and now_ms >= self._next_expire_check_ms:
            self._next_expire_check_ms = now_ms + self.settings.remove_expired_check_interval_ms
            out += apis.expire_ids(self, now_ms)
        return out

    def next_deadline(self) -> int | None:
        if self._deferred:
            return 0
        deadlines = [t for t, _ in self._retries]
        if self._next_abort_check_ms is not None:
            deadlines += [self._next_abort_check_ms, self._next_expire_check_ms]
        return min(deadlines) if deadlines else None

    def _take_deferred(self) -> list[Effect]:
        out, self._deferred = self._deferred, []
        return out
