"""A partition as one broker holds it: its log, its role, and the high watermark.

State (Kafka ``Partition``): ``leader_id``, ``leader_epoch``, ``replicas``, ``isr`` (from the
partition's state znode), ``high_watermark``, and per follower the log end offset it last fetched
from (``replica_log_end_offsets``). The high watermark is the minimum log end offset over the ISR,
the leader's own included; with ISR = {this broker} it is the log end offset, so an append is
committed as soon as it is written. Followers, ISR changes and their ZooKeeper writes come with
the replication issue: they plug into ``record_follower_fetch`` (a follower's fetch offset is its
log end offset) and ``update_state`` (a new leader epoch or ISR), and nothing here changes shape.

The last stable offset equals the high watermark while there are no transactions
(reference section 3): read_committed readers see the same data as read_uncommitted ones.

Appends and reads are synchronous and run on the event loop's thread, one at a time, so the
checks before an append and the append itself are atomic. Whenever the high watermark moves,
``on_high_watermark`` (the owner's hook, the purgatory's ``notify``) is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from broker.cluster.layout import PartitionState
from broker.log import Log, LogError, OffsetOutOfRangeError
from broker.records import BatchHeader, BatchLimits, RecordsError, validate_batch
from broker.records.arrow import check_batches
from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.producer_recovery import take_snapshot
from broker.replica.producer_state import Duplicate, ProducerStateManager, Rejected
from broker.wire import ErrorCode

__all__ = ["Partition", "AppendResult", "ReadResult", "ISOLATION_READ_UNCOMMITTED",
           "ISOLATION_READ_COMMITTED"]

ISOLATION_READ_UNCOMMITTED = 0
ISOLATION_READ_COMMITTED = 1


class AppendResult(NamedTuple):
    """One partition's Produce outcome. ``last_offset`` is -1 unless data was (or had been)
    appended; acks=all waits until the high watermark passes it."""

    error_code: int
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    batch_index: int = -1  # the failing batch (KIP-467 record_errors), -1 when none


class ReadResult(NamedTuple):
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass
class _Role:
    leader_id: int = -1
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    zk_version: int = -1


class Partition:
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
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.key = (topic, partition)
        self.log = log
        self.local_broker_id = local_broker_id
        self.producer_state = producer_state
        self.leader_epochs = leader_epochs
        self._now_ms = now_ms
        self._on_high_watermark = on_high_watermark
        self._role = _Role()
        self.high_watermark = log.log_start_offset
        self.replica_log_end_offsets: dict[int, int] = {}
        self.min_insync_replicas = 1
        self._snapshot_changes = -1

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
    def is_leader(self) -> bool:
        return self._role.leader_id == self.local_broker_id

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark  # no transactions yet (reference section 3)

    def update_state(self, replicas: tuple[int, ...], state: PartitionState, zk_version: int) -> None:
        """Apply the partition's state znode (leader, epoch, ISR). A new leader epoch on the leader
        starts at the log end offset (Kafka ``Partition.makeLeader``)."""
        role = self._role
        if (role.leader_id, role.leader_epoch, role.isr, role.replicas) == (
                state.leader, state.leader_epoch, state.isr, replicas):
            return
        self._role = _Role(state.leader, state.leader_epoch, tuple(replicas), tuple(state.isr), zk_version)
        if self.is_leader:
            self.leader_epochs.assign(state.leader_epoch, self.log.log_end_offset)
            self.replica_log_end_offsets = {
                r: self.replica_log_end_offsets.get(r, -1) for r in replicas if r != self.local_broker_id
            }
        self._maybe_increment_high_watermark()

    def leader_epoch_error(self, current_leader_epoch: int) -> int:
        """KIP-320 fencing of a request that names the epoch it believes current (-1: none)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    # ---------------------------------------------------------------------------- append

    def append_as_leader(self, records: memoryview | None, required_acks: int,
                         limits: BatchLimits) -> AppendResult:
        """Validate, check producer sequences, append, and move the high watermark. Operating
        errors come back as the result's error code; nothing is appended on any error.

        Produce v3+ carries exactly one record batch per partition (Kafka
        ``ProduceRequest.validateRecords``); anything else is INVALID_RECORD."""
        assert self.is_leader, "the replica manager routes produce to leaders only"
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            return AppendResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                error_message=f"ISR {list(self.isr)} is smaller than "
                                              f"min.insync.replicas={self.min_insync_replicas}")
        limits = limits._replace(batch_bytes_max=self.log.config.message_max_bytes)
        records = memoryview(b"") if records is None else records
        try:
            headers = _batch_headers(records, limits)
        except _BadBatch as bad:
            return self._error(bad.error)
        if len(headers) != 1:
            return self._error(Rejected(ErrorCode.INVALID_RECORD,
                                        f"a produce request must carry exactly one record batch "
                                        f"per partition, found {len(headers)}"))
        if headers[0].is_transactional or headers[0].is_control:
            # No transaction coordinator yet, so no partition can be in a transaction.
            return self._error(Rejected(ErrorCode.INVALID_TXN_STATE,
                                        "transactions are not supported by this broker yet"))
        bad_records = _check_records(records, limits)
        if bad_records is not None:
            return self._error(bad_records)
        verdict = self.producer_state.check_append(headers)
        if not isinstance(verdict, (Rejected, Duplicate)):
            return self._append(records, headers, limits)
        corrupt = _first_corrupt_batch(records, limits)
        if corrupt is not None:  # CRC before sequences, as Kafka validates records first
            return self._error(corrupt.error)
        if isinstance(verdict, Duplicate):
            batch = verdict.batch
            return AppendResult(ErrorCode.NONE, batch.first_offset, batch.last_offset, -1,
                                self.log.log_start_offset)
        return self._error(verdict)

    def _append(self, records: memoryview, headers: list[BatchHeader],
                limits: BatchLimits) -> AppendResult:
        try:
            info = self.log.append_as_leader(records, self.leader_epoch)
        except RecordsError as exc:
            corrupt = _first_corrupt_batch(records, limits)
            index = corrupt.index if corrupt is not None else 0
            return self._error(Rejected(exc.kafka_error_code, str(exc), index))
        except LogError as exc:
            return self._error(Rejected(exc.kafka_error_code, str(exc), -1))
        assert info.batches == len(headers), "the log appends exactly the batches we checked"
        self.producer_state.record_append(headers, info.first_offset, self._now_ms())
        self._maybe_increment_high_watermark()
        return AppendResult(ErrorCode.NONE, info.first_offset, info.last_offset,
                            info.log_append_time, self.log.log_start_offset)

    def _error(self, rejected: Rejected) -> AppendResult:
        return AppendResult(rejected.error_code, error_message=rejected.message,
                            batch_index=rejected.batch_index,
                            log_start_offset=self.log.log_start_offset)

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
            return self._read_result(ErrorCode.OFFSET_OUT_OF_RANGE, b"")
        except LogError as exc:
            return ReadResult(exc.kafka_error_code)
        return self._read_result(ErrorCode.NONE, data.records)

    def _read_result(self, error_code: int, records: bytes) -> ReadResult:
        return ReadResult(error_code, self.high_watermark, self.last_stable_offset,
                          self.log.log_start_offset, records)

    # ------------------------------------------------------------------------- followers

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch offset is its log end offset; it may move the high watermark.
        (ISR expansion when it catches up comes with the replication issue.)"""
        if replica_id in self.replica_log_end_offsets:
            self.replica_log_end_offsets[replica_id] = fetch_offset
            self._maybe_increment_high_watermark()

    def _maybe_increment_high_watermark(self) -> None:
        if not self.is_leader:
            return
        ends = [self.log.log_end_offset]
        ends += [self.replica_log_end_offsets.get(r, -1) for r in self.isr if r != self.local_broker_id]
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            self._on_high_watermark(self.key)

    # -------------------------------------------------------------------------- upkeep

    def snapshot_producer_state(self) -> bool:
        """Write a producer-state snapshot if anything changed since the last one."""
        if self.producer_state.changes == self._snapshot_changes or self.log.is_offline:
            return False
        take_snapshot(self.log, self.producer_state)
        self._snapshot_changes = self.producer_state.changes
        return True

    def on_log_start_offset_moved(self) -> None:
        """After retention: a high watermark below the log start offset follows it up."""
        if self.high_watermark < self.log.log_start_offset:
            self.high_watermark = self.log.log_start_offset


class _BadBatch(Exception):
    def __init__(self, error: Rejected, index: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.index = index


def _batch_headers(records: memoryview, limits: BatchLimits) -> list[BatchHeader]:
    """The header of every batch, with every structural check but the CRC (the log's append
    checks that): lengths, the size limit, magic, codec, counts. Raises ``_BadBatch``."""
    headers: list[BatchHeader] = []
    position = index = 0
    while position < len(records):
        try:
            header = validate_batch(records, position, limits, check_crc=False)
        except RecordsError as exc:
            raise _BadBatch(Rejected(exc.kafka_error_code, str(exc), index), index) from None
        headers.append(header)
        position += header.size
        index += 1
    return headers


def _check_records(records: memoryview, limits: BatchLimits) -> Rejected | None:
    """Kafka's ``LogValidator`` step: the CRC, then every record of the batch must decode
    (compressed sections decompress within ``decompressed_bytes_max``, no record overruns its
    batch, no control batch from a client). The CRC only proves the bytes are the producer's;
    without this a batch of garbage with a valid CRC would be stored and fail every consumer."""
    try:
        check_batches(records, limits=limits, check_crc=True)
    except RecordsError as exc:
        return Rejected(exc.kafka_error_code, str(exc), 0)
    return None


def _first_corrupt_batch(records: memoryview, limits: BatchLimits) -> _BadBatch | None:
    """The first batch failing the full check (CRC included), or None: the slow path, taken
    only when something is already wrong, to report the most basic error first."""
    position = index = 0
    while position < len(records):
        try:
            header = validate_batch(records, position, limits, check_crc=True)
        except RecordsError as exc:
            return _BadBatch(Rejected(exc.kafka_error_code, str(exc), index), index)
        position += header.size
        index += 1
    return None
