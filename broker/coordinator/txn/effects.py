"""The effects the core returns and its settings, in a module of their own so the core's parts
can build them without importing ``core``; ``core`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TxnSettings", "Reply", "Append", "AllocateProducerId", "WriteMarkers", "Effect"]


@dataclass(frozen=True)
class TxnSettings:
    """Kafka's broker configs for transactions, with Kafka's defaults."""

    num_partitions: int = 50                                    # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000                               # transaction.max.timeout.ms
    abort_timed_out_check_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 7 * 24 * 3_600_000                  # transactional.id.expiration.ms
    remove_expired_check_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    offsets_num_partitions: int = 50  # offsets.topic.num.partitions: AddOffsetsToTxn's partition


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
