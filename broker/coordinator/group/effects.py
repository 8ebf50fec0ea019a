"""The effects the core returns (``Reply``, ``Append``) and its settings, in a module of their
own so the core's parts can build them without importing ``core``; ``core`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["GroupSettings", "Reply", "Append", "Effect"]


@dataclass(frozen=True)
class GroupSettings:
    """Kafka's broker configs for groups, with Kafka's defaults."""

    num_partitions: int = 50                         # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3_000          # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6_000              # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000          # group.max.session.timeout.ms
    max_size: int = 2**31 - 1                        # group.max.size
    offset_metadata_max_bytes: int = 4_096           # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3_600_000   # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms


@dataclass(frozen=True)
class Reply:
    token: Any
    response: Any


@dataclass(frozen=True)
class Append:
    write_id: int
    partition: int
    records: list  # list[tuple[bytes, bytes | None]]
    # A transactional batch of this producer (TxnOffsetCommit); -1: a plain coordinator batch.
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False


Effect = Reply | Append
