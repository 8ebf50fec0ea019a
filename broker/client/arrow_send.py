"""Arrow rows to partitions, for ``Producer.send_arrow``. Pure, vectorized with numpy.

A table's rows go to partitions the way ``Producer.send`` would send them one by one: an
explicit partition (an int for every row, or a partition column), else Kafka's murmur2 of the
key (``partitioner.partitions_for_keys``, the same function as Java's
``BuiltInPartitioner.partitionForKey``), else, for null keys, the topic's sticky partition.
Rows are then grouped per partition in their original order (a stable sort), so each
partition's records keep the order they had in the table.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from broker.client.partitioner import partitions_for_keys

__all__ = ["as_table", "binary_column", "key_partitions", "group_rows", "PartitionRows"]


def as_table(data) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, not {type(data).__name__}")


def binary_column(table: pa.Table, name: str, what: str) -> pa.Array:
    """Column ``name`` as one contiguous ``binary`` array (string columns are taken as UTF-8).

    Copies nothing when it can: a one-chunk column is that chunk (``combine_chunks`` would copy
    it), and a ``string`` column is viewed as ``binary`` (same buffers; a cast validates and
    rebuilds). On the Spark sink's path every byte of every row passes here, and each copy of a
    1 MiB batch cost ~0.2 ms of the writer's CPU on a busy machine (measured, issue 5)."""
    if name not in table.column_names:
        raise KeyError(f"send_arrow: no {what} column {name!r} (columns: {', '.join(table.column_names)})")
    column = table.column(name)
    if not (pa.types.is_binary(column.type) or pa.types.is_string(column.type)
            or pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)):
        raise TypeError(f"send_arrow: {what} column {name!r} must be binary or string, not {column.type}")
    if isinstance(column, pa.ChunkedArray):
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if pa.types.is_string(column.type):
        return column.view(pa.binary())
    if not pa.types.is_binary(column.type):
        column = column.cast(pa.binary())  # large types: int64 offsets to int32 (Kafka caps a record anyway)
    return column


def key_partitions(keys: pa.Array, num_partitions: int, sticky: int) -> np.ndarray:
    """murmur2 partition of each key; rows with a null key get ``sticky``."""
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32)[keys.offset:keys.offset + len(keys) + 1]
    data_buffer = keys.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    parts = partitions_for_keys(offsets, data, num_partitions)
    if keys.null_count:
        nulls = np.asarray(keys.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        parts[nulls] = sticky
    return parts


class PartitionRows:
    """The rows of one partition: ``indices`` (an int64 array into the table, ascending) or
    None when the partition has every row."""

    __slots__ = ("partition", "indices", "count")

    def __init__(self, partition: int, indices: np.ndarray | None, count: int) -> None:
        self.partition = partition
        self.indices = indices
        self.count = count


def group_rows(partitions: np.ndarray | int, num_rows: int) -> Iterator[PartitionRows]:
    """Rows grouped by partition, each group in table order (partition ids ascending)."""
    if isinstance(partitions, (int, np.integer)):
        yield PartitionRows(int(partitions), None, num_rows)
        return
    if num_rows == 0:
        return
    first = partitions[0]
    if (partitions == first).all():
        yield PartitionRows(int(first), None, num_rows)
        return
    order = np.argsort(partitions, kind="stable")
    sorted_parts = partitions[order]
    bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [num_rows]))
    for start, end in zip(starts.tolist(), ends.tolist()):
        yield PartitionRows(int(sorted_parts[start]), order[start:end], end - start)
