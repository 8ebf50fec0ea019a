"""One ``__transaction_state`` partition this broker leads: its transactional ids, the leader
epoch they were loaded at (Kafka's coordinator epoch, stamped on every marker), and the replay of
the partition's records into that state."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.coordinator.txn import records
from broker.coordinator.txn.state import TxnMetadata, TxnState

__all__ = ["Shard", "replay", "transit_value"]


@dataclass
class Shard:
    partition: int
    coordinator_epoch: int
    txns: dict = field(default_factory=dict)  # transactional id -> TxnMetadata


def transit_value(transit) -> bytes | None:
    """The ``__transaction_state`` value of a transition (None: Dead, a tombstone)."""
    if transit.state is TxnState.Dead:
        return None
    return records.encode_value(records.TransactionLogValue(
        producer_id=transit.producer_id,
        previous_producer_id=transit.previous_producer_id,
        next_producer_id=transit.next_producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.timeout_ms,
        transaction_status=int(transit.state),
        # Kafka writes null partitions for Empty (TransactionLog.valueToBytes)
        transaction_partitions=None if transit.state is TxnState.Empty
        else records.partitions_schema(transit.partitions),
        transaction_last_update_timestamp_ms=transit.last_update_ms,
        transaction_start_timestamp_ms=transit.start_ms,
        client_transaction_version=transit.client_transaction_version,
    ))


def replay(partition: int, coordinator_epoch: int, entries) -> Shard:
    """The state a partition's records say: the last value of each transactional id wins, a
    tombstone removes it, keys of unknown versions are skipped (Kafka's loader does the same).
    An undecodable value raises ``records.RecordFormatError``."""
    last: dict[str, object] = {}
    for key, value in entries:
        tid = records.decode_key(key)
        if isinstance(tid, records.UnknownKey):
            continue
        decoded = records.decode_value(value)
        if decoded is None:
            last.pop(tid, None)
        else:
            last[tid] = decoded
    shard = Shard(partition, coordinator_epoch)
    for tid, v in last.items():
        state = TxnState(v.transaction_status)
        partitions = set()
        if state is not TxnState.Empty and v.transaction_partitions:
            partitions = {(p.topic, i) for p in v.transaction_partitions for i in p.partition_ids}
        shard.txns[tid] = TxnMetadata(
            transactional_id=tid, producer_id=v.producer_id, producer_epoch=v.producer_epoch,
            timeout_ms=v.transaction_timeout_ms, state=state,
            previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
            partitions=partitions,
            start_ms=v.transaction_start_timestamp_ms,
            last_update_ms=v.transaction_last_update_timestamp_ms,
            client_transaction_version=v.client_transaction_version)
    return shard
