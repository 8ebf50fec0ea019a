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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.coordinator.group.core import partition_for

__all__ = ["TxnSettings", "Reply", "Append", "AllocateProducerId", "WriteMarkers", "Effect",
           "TxnCoordinatorCore", "partition_for"]


@dataclass(frozen=True)
class TxnSettings:
    """Kafka's broker configs for transactions, with Kafka's defaults."""

    num_partitions: int = 50                                    # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000                               # transaction.max.timeout.ms
    abort_timed_out_check_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 7 * 24 * 3_600_000                  # transactional.id.expiration.ms
    remove_expired_check_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms


@dataclass(frozen=True)
class Reply:
    token: Any
    response: Any


@dataclass(frozen=True)
class Append:
    write_id: int
    partition: int
    records: list  # list[tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class AllocateProducerId:
    request_id: int


@dataclass(frozen=True)
class WriteMarkers:
    marker_id: int
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple  # tuple[tuple[str, int], ...]


Effect = Reply | Append | AllocateProducerId | WriteMarkers


class TxnCoordinatorCore:
    def __init__(self, settings: TxnSettings) -> None:
        self.settings = settings

    def handle(self, token, api_key: int, api_version: int, request, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        raise NotImplementedError

    def load_partition(self, partition: int, records, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def unload_partition(self, partition: int) -> list[Effect]:
        raise NotImplementedError

    def write_done(self, write_id: int, error_code: int, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def producer_id_allocated(self, request_id: int, producer_id: int, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def markers_written(self, marker_id: int, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def tick(self, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def next_deadline(self) -> int | None:
        raise NotImplementedError

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               topic: str, partition: int) -> int:
        raise NotImplementedError
