"""``Producer.send_arrow``: a pyarrow table queued as pre-encoded batches (a mixin of
``broker.client.producer.Producer``, whose accumulator, sender and partitioner it uses). pyarrow
and numpy are imported on first use only: a producer that never sends Arrow does not load them.
"""

from __future__ import annotations

from broker.client.delivery import ArrowDeliveries, BatchDelivery
from broker.client.errors import KafkaError, KafkaTimeoutError
from broker.wire import ErrorCode

__all__ = ["ArrowSend"]


class ArrowSend:
    """The Arrow half of ``Producer`` (its state: ``_state``, ``_acc``, ``_sender``, ``_sticky``,
    ``_clock``, ``_compression``, ``_batch_bytes_max``, ``_request_bytes_max``)."""

    def send_arrow(self, topic: str, data, partition: int | str | None = None, key_column: str = "key",
                   value_column: str = "value", headers_column: str | None = None,
                   timestamp_column: str | None = None) -> ArrowDeliveries:
        """Queue every row of a pyarrow ``Table``/``RecordBatch`` as one record.

        ``value_column`` (binary or string) is required; ``key_column`` is used when present.
        The partition of a row is ``partition`` when it is an int, the int column it names when
        it is a str, the table's ``partition`` column when there is one, else murmur2 of the key
        exactly as ``send`` would choose (null keys: the sticky partition); a null in the partition
        column leaves that row to the same choice, and every partition's rows keep table order.
        Rows are encoded per
        partition by ``broker.records.arrow.encode_batches`` into batches of at most
        ``batch_bytes_max`` and queued behind what ``send`` queued before. Blocks while the
        buffer is full (``max_block_ms``); on a timeout the batches already queued stay queued
        and the error says how many rows they hold."""
        from broker.client import arrow_send
        from broker.records.arrow import encode_batches

        self._check_open()
        table = arrow_send.as_table(data)
        num_partitions = self._state.partitions.get(topic) or self._partition_count(topic)
        values = arrow_send.binary_column(table, value_column, "value")
        keys = arrow_send.binary_column(table, key_column, "key") if key_column in table.column_names else None
        headers = table.column(headers_column).combine_chunks() if headers_column else None
        timestamps = table.column(timestamp_column).combine_chunks() if timestamp_column else None
        partitions = self._arrow_partitions(topic, table, partition, keys, num_partitions)
        deliveries = ArrowDeliveries()
        for group in arrow_send.group_rows(partitions, table.num_rows):
            if not 0 <= group.partition < num_partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic!r} has no partition {group.partition} "
                                 f"({num_partitions} partitions)")
            take = (lambda a: a) if group.indices is None else (lambda a: a.take(group.indices))
            encoded = encode_batches(
                take(values), keys=None if keys is None else take(keys),
                timestamps=None if timestamps is None else take(timestamps),
                headers=None if headers is None else take(headers),
                compression=int(self._compression), batch_bytes_max=self._batch_bytes_max,
                now_ms=self._clock.time_ms(), continue_offsets=False)
            for batch in encoded:
                rows = (range(batch.first_row, batch.first_row + batch.record_count) if group.indices is None
                        else group.indices[batch.first_row:batch.first_row + batch.record_count])
                self._queue_encoded(topic, group.partition, batch, rows, deliveries)
        return deliveries

    def _arrow_partitions(self, topic, table, partition, keys, num_partitions):
        import numpy as np
        import pyarrow as pa

        from broker.client import arrow_send

        if isinstance(partition, int):
            return partition
        column = partition if isinstance(partition, str) else (
            "partition" if "partition" in table.column_names else None)
        given = None
        if column is not None:
            given = table.column(column)
            if not pa.types.is_integer(given.type):
                raise TypeError(f"send_arrow: partition column {column!r} must hold integers, not {given.type}")
            if given.null_count == 0:
                return given.to_numpy().astype("int32", copy=False)
        with self._state.lock:
            sticky = self._sticky.partition(topic, num_partitions)
            self._sticky.next_partition(topic, num_partitions)  # KIP-480: the next call moves on
        chosen = sticky if keys is None else arrow_send.key_partitions(keys, num_partitions, sticky)
        if given is None:
            return chosen
        # Some rows name a partition, the others (null) leave it to the partitioner, as in Spark's
        # Kafka sink. Resolving both in one column keeps every partition's rows in table order;
        # sending the two kinds separately would reorder rows that meet in one partition.
        parts = given.fill_null(-1).to_numpy().astype("int32", copy=True)
        nulls = np.asarray(given.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        parts[nulls] = chosen if isinstance(chosen, int) else chosen[nulls]
        return parts

    def _queue_encoded(self, topic: str, partition: int, encoded, rows, deliveries: ArrowDeliveries) -> None:
        if len(encoded.data) > self._request_bytes_max:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"an encoded batch of {len(encoded.data)} bytes is larger than "
                             f"request_bytes_max ({self._request_bytes_max}): a single record is too large")
        delivery = BatchDelivery(rows)
        state = self._state
        with state.cond:
            try:
                self._reserve(len(encoded.data))
            except KafkaTimeoutError as exc:
                queued = deliveries.record_count
                raise KafkaTimeoutError(f"{exc.message}; {queued} row(s) of this send_arrow call were "
                                        f"queued before") from None
            batch = self._acc.append_encoded((topic, partition), encoded.data, encoded.record_count,
                                             delivery, self._clock.monotonic_ms())
            batch.producer = self
            delivery._batch = batch
        deliveries.append(delivery)
        self._sender.help()
