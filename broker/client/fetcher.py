"""The consumer's fetcher: pipelined Fetch requests to partition leaders, bounded prefetch.

No thread: the consumer's owner thread drives it from ``poll`` (Java's ``Fetcher`` model). The
point is overlap without a thread: as soon as a partition's answer arrives, the offset after its
last complete batch is known from the batch headers alone, so the next Fetch for it goes out
*before* the consumer decodes what it got; the broker reads the next chunk while the client
decodes the previous one.

- One Fetch in flight per leader, on a connection of its own (``fetch connections``, not the
  ``Cluster``'s, so ListOffsets and Metadata never queue behind a long poll).
- A partition is fetched from ``fetch_position`` (past everything fetched so far, possibly ahead
  of the consumer's position) only while the completed-but-unconsumed bytes are under
  ``fetch_buffer_bytes_max``; each answer is at most ``fetch_max_bytes``, so the buffer never
  holds more than that bound plus one answer per leader.
- Answers are kept raw (``CompletedFetch``: the partition's record bytes, a zero-copy view into
  the response frame); decoding is the consumer's business (records or Arrow).
- ``seek`` (or a reset) bumps the partition's generation: answers for an older generation are
  dropped when they arrive.

Per-partition errors are returned to the consumer as ``FetchError`` values (it owns the offset
reset policy); NOT_LEADER_OR_FOLLOWER & co. refresh metadata and the partition is fetched again
from its new leader after ``retry_backoff_ms``. A failed connection fails its in-flight fetch
(the partitions are fetched again); nothing is lost because positions only move when the
consumer takes records.
"""

from __future__ import annotations

import selectors
from collections import deque
from dataclasses import dataclass

from broker.client.connection import BrokerConnection
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster
from broker.records.header import HEADER_SIZE, LOG_OVERHEAD
from broker.wire import ApiKey, ErrorCode

__all__ = ["CompletedFetch", "FetchError", "Fetcher", "next_fetch_offset"]

TopicPartition = tuple[str, int]
_RETRY_CODES = frozenset({ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})
_BATCH_LENGTH = __import__("struct").Struct(">qi")


@dataclass
class CompletedFetch:
    tp: TopicPartition
    generation: int
    fetch_offset: int
    records: memoryview  # whole batches (a cut batch at the end is excluded by next_offset)
    next_offset: int  # past the last complete batch; == fetch_offset when there was none
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer_id, first_offset)

    @property
    def size(self) -> int:
        return len(self.records)


@dataclass(frozen=True)
class FetchError:
    tp: TopicPartition
    generation: int
    fetch_offset: int
    code: int


def next_fetch_offset(records, fetch_offset: int) -> tuple[int, int]:
    """(offset after the last complete batch, bytes of complete batches) from the batch
    headers only; ``fetch_offset`` and 0 when no batch is complete."""
    pos, end, next_offset = 0, len(records), fetch_offset
    while end - pos >= HEADER_SIZE:
        base, length = _BATCH_LENGTH.unpack_from(records, pos)
        size = length + LOG_OVERHEAD
        if size < HEADER_SIZE or pos + size > end:
            break
        last_delta = int.from_bytes(records[pos + 23:pos + 27], "big", signed=True)
        next_offset = max(next_offset, base + last_delta + 1)
        pos += size
    return next_offset, pos


class Fetcher:
    def __init__(self, cluster: Cluster, *, isolation_level: int, fetch_max_wait_ms: int,
                 fetch_min_bytes: int, fetch_max_bytes: int, partition_fetch_bytes: int,
                 fetch_buffer_bytes_max: int) -> None:
        self._cluster = cluster
        self._config = cluster.config
        self._clock = cluster.clock
        self._isolation = isolation_level
        self._max_wait_ms = fetch_max_wait_ms
        self._min_bytes = fetch_min_bytes
        self._max_bytes = fetch_max_bytes
        self._partition_bytes = partition_fetch_bytes
        self.buffer_bytes_max = fetch_buffer_bytes_max
        self._connections: dict[int, BrokerConnection] = {}
        self._inflight: dict[int, list[tuple[TopicPartition, int, int]]] = {}  # node -> [(tp, offset, gen)]
        self._selector = selectors.DefaultSelector()
        self.fetch_positions: dict[TopicPartition, int] = {}
        self.generations: dict[TopicPartition, int] = {}
        self.completed: deque[CompletedFetch] = deque()
        self.errors: deque[FetchError] = deque()
        self.buffered_bytes = 0
        self._backoff_until: dict[TopicPartition, float] = {}
        self._rotation = 0
        self.stats = {"fetches_sent": 0, "fetch_bytes": 0, "fetch_buffer_bytes_peak": 0}

    # ------------------------------------------------------------------ positions

    def reset(self, tp: TopicPartition, offset: int | None) -> None:
        """Fetch ``tp`` from ``offset`` next (None: stop fetching it); drops what was fetched."""
        self.generations[tp] = self.generations.get(tp, 0) + 1
        if offset is None:
            self.fetch_positions.pop(tp, None)
        else:
            self.fetch_positions[tp] = offset
        kept = deque()
        for fetch in self.completed:
            if fetch.tp == tp:
                self.buffered_bytes -= fetch.size
            else:
                kept.append(fetch)
        self.completed = kept
        self.errors = deque(e for e in self.errors if e.tp != tp)
        self._backoff_until.pop(tp, None)

    def in_flight(self, tp: TopicPartition) -> bool:
        return any(t == tp for entries in self._inflight.values() for t, _, _ in entries)

    @property
    def inflight_count(self) -> int:
        return len(self._inflight)

    # ------------------------------------------------------------------ sending

    def send_fetches(self) -> int:
        """Send a Fetch to every leader that has none in flight, for its partitions that have a
        fetch position, are not in flight and not backing off, while the buffer is under its
        bound. Returns the number of requests sent."""
        if self.buffered_bytes >= self.buffer_bytes_max:
            return 0
        now = self._clock.monotonic_ms()
        busy = {tp for entries in self._inflight.values() for tp, _, _ in entries}
        tps = [tp for tp in self.fetch_positions
               if tp not in busy and self._backoff_until.get(tp, 0) <= now]
        if not tps:
            return 0
        self._rotation = (self._rotation + 1) % len(tps)
        tps = tps[self._rotation:] + tps[:self._rotation]
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            try:
                leader = self._cluster.leader_for(*tp)
            except KafkaError:
                leader = -1
            if leader < 0:
                self._cluster.invalidate(tp[0])
                self._backoff_until[tp] = now + self._config.retry_backoff_ms
                continue
            if leader not in self._inflight:
                by_leader.setdefault(leader, []).append(tp)
        sent = 0
        for leader, group in by_leader.items():
            sent += self._send(leader, group, now)
        return sent

    def _send(self, leader: int, tps: list[TopicPartition], now: float) -> int:
        try:
            conn = self._connection(leader)
            version = conn.version_for(ApiKey.FETCH)
            conn.send(ApiKey.FETCH, self._request(tps), version,
                      timeout_ms=self._config.request_timeout_ms + self._max_wait_ms)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._cluster.invalidate()
            for tp in tps:
                self._backoff_until[tp] = now + self._config.retry_backoff_ms
            self._drop_connection(leader)
            return 0
        self._inflight[leader] = [(tp, self.fetch_positions[tp], self.generations.get(tp, 0)) for tp in tps]
        if conn.fileno() not in self._selector.get_map():
            self._selector.register(conn.fileno(), selectors.EVENT_READ, leader)
        self.stats["fetches_sent"] += 1
        return 1

    def _connection(self, node: int) -> BrokerConnection:
        broker = self._cluster.brokers.get(node)
        if broker is None:
            self._cluster.refresh_brokers()
            broker = self._cluster.brokers.get(node)
        if broker is None:
            raise KafkaConnectionError(f"broker {node} is not in the cluster metadata")
        conn = self._connections.get(node)
        if conn is None or (conn.host, conn.port) != (broker.host, broker.port):
            if conn is not None:
                conn.close()
            conn = BrokerConnection(broker.host, broker.port, config=self._config, node_id=node,
                                    clock=self._clock)
            self._connections[node] = conn
        conn.connect()
        return conn

    def _request(self, tps: list[TopicPartition]) -> dict:
        topics: dict[str, list[dict]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append({
                "partition": partition,
                "fetch_offset": self.fetch_positions[(topic, partition)],
                "partition_max_bytes": self._partition_bytes,
            })
        return {
            "replica_id": -1,
            "max_wait_ms": self._max_wait_ms,
            "min_bytes": self._min_bytes,
            "max_bytes": self._max_bytes,
            "isolation_level": self._isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()],
            "forgotten_topics_data": [],
        }

    # ------------------------------------------------------------------ receiving

    def receive(self, timeout_ms: float) -> bool:
        """Wait up to ``timeout_ms`` for in-flight answers and take every one that arrived;
        True if at least one did. Each answer immediately triggers the next fetches (prefetch)."""
        if not self._inflight:
            return False
        timeout_ms = min(timeout_ms, self._next_deadline_ms() - self._clock.monotonic_ms())
        # a TLS socket may hold a decrypted answer the selector cannot see (``buffered``)
        buffered = [leader for leader in self._inflight
                    if (conn := self._connections.get(leader)) is not None and conn.buffered]
        events = self._selector.select(0 if buffered else max(timeout_ms, 0) / 1000)
        got = False
        for leader in dict.fromkeys([*(key.data for key, _ in events), *buffered]):
            got |= self._receive_from(leader)
        self._expire()
        return got

    def _receive_from(self, leader: int) -> bool:
        entries = self._inflight.get(leader)
        conn = self._connections.get(leader)
        if entries is None or conn is None:
            return False
        try:
            response = conn.receive()
        except (KafkaConnectionError, KafkaTimeoutError):
            self._fail_inflight(leader)
            return False
        del self._inflight[leader]
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(response.error_code, f"Fetch from {conn.address}")
        self._take(response, entries)
        return True

    def _take(self, response, entries) -> None:
        asked = {tp: (offset, generation) for tp, offset, generation in entries}
        now = self._clock.monotonic_ms()
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                if tp not in asked:
                    continue
                offset, generation = asked.pop(tp)
                if generation != self.generations.get(tp, 0) or tp not in self.fetch_positions:
                    continue  # seeked (or unassigned) since: stale
                code = p.error_code
                if code == ErrorCode.NONE:
                    self._complete(tp, generation, offset, p)
                elif code in _RETRY_CODES or self._cluster.on_partition_error(tp[0], code):
                    self._backoff_until[tp] = now + self._config.retry_backoff_ms
                    self.errors.append(FetchError(tp, generation, offset, code))
                else:
                    self.errors.append(FetchError(tp, generation, offset, code))
                    self._backoff_until[tp] = float("inf")  # until the consumer resets it

    def _complete(self, tp: TopicPartition, generation: int, offset: int, p) -> None:
        records = p.records if p.records is not None else memoryview(b"")
        next_offset, complete_bytes = next_fetch_offset(records, offset)
        aborted = None
        if p.aborted_transactions is not None:
            aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
        fetch = CompletedFetch(tp, generation, offset, memoryview(records)[:complete_bytes], next_offset,
                               p.high_watermark, p.last_stable_offset, p.log_start_offset, aborted)
        if next_offset > offset:
            self.fetch_positions[tp] = next_offset
        self.completed.append(fetch)
        self.buffered_bytes += fetch.size
        self.stats["fetch_bytes"] += fetch.size
        if self.buffered_bytes > self.stats["fetch_buffer_bytes_peak"]:
            self.stats["fetch_buffer_bytes_peak"] = self.buffered_bytes

    def take_completed(self) -> CompletedFetch | None:
        if not self.completed:
            return None
        fetch = self.completed.popleft()
        self.buffered_bytes -= fetch.size
        return fetch

    def _next_deadline_ms(self) -> float:
        deadlines = [c.oldest_deadline_ms for n, c in self._connections.items()
                     if n in self._inflight and c.oldest_deadline_ms is not None]
        return min(deadlines, default=float("inf"))

    def _expire(self) -> None:
        now = self._clock.monotonic_ms()
        for leader in list(self._inflight):
            conn = self._connections.get(leader)
            deadline = conn.oldest_deadline_ms if conn is not None else None
            if conn is None or not conn.connected or (deadline is not None and now >= deadline):
                self._fail_inflight(leader)

    def _fail_inflight(self, leader: int) -> None:
        entries = self._inflight.pop(leader, [])
        self._drop_connection(leader)
        self._cluster.invalidate()
        until = self._clock.monotonic_ms() + self._config.retry_backoff_ms
        for tp, _, _ in entries:
            self._backoff_until[tp] = until

    def _drop_connection(self, leader: int) -> None:
        conn = self._connections.pop(leader, None)
        if conn is None:
            return
        for fd, key in list(self._selector.get_map().items()):
            if key.data == leader:
                self._selector.unregister(fd)
        conn.close()

    def close(self) -> None:
        for leader in list(self._connections):
            self._drop_connection(leader)
        self._inflight.clear()
        self._selector.close()
