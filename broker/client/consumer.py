"""``Consumer``: a blocking consumer of manually assigned partitions (no group membership).

Positions are per partition: the offset of the next record to return. ``poll`` returns buffered
records first; when the buffer is empty it sends one Fetch per leader (all leaders in parallel)
for every assigned partition with a known position, decodes the answers with
``fetched.decode_fetched`` and buffers them. A Fetch waits on the broker up to
``fetch_max_wait_ms`` (bounded by the poll's remaining time) for ``fetch_min_bytes``.

Per-partition errors (Java ``Fetcher``): OFFSET_OUT_OF_RANGE resets the position by
``auto_offset_reset`` ("earliest", "latest", or "none": raise); NOT_LEADER_OR_FOLLOWER and the
other metadata errors refresh metadata and retry on the next round; anything else raises a
``KafkaError`` naming the partition. A partition without a position (just assigned) gets one
from ``auto_offset_reset`` before its first fetch.

Fetch versions 4-12 (isolation level needs 4; topic ids from 13 are not used), no fetch
sessions (session id 0, epoch -1: every fetch is a full fetch, reference pitfall 18). The order
of partitions in a request rotates, so one partition with a batch larger than the per-partition
limit is first in some request and the broker returns that whole batch (KIP-74).
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterable

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.fetched import ConsumerRecord, FetchedPartition, decode_fetched
from broker.client.metadata import Cluster
from broker.client.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    isolation_level_code,
    list_offsets,
)
from broker.wire import ApiKey, ErrorCode

__all__ = ["Consumer", "ConsumerRecord", "AUTO_OFFSET_RESET"]

AUTO_OFFSET_RESET = ("earliest", "latest", "none")
_RETRY_CODES = frozenset({ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})

TopicPartition = tuple[str, int]


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
        check_crcs: bool = True,
        request_timeout_ms: int | None = None,
        client_id: str | None = None,
        config: ClientConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        cluster: Cluster | None = None,
    ) -> None:
        self._isolation = isolation_level_code(isolation_level)
        if auto_offset_reset not in AUTO_OFFSET_RESET:
            raise ValueError(f"invalid auto_offset_reset {auto_offset_reset!r}: use earliest, latest or none")
        for name, value in (("fetch_max_wait_ms", fetch_max_wait_ms), ("fetch_min_bytes", fetch_min_bytes),
                            ("fetch_max_bytes", fetch_max_bytes),
                            ("max_partition_fetch_bytes", max_partition_fetch_bytes)):
            if value < 0 or (value == 0 and name != "fetch_max_wait_ms" and name != "fetch_min_bytes"):
                raise ValueError(f"{name} must be positive, got {value}")
        config = config or ClientConfig()
        if request_timeout_ms is not None:
            config = config.with_(request_timeout_ms=request_timeout_ms)
        if client_id is not None:
            config = config.with_(client_id=client_id)
        self._cluster = cluster or Cluster(bootstrap_servers, config, clock)
        self._config = self._cluster.config
        self._clock = self._cluster.clock
        self._auto_offset_reset = auto_offset_reset
        self._fetch_max_wait_ms = fetch_max_wait_ms
        self._fetch_min_bytes = fetch_min_bytes
        self._fetch_max_bytes = fetch_max_bytes
        self._partition_fetch_bytes = max_partition_fetch_bytes
        self._check_crcs = check_crcs
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int | None] = {}
        self._buffers: dict[TopicPartition, deque[ConsumerRecord]] = {}
        self._buffer_next: dict[TopicPartition, int] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._last_stable_offsets: dict[TopicPartition, int] = {}
        self._rotation = 0
        self._closed = False

    @property
    def read_committed(self) -> bool:
        return self._isolation == 1

    # ------------------------------------------------------------------ assignment and positions

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment. Positions of partitions kept are kept; new ones start unset
        (``auto_offset_reset`` on first use). Unknown topics or partitions raise."""
        wanted = list(dict.fromkeys((str(t), int(p)) for t, p in partitions))
        for topic, partition in wanted:
            if partition not in self._cluster.topic(topic).partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"topic {topic!r} has no partition {partition}")
        self._assignment = wanted
        self._positions = {tp: self._positions.get(tp) for tp in wanted}
        for tp in [tp for tp in self._buffers if tp not in self._positions]:
            self._drop_buffer(tp)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids from metadata (KafkaError if the topic does not exist)."""
        return self._cluster.partitions_for(topic)

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._require_assigned(tp)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._positions[tp] = offset
        self._drop_buffer(tp)

    def seek_to_beginning(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        self._reset(self._targets(partitions), EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """To the high watermark (read_uncommitted) or the last stable offset (read_committed)."""
        self._reset(self._targets(partitions), LATEST_TIMESTAMP)

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record ``poll`` returns for ``tp`` (resolved by
        ``auto_offset_reset`` if unset)."""
        self._require_assigned(tp)
        if self._positions[tp] is None:
            self._reset_by_policy([tp])
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
        self._closed = True
        self._cluster.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ poll

    def poll(self, timeout_ms: float = 1000, max_records: int = 500) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, waiting up to ``timeout_ms`` for the first ones."""
        assert not self._closed, "poll() on a closed Consumer"
        if max_records <= 0:
            raise ValueError(f"max_records must be positive, got {max_records}")
        deadline = self._clock.monotonic_ms() + max(timeout_ms, 0)
        while True:
            records = self._take_buffered(max_records)
            if records or not self._assignment:
                return records
            unset = [tp for tp in self._assignment if self._positions[tp] is None]
            if unset:
                self._reset_by_policy(unset)
            remaining = deadline - self._clock.monotonic_ms()
            wait_ms = int(max(0, min(self._fetch_max_wait_ms, remaining)))
            progressed = self._fetch_round(wait_ms)
            if self._buffers:
                continue
            remaining = deadline - self._clock.monotonic_ms()
            if remaining <= 0:
                return []
            if not progressed:  # every partition hit an error: back off before asking again
                self._clock.sleep_ms(min(self._config.retry_backoff_ms, remaining))

    def _take_buffered(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for tp in list(self._buffers):
            buffer = self._buffers[tp]
            while buffer and len(out) < max_records:
                record = buffer.popleft()
                out.append(record)
                self._positions[tp] = record.offset + 1
            if not buffer:
                self._positions[tp] = max(self._positions[tp], self._buffer_next.pop(tp))
                del self._buffers[tp]
            if len(out) >= max_records:
                break
        return out

    def _fetch_round(self, wait_ms: int) -> bool:
        """One Fetch per leader; True if at least one partition answered without error."""
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        tps = [tp for tp in self._assignment if self._positions[tp] is not None and tp not in self._buffers]
        if tps:
            self._rotation = (self._rotation + 1) % len(tps)
            tps = tps[self._rotation:] + tps[:self._rotation]
        for tp in tps:
            leader = self._cluster.leader_for(*tp)
            if leader < 0:
                self._cluster.invalidate(tp[0])
            else:
                by_leader[leader].append(tp)
        sent = []
        for leader, group in by_leader.items():
            try:
                conn = self._cluster.connection(leader)
                version = conn.version_for(ApiKey.FETCH)
                conn.send(ApiKey.FETCH, self._fetch_request(group, wait_ms), version,
                          timeout_ms=self._config.request_timeout_ms + wait_ms)
            except (KafkaConnectionError, KafkaTimeoutError):
                self._cluster.invalidate()
                continue
            sent.append((conn, group))
        progressed = False
        out_of_range: list[TopicPartition] = []
        for conn, group in sent:
            try:
                response = conn.receive()
            except (KafkaConnectionError, KafkaTimeoutError):
                self._cluster.invalidate()
                continue
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(response.error_code, f"Fetch from {conn.address}")
            progressed |= self._handle_fetch_response(response, set(group), out_of_range)
        # Resets send ListOffsets, so only once no Fetch is in flight on any connection.
        if out_of_range:
            self._out_of_range(out_of_range)
        return progressed or bool(out_of_range)

    def _fetch_request(self, tps: list[TopicPartition], wait_ms: int) -> dict:
        topics: dict[str, list[dict]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append({
                "partition": partition,
                "fetch_offset": self._positions[(topic, partition)],
                "partition_max_bytes": self._partition_fetch_bytes,
            })
        return {
            "replica_id": -1,
            "max_wait_ms": wait_ms,
            "min_bytes": self._fetch_min_bytes,
            "max_bytes": self._fetch_max_bytes,
            "isolation_level": self._isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()],
            "forgotten_topics_data": [],
        }

    def _handle_fetch_response(self, response, asked: set[TopicPartition],
                               out_of_range: list[TopicPartition]) -> bool:
        progressed = False
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                if tp not in asked or self._positions.get(tp) is None:
                    continue  # not ours (anymore)
                code = p.error_code
                if code == ErrorCode.NONE:
                    self._store(tp, p)
                    progressed = True
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append(tp)
                elif not (self._cluster.on_partition_error(tp[0], code) or code in _RETRY_CODES):
                    raise KafkaError(code, f"Fetch {tp[0]}-{tp[1]} at offset {self._positions[tp]}: "
                                     f"{KafkaError(code).message}")
        return progressed

    def _store(self, tp: TopicPartition, p) -> None:
        self._high_watermarks[tp] = p.high_watermark
        if p.last_stable_offset >= 0:
            self._last_stable_offsets[tp] = p.last_stable_offset
        aborted = None
        if p.aborted_transactions is not None:
            aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
        fetched: FetchedPartition = decode_fetched(
            tp[0], tp[1], p.records, self._positions[tp],
            aborted_transactions=aborted,
            read_committed=self.read_committed,
            check_crcs=self._check_crcs,
        )
        if fetched.records:
            self._buffers[tp] = deque(fetched.records)
            self._buffer_next[tp] = fetched.next_offset
        else:
            self._positions[tp] = fetched.next_offset  # only markers / aborted data / nothing

    def _out_of_range(self, tps: list[TopicPartition]) -> None:
        if self._auto_offset_reset == "none":
            tp = tps[0]
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"{tp[0]}-{tp[1]}: offset {self._positions[tp]} is out of range "
                             f"and auto_offset_reset is none")
        self._reset_by_policy(tps)

    # ------------------------------------------------------------------ helpers

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
            self._positions[tp] = answers[tp][0]
            self._drop_buffer(tp)

    def _targets(self, partitions) -> list[TopicPartition]:
        tps = list(self._assignment) if partitions is None else [(t, int(p)) for t, p in partitions]
        for tp in tps:
            self._require_assigned(tp)
        return tps

    def _require_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._positions:
            raise ValueError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")

    def _drop_buffer(self, tp: TopicPartition) -> None:
        self._buffers.pop(tp, None)
        self._buffer_next.pop(tp, None)
