"""A partition as one broker holds it: its log, its role, the high watermark, and the ISR.

Role (Kafka ``Partition``): ``leader_id``, ``leader_epoch``, ``replicas``, ``isr``, the state
znode's version (``zk_version``) and the epoch of the controller that wrote it, applied from a
LeaderAndIsr request or a ZooKeeper read by ``update_state``, only when it is newer than what the
partition holds: a higher leader epoch, or the same epoch at a higher znode version (the leader's
own ISR writes keep the epoch). A stale state is ignored, so the two paths that deliver states
(controller requests and ZooKeeper reads) can never move a partition back.

As leader (``make_leader``): for each follower the leader tracks its log end offset (its fetch
offset), when it was last caught up, and the leader's log end offset at its previous fetch
(Kafka ``Replica``). ``record_follower_fetch`` updates them, may propose adding the follower to
the ISR (it reached the high watermark and the start of this leader epoch), and moves the high
watermark: the minimum log end offset over the *maximal* ISR (the ISR plus a proposed addition,
so a write in flight never lets the high watermark pass a replica that may already count as in
sync) and over followers caught up within ``replica.lag.time.max.ms`` (Kafka 2.x does the same,
so a replica about to join is not outrun). ``maybe_shrink_isr`` proposes dropping followers not
caught up for ``replica.lag.time.max.ms``. A proposal is an ``IsrChange``: the owner writes it to
ZooKeeper conditionally and reports the outcome with ``complete_isr_change``; only then does the
ISR change, one change at a time (Kafka's ``AlterIsr`` discipline). A conflict (the controller
wrote meanwhile) drops the proposal; the controller's LeaderAndIsr follows.

As follower (``make_follower``): ``append_as_follower`` appends the leader's batches as they are,
learns their leader epochs (epoch cache) and producers (so that a future leader still
deduplicates retries, KIP-98), and takes the leader's high watermark (never past its own log
end, never backwards). ``truncate_to`` cuts a diverged tail found through OffsetForLeaderEpoch
(KIP-101/279) and rebuilds the producer state from the log.

The high watermark only moves up while the partition lives, except that a truncation below it
(possible only after a lost unflushed tail) pulls it down with a warning. ``leader_term`` counts
how often this replica stopped leading: an acks=all produce remembers the term of its append and
fails with NOT_LEADER_OR_FOLLOWER if it changed, even if leadership came back, since the log may
have been truncated and refilled in between.

Appends and reads are synchronous and run on the event loop's thread, one at a time, so the
checks before an append and the append itself are atomic. Whenever the high watermark or the ISR
moves, ``on_high_watermark`` (the owner's hook, the purgatory's ``notify``) is called with
``key``; after a leader append, with ``log_end_key`` (follower fetches wait on that). The
leader's append path (produce, markers, coordinators' batches) is ``PartitionAppend``, the base
class, in ``broker.replica.partition_append``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, NamedTuple

from broker.cluster.layout import PartitionState
from broker.log import Log, LogError, OffsetOutOfRangeError
from broker.log.txn_index import TransactionIndex
from broker.records import BatchLimits, iter_batches
from broker.replica import transactions as txn
from broker.replica.leader_epoch import LeaderEpochCache
# AppendResult is defined with the append path; imported from here too (``__all__``).
from broker.replica.partition_append import AppendResult, PartitionAppend
from broker.replica.producer_recovery import load_producer_state, take_snapshot
from broker.replica.producer_state import ProducerStateManager
from broker.wire import ErrorCode

__all__ = ["Partition", "AppendResult", "ReadResult", "IsrChange", "FollowerState",
           "ISOLATION_READ_UNCOMMITTED", "ISOLATION_READ_COMMITTED", "REPLICA_LAG_TIME_MAX_MS",
           "LOG_END"]

logger = logging.getLogger(__name__)

ISOLATION_READ_UNCOMMITTED = 0
ISOLATION_READ_COMMITTED = 1
REPLICA_LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms
LOG_END = "log-end"  # purgatory key suffix: (topic, partition, LOG_END) wakes on leader appends


class ReadResult(NamedTuple):
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    aborted_transactions: tuple = ()  # read_committed: AbortedTxn entries overlapping the records


class IsrChange(NamedTuple):
    """A leader's proposed ISR, to be written to the state znode if it is still at
    ``expected_version``."""

    topic: str
    partition: int
    state: PartitionState
    expected_version: int


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka ``Replica``); -1 = not known yet."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as the follower's last fetch said (DeleteRecords' low watermark)


@dataclass(frozen=True)
class _Role:
    leader_id: int = -1
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    zk_version: int = -1
    controller_epoch: int = 0


class Partition(PartitionAppend):
    def __init__(
        self,
        topic: str,
        partition: int,
        log: Log,
        local_broker_id: int,
        producer_state: ProducerStateManager,
        leader_epochs: LeaderEpochCache,
        now_ms: Callable[[], int],
        on_high_watermark: Callable[[tuple[str, int]], object],
        replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
        high_watermark: int | None = None,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.log_end_key = (topic, partition, LOG_END)
        self.log = log
        self.local_broker_id = local_broker_id
        self.producer_state = producer_state
        # the aborted-transaction index (rebuilt with the producer state by load_producer_state)
        self.txn_index = txn_index if txn_index is not None else TransactionIndex(log.directory)
        self.leader_epochs = leader_epochs
        self._now_ms = now_ms
        self._on_high_watermark = on_high_watermark
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._role = _Role()
        start, end = log.log_start_offset, log.log_end_offset
        self.high_watermark = start if high_watermark is None else min(max(high_watermark, start), end)
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: IsrChange | None = None
        self.leader_epoch_start_offset = -1
        self.leader_term = 0
        self.min_insync_replicas = 1
        self._snapshot_changes = -1
        self._txn_guards: dict[int, object] = {}  # producer id -> verification guard (KIP-890)
        self._limits_key: tuple | None = None
        self._limits: BatchLimits | None = None

    # ------------------------------------------------------------------------------ role

    @property
    def leader_id(self) -> int:
        return self._role.leader_id

    @property
    def leader_epoch(self) -> int:
        return self._role.leader_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._role.replicas

    @property
    def isr(self) -> tuple[int, ...]:
        return self._role.isr

    @property
    def zk_version(self) -> int:
        return self._role.zk_version

    @property
    def is_leader(self) -> bool:
        return self._role.leader_id == self.local_broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus a proposed addition (a proposed removal still counts as a member)."""
        pending = self.pending_isr
        if pending is None:
            return self._role.isr
        return self._role.isr + tuple(r for r in pending.state.isr if r not in self._role.isr)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest open transaction, high watermark), on leader and
        followers alike (``broker.replica.transactions``)."""
        first_unstable = self.producer_state.first_unstable_offset
        if first_unstable is None or first_unstable > self.high_watermark:
            return self.high_watermark
        return max(first_unstable, self.log.log_start_offset)

    def is_newer(self, state: PartitionState, zk_version: int) -> bool:
        return (state.leader_epoch, zk_version) > (self._role.leader_epoch, self._role.zk_version)

    def update_state(self, replicas: tuple[int, ...], state: PartitionState, zk_version: int) -> bool:
        """Apply a partition state (from LeaderAndIsr or ZooKeeper) if it is newer than ours;
        True when applied."""
        if not self.is_newer(state, zk_version):
            return False
        if state.leader == self.local_broker_id:
            self._make_leader(tuple(replicas), state, zk_version)
        else:
            self._make_follower(tuple(replicas), state, zk_version)
        return True

    def _make_leader(self, replicas: tuple[int, ...], state: PartitionState, zk_version: int) -> None:
        """Kafka ``Partition.makeLeader``: a new epoch starts at the log end offset; follower
        states are kept if this broker led already, else start unknown (caught up now if in
        the ISR, never otherwise)."""
        was_leader, old_epoch = self.is_leader, self._role.leader_epoch
        self._role = _Role(state.leader, state.leader_epoch, replicas, tuple(state.isr), zk_version,
                           state.controller_epoch)
        if state.leader_epoch != old_epoch or not was_leader:
            self.leader_epochs.assign(state.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
        now = self._now_ms()
        old = self.followers if was_leader else {}
        self.followers = {}
        for replica in replicas:
            if replica == self.local_broker_id:
                continue
            kept = old.get(replica)
            self.followers[replica] = kept if kept is not None else FollowerState(
                last_caught_up_ms=now if replica in state.isr else 0,
                last_fetch_leader_log_end_offset=self.log.log_end_offset, last_fetch_ms=now)
        self.pending_isr = None
        self._maybe_increment_high_watermark()

    def _make_follower(self, replicas: tuple[int, ...], state: PartitionState, zk_version: int) -> None:
        if self.is_leader:
            self.leader_term += 1
        self._txn_guards.clear()
        self._role = _Role(state.leader, state.leader_epoch, replicas, tuple(state.isr), zk_version,
                           state.controller_epoch)
        self.followers = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = -1

    def stop_leading(self) -> None:
        """The partition is being removed or stopped: no acks=all wait may complete on it."""
        self.leader_term += 1

    def leader_epoch_error(self, current_leader_epoch: int) -> int:
        """KIP-320 fencing of a request that names the epoch it believes current (-1: none)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    # ------------------------------------------------------------------------------ read

    def read(self, fetch_offset: int, max_bytes: int, isolation_level: int,
             min_one_batch: bool, replica_id: int = -1) -> ReadResult:
        """Whole batches from ``fetch_offset``: consumers up to the high watermark (or the last
        stable offset for read_committed), followers (``replica_id >= 0``) up to the log end."""
        if replica_id >= 0:
            max_offset = None
        elif isolation_level == ISOLATION_READ_COMMITTED:
            max_offset = self.last_stable_offset
        else:
            max_offset = self.high_watermark
        try:
            data = self.log.read(fetch_offset, max_bytes, max_offset, min_one_batch)
        except OffsetOutOfRangeError:
            if replica_id >= 0:  # our followers restart at the log start it carries (replica/fetcher.py)
                return self._read_result(ErrorCode.OFFSET_OUT_OF_RANGE, b"")
            return ReadResult(ErrorCode.OFFSET_OUT_OF_RANGE)  # offsets -1, as Kafka answers consumers
        except LogError as exc:
            return ReadResult(exc.kafka_error_code)
        result = self._read_result(ErrorCode.NONE, data.records)
        if replica_id < 0 and isolation_level == ISOLATION_READ_COMMITTED and data.batches:
            result = result._replace(aborted_transactions=self.aborted_transactions(
                fetch_offset, data.next_offset))
        return result

    def aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> tuple:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset): the
        read_committed consumer drops their batches (Kafka ``addAbortedTransactions``)."""
        if not len(self.txn_index):
            return ()
        self.txn_index.reconcile(txn.segment_bases(self.log), self.log.log_start_offset)
        return tuple(self.txn_index.collect(fetch_offset, upper_bound_offset))

    def _read_result(self, error_code: int, records: bytes) -> ReadResult:
        return ReadResult(error_code, self.high_watermark, self.last_stable_offset,
                          self.log.log_start_offset, records)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= ``epoch``, where it ends)."""
        return self.leader_epochs.end_offset_for(epoch, self.log.log_end_offset)

    # ---------------------------------------------------------------- leader: followers

    def record_follower_fetch(self, replica_id: int, fetch_offset: int,
                              now_ms: int | None = None, log_start_offset: int = -1) -> IsrChange | None:
        """A follower fetched from ``fetch_offset`` (its log end offset) and said its log start
        offset: Kafka ``updateFollowerFetchState`` + ``maybeExpandIsr`` + ``maybeIncrementLeaderHW``.
        Returns an ISR expansion to write, if the follower just caught up."""
        follower = self.followers.get(replica_id) if self.is_leader else None
        if follower is None:
            return None
        if log_start_offset > follower.log_start_offset:
            follower.log_start_offset = log_start_offset
            self._on_high_watermark(self.key)  # DeleteRecords waiters re-check the low watermark
        now = self._now_ms() if now_ms is None else now_ms
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now)
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_leader_log_end_offset = leader_end
        follower.last_fetch_ms = now
        change = self._maybe_expand_isr(replica_id, follower)
        self._maybe_increment_high_watermark()
        return change

    def _maybe_expand_isr(self, replica_id: int, follower: FollowerState) -> IsrChange | None:
        if self.pending_isr is not None or replica_id in self.isr or replica_id not in self.replicas:
            return None
        caught_up = (follower.log_end_offset >= self.high_watermark
                     and follower.log_end_offset >= self.leader_epoch_start_offset)
        if not caught_up:
            return None
        return self._propose_isr(self.isr + (replica_id,))

    def maybe_shrink_isr(self, now_ms: int | None = None) -> IsrChange | None:
        """Propose dropping followers not caught up within ``replica.lag.time.max.ms``."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        now = self._now_ms() if now_ms is None else now_ms
        lagging = []
        for replica in self.isr:
            if replica == self.local_broker_id:
                continue
            follower = self.followers.get(replica)
            if follower is None or now - follower.last_caught_up_ms > self.replica_lag_time_max_ms:
                lagging.append(replica)
        if not lagging:
            return None
        logger.info("%s-%d: shrinking ISR %s: %s lag more than %d ms", self.topic, self.partition,
                    list(self.isr), lagging, self.replica_lag_time_max_ms)
        return self._propose_isr(tuple(r for r in self.isr if r not in lagging))

    def _propose_isr(self, isr: tuple[int, ...]) -> IsrChange:
        role = self._role
        change = IsrChange(self.topic, self.partition,
                           PartitionState(role.leader_id, role.leader_epoch, isr, role.controller_epoch),
                           role.zk_version)
        self.pending_isr = change
        return change

    def complete_isr_change(self, change: IsrChange, new_version: int | None) -> bool:
        """The outcome of writing ``change``: its new znode version, or None when the write
        lost to another writer (or failed). True when the ISR changed."""
        if self.pending_isr is not change:
            return False
        self.pending_isr = None
        role = self._role
        if new_version is None or not self.is_leader or role.leader_epoch != change.state.leader_epoch:
            return False
        self._role = replace(role, isr=tuple(change.state.isr), zk_version=new_version)
        logger.info("%s-%d: ISR %s -> %s", self.topic, self.partition, list(role.isr), list(self.isr))
        self._maybe_increment_high_watermark()
        self._on_high_watermark(self.key)  # acks=all waiters re-check min.insync.replicas
        return True

    def _maybe_increment_high_watermark(self) -> None:
        if not self.is_leader:
            return
        candidate = self.log.log_end_offset
        maximal = self.maximal_isr
        now = None
        for replica, follower in self.followers.items():
            if follower.log_end_offset >= candidate:
                continue
            if replica in maximal:
                candidate = follower.log_end_offset
                continue
            now = self._now_ms() if now is None else now
            if now - follower.last_caught_up_ms <= self.replica_lag_time_max_ms:
                candidate = follower.log_end_offset
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self._on_high_watermark(self.key)

    # ----------------------------------------------------------------------- follower

    def append_as_follower(self, records, leader_high_watermark: int) -> int:
        """Append the leader's batches as they are; returns how many batches. Their epochs go
        to the epoch cache and their producers to the producer state, as on the leader."""
        assert not self.is_leader, "only followers append the leader's batches"
        info = self.log.append_as_follower(records)
        if info.batches:
            for _, header in iter_batches(records):
                self.leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
            txn.record_batches(self.log, self.producer_state, self.txn_index, records, self._now_ms())
        self.update_follower_high_watermark(leader_high_watermark)
        return info.batches

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        candidate = min(leader_high_watermark, self.log.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self._on_high_watermark(self.key)

    def truncate_to(self, offset: int) -> bool:
        """Cut the log at ``offset`` (a follower's diverged tail); rebuild the epoch cache and
        the producer state to match. True if anything was removed.

        Even when no data goes, epoch entries starting at the log end are dropped: they come
        from leaderships that wrote nothing here, and a follower that kept one would name it
        in OffsetForLeaderEpoch forever (a leader that never saw that epoch answers with an
        older one, the truncation point is our log end, and nothing would change)."""
        if offset >= self.log.log_end_offset:
            self.leader_epochs.remove_from(self.log.log_end_offset)
            return False
        logger.info("%s-%d: truncating from %d to %d", self.topic, self.partition,
                    self.log.log_end_offset, offset)
        self.log.truncate_to(offset)
        self.leader_epochs.remove_from(self.log.log_end_offset)
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts above ours: drop everything and continue at ``offset``."""
        logger.info("%s-%d: replacing the log with an empty one at %d", self.topic, self.partition, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.leader_epochs.remove_from(0)
        self._after_truncation()
        self.high_watermark = offset

    def _after_truncation(self) -> None:
        self.producer_state.truncate()
        load_producer_state(self.log, self.producer_state, self._now_ms(), self.txn_index)
        end = self.log.log_end_offset
        if self.high_watermark > end:
            logger.warning("%s-%d: truncation below the high watermark %d (to %d)", self.topic,
                           self.partition, self.high_watermark, end)
            self.high_watermark = max(end, self.log.log_start_offset)

    # -------------------------------------------------------------------------- upkeep

    def snapshot_producer_state(self) -> bool:
        """Write a producer-state snapshot if anything changed since the last one."""
        if self.producer_state.changes == self._snapshot_changes or self.log.is_offline:
            return False
        take_snapshot(self.log, self.producer_state, self.txn_index)
        self._snapshot_changes = self.producer_state.changes
        return True

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader: move the log start offset to ``offset`` (-1: the high
        watermark). Returns the new log start offset (the low watermark); ValueError for an
        offset above the high watermark (OFFSET_OUT_OF_RANGE), as Kafka refuses it."""
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            raise ValueError(f"Cannot increment the log start offset to {offset} of partition "
                             f"{self.topic}-{self.partition} since it is larger than the high watermark "
                             f"{self.high_watermark}")
        self.log.increment_log_start_offset(target)
        self._on_high_watermark(self.log_end_key)  # follower long polls answer: they learn it now
        return self.log.log_start_offset

    @property
    def low_watermark(self) -> int:
        """The lowest log start offset over the leader and the followers in the ISR (Kafka's
        ``lowWatermarkIfLeader`` takes every follower on a live broker; the leader here knows
        the ISR, not liveness): DeleteRecords is answered once it reaches the asked offset.
        A follower that has not said its log start offset yet counts as -1."""
        low = self.log.log_start_offset
        for replica_id in self.isr:
            follower = self.followers.get(replica_id)
            if follower is not None and replica_id != self.local_broker_id:
                low = min(low, follower.log_start_offset)
        return low

    def on_log_start_offset_moved(self) -> None:
        """After retention: a high watermark below the log start offset follows it up."""
        if self.high_watermark < self.log.log_start_offset:
            self.high_watermark = self.log.log_start_offset
