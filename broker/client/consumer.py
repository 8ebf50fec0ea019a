"""``Consumer``: a consumer of manually assigned partitions (``assign``) or a member of a
consumer group (``subscribe`` with ``group_id``), returning records (``poll``) or Arrow
(``poll_arrow``).

Groups (classic protocol, Java ``ConsumerCoordinator``): this module is only the glue. Membership
(lookup, join, sync, heartbeat thread, leave) is ``group_membership``; what the member sends and
how the leader assigns is ``group_consumer`` with ``assignors``; commits and committed offsets
are ``group_commit``. ``poll`` drives it: it restarts the ``max.poll.interval.ms`` timer, rejoins
when the group rebalances (running the rebalance listener on this thread), auto-commits every
``auto.commit.interval.ms`` (the positions of records returned by earlier polls: at-least-once),
and starts each newly assigned partition at its committed offset (``auto_offset_reset`` where
the group has none).

Threading model: none of its own. The owner thread drives everything from ``poll``/
``poll_arrow`` (Java's consumer model); the ``Fetcher`` keeps one Fetch per leader in flight
and sends the next one for a partition as soon as the previous answer is in, before it is
decoded (see ``fetcher``), so the broker reads ahead while the client decodes. Not thread-safe.

Positions are per partition: the offset of the next record to return. Fetched data is kept raw
(bounded by ``fetch_buffer_bytes_max``) until a poll takes it; ``poll`` decodes it into
``ConsumerRecord``s (``fetched.decode_fetched``), ``poll_arrow`` into one ``pa.RecordBatch`` per
partition chunk in Spark's Kafka schema (``broker.records.arrow.decode_batches``). What a poll
does not return (``max_records``) stays decoded for the next poll.

Per-partition errors (Java ``Fetcher``): OFFSET_OUT_OF_RANGE resets the position by
``auto_offset_reset`` ("earliest", "latest", or "none": raise); NOT_LEADER_OR_FOLLOWER and the
other metadata errors refresh metadata and the partition is fetched again from its new leader;
anything else raises a ``KafkaError`` naming the partition. A partition without a position
(just assigned) gets one from ``auto_offset_reset`` before its first fetch.

read_committed (reference section 3): the broker answers data below the last stable offset and
the aborted transactions in that range; batches of aborted transactions are dropped with
``fetched.AbortedTransactionFilter`` (control batches are never returned; their offsets are
consumed). Fetch versions 4-12, no fetch sessions (every fetch is a full fetch).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Iterable, Mapping

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.errors import KafkaError
from broker.client.fetched import ConsumerRecord, aborted_batch_offsets, decode_fetched
from broker.client.fetcher import CompletedFetch, Fetcher
from broker.client.group_commit import CommitCallback, OffsetAndMetadata
from broker.client.group_consumer import ConsumerGroup, RebalanceListener
from broker.client.group_membership import GroupSettings
from broker.client.metadata import Cluster
from broker.client.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    isolation_level_code,
    list_offsets,
)
from broker.client.properties import consumer_options_from_properties
from broker.wire import ErrorCode

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndMetadata", "AUTO_OFFSET_RESET",
           "consumer_options_from_properties"]

AUTO_OFFSET_RESET = ("earliest", "latest", "none")
CONSUMER_INFLIGHT_REQUESTS_MAX = 100  # Kafka ConsumerUtils.CONSUMER_MAX_INFLIGHT_REQUESTS_PER_CONNECTION

TopicPartition = tuple[str, int]


class _Ready:
    """Decoded data of one partition not yet returned: records or an Arrow batch, and where
    the partition's position goes once all of it is taken."""

    __slots__ = ("records", "arrow", "next_offset")

    def __init__(self, records, arrow, next_offset: int) -> None:
        self.records = records  # deque[ConsumerRecord] | None
        self.arrow = arrow  # pa.RecordBatch | None
        self.next_offset = next_offset


class Consumer:
    """Not thread-safe: one owner. ``close()`` (or ``with``) closes connections."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        isolation_level: str = "read_uncommitted",
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        fetch_buffer_bytes_max: int | None = None,
        check_crcs: bool = True,
        include_headers: bool = False,
        request_timeout_ms: int | None = None,
        client_id: str | None = None,
        config: ClientConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        cluster: Cluster | None = None,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        partition_assignment_strategy: str | list[str] = "range,cooperative-sticky",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        default_api_timeout_ms: int = 60_000,
    ) -> None:
        self._isolation = isolation_level_code(isolation_level)
        if auto_offset_reset not in AUTO_OFFSET_RESET:
            raise ValueError(f"invalid auto_offset_reset {auto_offset_reset!r}: use earliest, latest or none")
        for name, value in (("fetch_max_wait_ms", fetch_max_wait_ms), ("fetch_min_bytes", fetch_min_bytes),
                            ("fetch_max_bytes", fetch_max_bytes),
                            ("max_partition_fetch_bytes", max_partition_fetch_bytes)):
            if value < 0 or (value == 0 and name != "fetch_max_wait_ms" and name != "fetch_min_bytes"):
                raise ValueError(f"{name} must be positive, got {value}")
        if fetch_buffer_bytes_max is None:
            fetch_buffer_bytes_max = 2 * max(max_partition_fetch_bytes, min(fetch_max_bytes, 8 << 20))
        if fetch_buffer_bytes_max <= 0:
            raise ValueError(f"fetch_buffer_bytes_max must be positive, got {fetch_buffer_bytes_max}")
        # Kafka's consumer allows 100 requests in flight per connection whatever the config
        # (ConsumerUtils.CONSUMER_MAX_INFLIGHT_REQUESTS_PER_CONNECTION): commit_async pipelines
        # that deep before it waits for the oldest answer.
        config = config or ClientConfig(inflight_requests_max=CONSUMER_INFLIGHT_REQUESTS_MAX)
        if request_timeout_ms is not None:
            config = config.with_(request_timeout_ms=request_timeout_ms)
        if client_id is not None:
            config = config.with_(client_id=client_id)
        self._cluster = cluster or Cluster(bootstrap_servers, config, clock)
        self._config = self._cluster.config
        self._clock = self._cluster.clock
        self._auto_offset_reset = auto_offset_reset
        self._check_crcs = check_crcs
        self._include_headers = include_headers
        self._fetcher = Fetcher(self._cluster, isolation_level=self._isolation,
                                fetch_max_wait_ms=fetch_max_wait_ms, fetch_min_bytes=fetch_min_bytes,
                                fetch_max_bytes=fetch_max_bytes,
                                partition_fetch_bytes=max_partition_fetch_bytes,
                                fetch_buffer_bytes_max=fetch_buffer_bytes_max)
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int | None] = {}
        self._ready: dict[TopicPartition, _Ready] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._last_stable_offsets: dict[TopicPartition, int] = {}
        self._closed = False
        if default_api_timeout_ms <= 0:
            raise ValueError(f"default_api_timeout_ms must be positive, got {default_api_timeout_ms}")
        self._default_api_timeout_ms = default_api_timeout_ms
        self._subscribed = False
        self._group: ConsumerGroup | None = None
        if group_id is not None:
            settings = GroupSettings(group_id, group_instance_id, session_timeout_ms, heartbeat_interval_ms,
                                     max_poll_interval_ms)
            self._group = ConsumerGroup(self, settings, partition_assignment_strategy, enable_auto_commit,
                                        auto_commit_interval_ms)

    @property
    def read_committed(self) -> bool:
        return self._isolation == 1

    def statistics(self) -> dict:
        stats = dict(self._fetcher.stats, fetch_buffer_bytes=self._fetcher.buffered_bytes,
                     fetch_buffer_bytes_max=self._fetcher.buffer_bytes_max,
                     fetches_in_flight=self._fetcher.inflight_count)
        if self._group is not None:
            stats.update(self._group.membership.stats, **self._group.offsets.stats,
                         async_commits_in_flight=self._group.offsets.async_in_flight)
        return stats

    # ------------------------------------------------------------------ assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment. Positions of partitions kept are kept; new ones start unset
        (the group's committed offset with ``group_id``, else ``auto_offset_reset``, on first
        use). Unknown topics or partitions raise. Not while subscribed (Java neither)."""
        if self._subscribed:
            raise ValueError("assign() while subscribed: unsubscribe() first")
        wanted = list(dict.fromkeys((str(t), int(p)) for t, p in partitions))
        for topic, partition in wanted:
            if partition not in self._cluster.topic(topic).partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic!r} has no partition {partition}")
        self._set_assignment(wanted)

    def _set_assignment(self, wanted: list[TopicPartition]) -> None:
        for tp in self._assignment:
            if tp not in wanted:
                self._fetcher.reset(tp, None)
                self._ready.pop(tp, None)
        self._assignment = wanted
        self._positions = {tp: self._positions.get(tp) for tp in wanted}

    # ------------------------------------------------------------------ groups

    def subscribe(self, topics: Iterable[str] | str | re.Pattern | None = None, *,
                  pattern: str | re.Pattern | None = None,
                  on_assign=None, on_revoke=None, on_lost=None) -> None:
        """Join the group ``group_id`` for ``topics`` (names) or ``pattern`` (a regular expression
        matched against whole topic names, re-matched every ``metadata.max.age.ms``; a topic
        string starting with ``^`` is a pattern too, as in librdkafka). The callbacks get sorted
        ``(topic, partition)`` lists on the polling thread: ``on_revoke`` before partitions go
        (commit there when auto-commit is off), ``on_assign`` with new ones, ``on_lost`` when the
        membership was lost (default: ``on_revoke``). The group is joined by the next ``poll``."""
        if self._group is None:
            raise ValueError("subscribe() needs a group_id (group.id)")
        if self._assignment and not self._subscribed:
            raise ValueError("subscribe() after assign(): unassign first (assign([]))")
        if isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^")):
            topics, pattern = None, topics
        elif isinstance(topics, str):
            topics = [topics]
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern (one of them)")
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._subscribed = True
        self._group.subscribe(list(topics or ()), compiled, RebalanceListener(on_assign, on_revoke, on_lost))

    def unsubscribe(self) -> None:
        """Revoke everything (listener, auto-commit first) and leave the group."""
        if self._group is not None and self._subscribed:
            self._group.leave()
        self._subscribed = False
        self._set_assignment([])

    def subscription(self) -> list[str]:
        """The subscribed topics (for a pattern: the topics it matched at the last check)."""
        return list(self._group.protocol.topics) if self._group is not None and self._subscribed else []

    def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None, *,
               timeout_ms: float | None = None) -> None:
        """Commit ``offsets`` (the next offset to read per partition; default: the positions of
        every assigned partition, i.e. everything polled so far) and wait. Raises
        ``CommitFailedError`` when the generation is gone (the partitions may be someone
        else's now), ``RebalanceInProgressError`` during a rebalance, ``KafkaError`` otherwise."""
        group = self._require_group()
        group.offsets.commit(self._commit_offsets(offsets),
                             self._default_api_timeout_ms if timeout_ms is None else timeout_ms)

    def commit_async(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: CommitCallback | None = None) -> None:
        """Commit without waiting; ``callback(offsets, error_or_None)`` runs from a later poll
        (or commit, or close), in the order commits were sent. Not retried."""
        self._require_group().offsets.commit_async(self._commit_offsets(offsets), callback)

    def committed(self, partitions: Iterable[TopicPartition], *,
                  timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where it has none)."""
        return self._require_group().offsets.fetch(
            [(str(t), int(p)) for t, p in partitions],
            self._default_api_timeout_ms if timeout_ms is None else timeout_ms)

    def group_metadata(self) -> dict:
        """``group_id``, ``generation_id``, ``member_id``, ``group_instance_id``, ``state``."""
        group = self._require_group()
        generation = group.membership.generation
        return {"group_id": group.membership.settings.group_id, "generation_id": generation.generation_id,
                "member_id": generation.member_id,
                "group_instance_id": group.membership.settings.group_instance_id,
                "state": group.membership.state.value}

    def _require_group(self) -> ConsumerGroup:
        if self._group is None:
            raise ValueError("this needs a group_id (group.id)")
        return self._group

    def _commit_offsets(self, offsets) -> dict[TopicPartition, OffsetAndMetadata]:
        if offsets is None:
            return {tp: OffsetAndMetadata(pos) for tp, pos in self._positions.items() if pos is not None}
        out = {}
        for (topic, partition), value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            if om.offset < 0:
                raise ValueError(f"a committed offset must be >= 0, got {om.offset} for {topic}-{partition}")
            out[(str(topic), int(partition))] = om
        return out

    def _group_assign(self, tps: list[TopicPartition]) -> None:
        """From the group protocol: the member's partitions now (positions kept for kept ones)."""
        self._set_assignment(list(tps))

    def _group_commit_owned(self, tps: list[TopicPartition]) -> None:
        """From the group protocol, before revoking: auto-commit what was consumed of ``tps``."""
        if self._group is not None and self._group.auto_commit:
            offsets = {tp: OffsetAndMetadata(self._positions[tp]) for tp in tps
                       if self._positions.get(tp) is not None}
            self._group.commit_quietly(offsets)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids from metadata (KafkaError if the topic does not exist)."""
        return self._cluster.partitions_for(topic)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._require_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._set_position(tp, offset)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._reset(self._targets(partitions), EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """To the high watermark (read_uncommitted) or the last stable offset (read_committed)."""
        self._reset(self._targets(partitions), LATEST_TIMESTAMP)

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record a poll returns for ``tp`` (resolved from the group's
        committed offset, else ``auto_offset_reset``, if unset)."""
        self._require_assigned(tp)
        if self._positions[tp] is None:
            self._init_positions([tp])
        return self._positions[tp]

    def highwater(self, tp: TopicPartition) -> int | None:
        """High watermark from the last fetch answer for ``tp`` (None before any)."""
        return self._high_watermarks.get(tp)

    def last_stable_offset(self, tp: TopicPartition) -> int | None:
        return self._last_stable_offsets.get(tp)

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Latest offsets by the consumer's isolation level, without moving positions."""
        tps = list(partitions)
        answers = list_offsets(self._cluster, {tp: LATEST_TIMESTAMP for tp in tps}, self._isolation)
        return {tp: answers[tp][0] for tp in tps}

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        tps = list(partitions)
        answers = list_offsets(self._cluster, {tp: EARLIEST_TIMESTAMP for tp in tps}, self._isolation)
        return {tp: answers[tp][0] for tp in tps}

    def close(self) -> None:
        """Auto-commit (when on), revoke (listener) and leave the group (a static member does
        not leave: it keeps its assignment for ``session.timeout.ms``), close connections."""
        if self._closed:
            return
        try:
            if self._group is not None:
                self._group.close(self._subscribed)
        finally:
            self._closed = True
            self._fetcher.close()
            self._cluster.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ poll

    def poll(self, timeout_ms: float = 1000, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, waiting up to ``timeout_ms`` for the first ones."""
        if max_records <= 0:
            raise ValueError(f"max_records must be positive, got {max_records}")
        return self._poll(timeout_ms, lambda: self._take_records(max_records)) or []

    def poll_arrow(self, timeout_ms: float = 1000, max_records: int | None = None):
        """Up to ``max_records`` (None: everything fetched so far) records as Arrow, in Spark's
        Kafka source schema (``SPARK_KAFKA_SCHEMA``, or ``..._WITH_HEADERS`` with
        ``include_headers``): a ``pa.RecordBatch`` when they come from one partition chunk, a
        ``pa.Table`` of several batches otherwise, an empty RecordBatch when nothing arrived
        within ``timeout_ms``. Rows of a partition are in offset order."""
        if max_records is not None and max_records <= 0:
            raise ValueError(f"max_records must be positive, got {max_records}")
        out = self._poll(timeout_ms, lambda: self._take_arrow(max_records))
        if out:
            return out[0] if len(out) == 1 else _arrow().Table.from_batches(out)
        return self._empty_arrow()

    def _poll(self, timeout_ms: float, take):
        assert not self._closed, "poll on a closed Consumer"
        deadline = self._clock.monotonic_ms() + max(timeout_ms, 0)
        if self._group is not None:
            self._group.polled()
        while True:
            if self._subscribed and not self._group.ensure_active(deadline):
                return None
            if not self._assignment:
                if self._subscribed and self._clock.monotonic_ms() < deadline:
                    self._clock.sleep_ms(min(self._config.retry_backoff_ms, deadline - self._clock.monotonic_ms()))
                    continue
                return None
            unset = [tp for tp in self._assignment if self._positions[tp] is None]
            if unset:
                self._init_positions(unset)
            self._fetcher.send_fetches()  # prefetch before decoding: the broker works meanwhile
            self._handle_errors()
            out = take()
            if out:
                return out
            remaining = deadline - self._clock.monotonic_ms()
            if remaining <= 0:
                return None
            if not self._fetcher.receive(remaining) and not self._fetcher.inflight_count:
                # nothing in flight: every partition is backing off after an error
                self._clock.sleep_ms(min(self._config.retry_backoff_ms, max(remaining, 0)))

    def _take_records(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        while len(out) < max_records:
            tp, ready = self._next_ready(decode_arrow=False)
            if ready is None:
                break
            if ready.arrow is not None:
                ready.records, ready.arrow = deque(_records_from_arrow(ready.arrow)), None
            buffer = ready.records
            while buffer and len(out) < max_records:
                record = buffer.popleft()
                out.append(record)
                self._positions[tp] = record.offset + 1
            if not buffer:
                self._finish(tp, ready)
        return out

    def _take_arrow(self, max_records: int | None) -> list:
        out, count = [], 0
        while max_records is None or count < max_records:
            tp, ready = self._next_ready(decode_arrow=True)
            if ready is None:
                break
            if ready.records is not None:
                ready.arrow, ready.records = self._arrow_from_records(tp, list(ready.records)), None
            batch = ready.arrow
            rows = batch.num_rows
            want = rows if max_records is None else min(rows, max_records - count)
            if want == rows:  # all of it: ``_finish`` moves the position past the whole fetch
                out.append(batch)
                count += want
                self._finish(tp, ready)
                continue
            if want:
                part = batch.slice(0, want)
                out.append(part)
                count += want
                self._positions[tp] = part.column("offset")[want - 1].as_py() + 1
            ready.arrow = batch.slice(want)
        return out

    def _next_ready(self, decode_arrow: bool) -> tuple[TopicPartition | None, _Ready | None]:
        """A partition with decoded data (decoding the next completed fetch if needed)."""
        for tp, ready in self._ready.items():
            return tp, ready
        while True:
            fetch = self._fetcher.take_completed()
            if fetch is None:
                return None, None
            ready = self._decode(fetch, decode_arrow)
            if ready is not None:
                self._ready[fetch.tp] = ready
                return fetch.tp, ready

    def _finish(self, tp: TopicPartition, ready: _Ready) -> None:
        del self._ready[tp]
        position = self._positions.get(tp)
        if position is not None and ready.next_offset > position:
            self._positions[tp] = ready.next_offset

    def _decode(self, fetch: CompletedFetch, decode_arrow: bool) -> _Ready | None:
        """Decode one completed fetch from the partition's position; None when it holds no
        record to return (its position still moves past markers and aborted batches)."""
        tp = fetch.tp
        position = self._positions.get(tp)
        if position is None or fetch.generation != self._fetcher.generations.get(tp, 0):
            return None
        self._high_watermarks[tp] = fetch.high_watermark
        if fetch.last_stable_offset >= 0:
            self._last_stable_offsets[tp] = fetch.last_stable_offset
        if decode_arrow:
            batch = self._decode_arrow(fetch, position)
            if batch.num_rows:
                return _Ready(None, batch, fetch.next_offset)
        else:
            records = decode_fetched(tp[0], tp[1], fetch.records, position,
                                     aborted_transactions=fetch.aborted, read_committed=self.read_committed,
                                     check_crcs=self._check_crcs).records
            if records:
                return _Ready(deque(records), None, fetch.next_offset)
        if fetch.next_offset > position:
            self._positions[tp] = fetch.next_offset
        return None

    def _decode_arrow(self, fetch: CompletedFetch, position: int):
        from broker.records.arrow import decode_batches

        batch_filter = None
        if self.read_committed:
            aborted = aborted_batch_offsets(fetch.records, fetch.aborted, fetch.tp, self._check_crcs)
            if aborted:
                batch_filter = lambda header: header.base_offset not in aborted  # noqa: E731
        try:
            return decode_batches(fetch.records, topic=fetch.tp[0], partition=fetch.tp[1],
                                  start_offset=position, include_headers=self._include_headers,
                                  batch_filter=batch_filter, check_crc=self._check_crcs)
        except ValueError as exc:  # RecordsError: corrupt or over a limit
            code = getattr(exc, "kafka_error_code", ErrorCode.CORRUPT_MESSAGE)
            raise KafkaError(code, f"{fetch.tp[0]}-{fetch.tp[1]} at offset {fetch.fetch_offset}: {exc}") from exc

    # ------------------------------------------------------------------ errors and resets

    def _handle_errors(self) -> None:
        out_of_range = []
        while self._fetcher.errors:
            error = self._fetcher.errors.popleft()
            tp = error.tp
            if error.generation != self._fetcher.generations.get(tp, 0) or tp not in self._positions:
                continue
            if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                out_of_range.append((tp, error.fetch_offset))
            elif not self._fetcher_retries(error.code):
                raise KafkaError(error.code, f"Fetch {tp[0]}-{tp[1]} at offset {error.fetch_offset}: "
                                 f"{KafkaError(error.code).message}")
        if out_of_range:
            if self._auto_offset_reset == "none":
                tp, offset = out_of_range[0]
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"{tp[0]}-{tp[1]}: offset {offset} is out of range "
                                 f"and auto_offset_reset is none")
            self._reset_by_policy([tp for tp, _ in out_of_range])

    @staticmethod
    def _fetcher_retries(code: int) -> bool:
        from broker.client.fetcher import _RETRY_CODES
        from broker.client.metadata import REFRESH_CODES

        return code in _RETRY_CODES or code in REFRESH_CODES

    def _init_positions(self, tps: list[TopicPartition]) -> None:
        """Partitions without a position: the group's committed offset where there is one
        (Java ``refreshCommittedOffsetsIfNeeded``), ``auto_offset_reset`` for the rest."""
        if self._group is not None:
            committed = self._group.offsets.fetch(tps, self._default_api_timeout_ms)
            for tp, om in committed.items():
                if om is not None:
                    self._set_position(tp, om.offset)
            tps = [tp for tp in tps if committed.get(tp) is None]
        if tps:
            self._reset_by_policy(tps)

    def _reset_by_policy(self, tps: list[TopicPartition]) -> None:
        if self._auto_offset_reset == "none":
            names = ", ".join(f"{t}-{p}" for t, p in tps)
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"no position for {names} and auto_offset_reset is none: seek first")
        timestamp = EARLIEST_TIMESTAMP if self._auto_offset_reset == "earliest" else LATEST_TIMESTAMP
        self._reset(tps, timestamp)

    def _reset(self, tps: list[TopicPartition], timestamp: int) -> None:
        if not tps:
            return
        answers = list_offsets(self._cluster, {tp: timestamp for tp in tps}, self._isolation)
        for tp in tps:
            self._set_position(tp, answers[tp][0])

    def _set_position(self, tp: TopicPartition, offset: int) -> None:
        self._positions[tp] = offset
        self._ready.pop(tp, None)
        self._fetcher.reset(tp, offset)

    def _targets(self, partitions) -> list[TopicPartition]:
        tps = list(self._assignment) if partitions is None else [(t, int(p)) for t, p in partitions]
        for tp in tps:
            self._require_assigned(tp)
        return tps

    def _require_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")

    # ------------------------------------------------------------------ Arrow helpers

    def _schema(self):
        from broker.records.arrow import SPARK_KAFKA_SCHEMA, SPARK_KAFKA_SCHEMA_WITH_HEADERS

        return SPARK_KAFKA_SCHEMA_WITH_HEADERS if self._include_headers else SPARK_KAFKA_SCHEMA

    def _empty_arrow(self):
        return _arrow().RecordBatch.from_pylist([], schema=self._schema())

    def _arrow_from_records(self, tp: TopicPartition, records: list[ConsumerRecord]):
        pa = _arrow()
        columns = {
            "key": [r.key for r in records], "value": [r.value for r in records],
            "topic": [r.topic for r in records], "partition": [r.partition for r in records],
            "offset": [r.offset for r in records],
            "timestamp": [r.timestamp * 1000 for r in records],
            "timestampType": [r.timestamp_type for r in records],
        }
        if self._include_headers:
            columns["headers"] = [[{"key": k, "value": v} for k, v in r.headers] for r in records]
        schema = self._schema()
        return pa.RecordBatch.from_arrays([pa.array(columns[f.name], f.type) for f in schema], schema=schema)


def _records_from_arrow(batch) -> list[ConsumerRecord]:
    columns = batch.to_pydict()
    headers = columns.get("headers")
    out = []
    for i in range(batch.num_rows):
        ts = columns["timestamp"][i]
        millis = int(ts.timestamp() * 1000) if ts is not None else -1
        hs = tuple((h["key"], h["value"]) for h in headers[i]) if headers and headers[i] else ()
        out.append(ConsumerRecord(columns["topic"][i], columns["partition"][i], columns["offset"][i],
                                  millis, columns["timestampType"][i], columns["key"][i],
                                  columns["value"][i], hs))
    return out


def _arrow():
    import pyarrow

    return pyarrow
