"""``MarkerSender``: the transaction coordinator's WriteTxnMarkers to partition leaders (Kafka's
``TransactionMarkerChannelManager``).

A ``WriteMarkers`` effect names a producer's partitions and the result (COMMIT or ABORT). The
sender routes each partition to its current leader in this broker's metadata and groups what it
sends per destination broker: one queue and one sender task per broker, and one WriteTxnMarkers
request carries every marker queued for that broker when the task sends (many transactions'
markers in one round trip under load, as Kafka drains its per-broker queues). A marker whose
leader is this broker is written in-process (the WriteTxnMarkers handler called directly, no
socket); others go over an ``InterBrokerConnection`` to the leader's inter-broker listener.

Per partition, the answer decides:

- NONE: written.
- TRANSACTION_COORDINATOR_FENCED (a newer coordinator epoch has written to the partition's
  producer state) or INVALID_PRODUCER_EPOCH (the producer has a newer epoch there): this
  coordinator lost the transaction; the whole job is dropped and the core is not told (its
  partition was or will be unloaded; the new owner sends the markers), as Kafka aborts sending.
- UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION: written (Kafka's rule for leaders whose
  message format cannot hold markers).
- anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, a
  connection failure, a leader missing from the metadata): retried after a backoff that doubles
  from ``backoff_ms`` up to ``backoff_max_ms``, re-resolving the leader from the metadata (a
  refresh of the topic is requested first).

A partition of a topic that is no longer in the metadata (deleted) counts as written, as in Kafka.
When every partition of a job is written, ``on_written(marker_id)`` (given to ``run`` by the
coordinator that owns the sender) is called once.

Bounds: a job exists only for a transaction in PrepareCommit/PrepareAbort whose partition this
coordinator owns (at most one per transactional id: the core refuses a new transaction of an id
until its markers are written), and each of its partitions is in at most one place at a time
(queued for one destination, in flight, or waiting for its retry timer), so the per-broker queues
hold at most the partitions of those prepared transactions; a dropped job's entries are taken
out of the queues at once (``drop``). An unreachable destination does not make them grow: its
entries cycle through a failed send and a retry timer, one copy each.

Every task (per-broker senders, retry timers) belongs to the task group of ``run``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from broker.wire import ErrorCode

__all__ = ["MarkerSender", "MarkerJob", "WRITE_TXN_MARKERS_KEY", "WRITE_TXN_MARKERS_VERSION"]

logger = logging.getLogger(__name__)

# Kafka's TransactionMarkerRequestCompletionHandler: these answers end the job unreported (the
# transaction belongs to a newer coordinator or producer epoch, which completes it) ...
_ABORT_SENDING = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
# ... and a leader that cannot take markers at all (a message format before v2) counts as written.
_WRITTEN_ANYWAY = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})

WRITE_TXN_MARKERS_KEY = 27
WRITE_TXN_MARKERS_VERSION = 1  # Kafka 4 serves v1 only (KIP-896 removed v0)


@dataclass
class MarkerJob:
    """One ``WriteMarkers`` effect being carried out."""

    marker_id: int
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    remaining: set = field(default_factory=set)  # (topic, partition) not yet written
    in_flight: set = field(default_factory=set)  # queued or sent, answer pending
    backoff_ms: int = 0
    dropped: bool = False


@dataclass
class _Entry:
    job: MarkerJob
    partitions: list  # [(topic, partition)] led by the destination when routed


class MarkerSender:
    def __init__(self, broker_id: int, snapshot: Callable, listener_name: str,
                 local_write: Callable[[object], Awaitable[object]],
                 connect: Callable[[str, int], object],
                 request_refresh: Callable[..., None] = lambda **_: None,
                 backoff_ms: int = 20, backoff_max_ms: int = 1_000,
                 build_request: Callable | None = None, parse_response: Callable | None = None) -> None:
        """``snapshot()``: this broker's current ``ClusterSnapshot``; ``local_write(request)``: the
        WriteTxnMarkers handler of this broker; ``connect(host, port)``: a new connection with
        ``async request(api_key, version, body)`` and ``async close()``."""
        self._broker_id = broker_id
        self._snapshot = snapshot
        self._listener = listener_name
        self._local_write = local_write
        self._connect = connect
        self._on_written: Callable[[int], None] = lambda marker_id: None  # set by ``run``
        self._request_refresh = request_refresh
        self._backoff_ms = backoff_ms
        self._backoff_max_ms = backoff_max_ms
        self._build = build_request or build_marker_request
        self._parse = parse_response or parse_marker_response
        self._jobs: dict[int, MarkerJob] = {}
        self._queues: dict[int, list[_Entry]] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._group: asyncio.TaskGroup | None = None
        self._pending_start: list = []
        self.sent_requests = 0
        self.retries = 0

    # -------------------------------------------------------------------------------- input

    def submit(self, job: MarkerJob, partitions) -> None:
        """Start writing ``job``'s markers to ``partitions``."""
        job.remaining = set(partitions)
        self._jobs[job.marker_id] = job
        self._route(job, set(job.remaining))

    def pending(self) -> int:
        return len(self._jobs)

    def drop(self, marker_ids) -> None:
        """Stop the jobs ``marker_ids`` (their ``__transaction_state`` partition was unloaded:
        its new coordinator completes them) instead of retrying them for ever: a dropped job
        is skipped when its destination sends and its retry timer does nothing."""
        for marker_id in marker_ids:
            job = self._jobs.pop(marker_id, None)
            if job is not None:
                job.dropped = True
        for broker, entries in list(self._queues.items()):
            self._queues[broker] = [e for e in entries if not e.job.dropped]

    def queued(self) -> int:
        """Partitions waiting in the per-broker queues (see Bounds in the module docstring)."""
        return sum(len(e.partitions) for entries in self._queues.values() for e in entries)

    def clear(self) -> None:
        """Forget every job (shutdown)."""
        for job in self._jobs.values():
            job.dropped = True
        self._jobs.clear()
        self._queues.clear()

    # ------------------------------------------------------------------------------ routing

    def _route(self, job: MarkerJob, partitions: set) -> None:
        snapshot = self._snapshot()
        unrouted = []
        by_leader: dict[int, list] = {}
        for key in sorted(partitions):
            topic = snapshot.topics.get(key[0])
            if topic is None:
                job.remaining.discard(key)  # deleted topic: counts as written
                continue
            view = topic.partitions.get(key[1])
            leader = -1 if view is None or view.state is None else view.state.leader
            if leader < 0 or (leader != self._broker_id and snapshot.endpoint(leader, self._listener) is None):
                unrouted.append(key)
                continue
            by_leader.setdefault(leader, []).append(key)
        for leader, keys in by_leader.items():
            job.in_flight.update(keys)
            self._queues.setdefault(leader, []).append(_Entry(job, keys))
            self._wake(leader)
        if unrouted:
            self._retry_later(job, unrouted)
        self._maybe_done(job)

    def _maybe_done(self, job: MarkerJob) -> None:
        if job.dropped or job.remaining or self._jobs.get(job.marker_id) is not job:
            return
        del self._jobs[job.marker_id]
        self._on_written(job.marker_id)

    def _retry_later(self, job: MarkerJob, keys) -> None:
        self.retries += 1
        job.backoff_ms = min(self._backoff_max_ms, max(self._backoff_ms, job.backoff_ms * 2))
        self._request_refresh(topics={k[0] for k in keys})
        self._spawn(self._retry(job, set(keys), job.backoff_ms), f"txn-marker-retry-{job.marker_id}")

    async def _retry(self, job: MarkerJob, keys: set, delay_ms: int) -> None:
        await asyncio.sleep(delay_ms / 1000)
        if not job.dropped and self._jobs.get(job.marker_id) is job:
            self._route(job, keys & job.remaining)

    # ---------------------------------------------------------------------- per destination

    def _wake(self, broker: int) -> None:
        event = self._wakeups.get(broker)
        if event is None:
            event = self._wakeups[broker] = asyncio.Event()
            self._spawn(self._destination(broker, event), f"txn-markers-to-{broker}")
        event.set()

    async def _destination(self, broker: int, wakeup: asyncio.Event) -> None:
        """Send everything queued for ``broker`` as one request, then wait for more."""
        connection = None
        try:
            while True:
                await wakeup.wait()
                wakeup.clear()
                entries = [e for e in self._queues.pop(broker, []) if not e.job.dropped]
                if not entries:
                    continue
                request = self._build(entries)
                self.sent_requests += 1
                try:
                    if broker == self._broker_id:
                        response = await self._local_write(request)
                    else:
                        connection = await self._connection(broker, connection)
                        response = await connection.request(WRITE_TXN_MARKERS_KEY, WRITE_TXN_MARKERS_VERSION,
                                                            request)
                    errors = self._parse(response)
                except Exception as exc:  # a connection or leader failure: every marker retries
                    logger.info("WriteTxnMarkers to broker %d failed: %s; retrying", broker, exc)
                    if connection is not None:
                        await connection.close()
                        connection = None
                    errors = {}
                self._complete(entries, errors)
        finally:
            self._wakeups.pop(broker, None)
            if connection is not None:
                await connection.close()

    async def _connection(self, broker: int, connection):
        endpoint = self._snapshot().endpoint(broker, self._listener)
        if endpoint is None:
            raise ConnectionError(f"broker {broker} has no {self._listener} endpoint")
        if connection is not None and (connection.host, connection.port) != (endpoint.host, endpoint.port):
            await connection.close()
            connection = None
        return connection or self._connect(endpoint.host, endpoint.port)

    def _complete(self, entries: list[_Entry], errors: dict) -> None:
        """``errors``: (producer id, topic, partition) -> error code; a partition missing from
        it was not answered and retries."""
        for entry in entries:
            job = entry.job
            job.in_flight.difference_update(entry.partitions)
            if job.dropped:
                continue
            failed = []
            for key in entry.partitions:
                error = errors.get((job.producer_id, *key), ErrorCode.REQUEST_TIMED_OUT)
                if error == ErrorCode.NONE:
                    job.remaining.discard(key)
                elif error in _WRITTEN_ANYWAY:
                    job.remaining.discard(key)
                elif error in _ABORT_SENDING:
                    logger.warning("markers of producer %d (epoch %d, coordinator epoch %d) refused at %s-%d "
                                   "with %s; a newer coordinator or producer epoch owns the transaction",
                                   job.producer_id, job.producer_epoch, job.coordinator_epoch, *key,
                                   ErrorCode(error).name)
                    job.dropped = True
                    self._jobs.pop(job.marker_id, None)
                    break
                else:
                    failed.append(key)
            if job.dropped:
                continue
            if failed:
                self._retry_later(job, failed)
            else:
                job.backoff_ms = 0
            self._maybe_done(job)

    # ---------------------------------------------------------------------------- lifecycle

    def _spawn(self, coroutine, name: str) -> None:
        if self._group is None:
            self._pending_start.append((coroutine, name))
            return
        self._group.create_task(coroutine, name=name)

    async def run(self, on_written: Callable[[int], None]) -> None:
        """Serve until cancelled; owns every sender and retry task. ``on_written(marker_id)``:
        every partition of that job has its marker (the coordinator completes the transaction)."""
        self._on_written = on_written
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                pending, self._pending_start = self._pending_start, []
                for coroutine, name in pending:
                    group.create_task(coroutine, name=name)
                await asyncio.Event().wait()
            finally:
                self._group = None


def build_marker_request(entries: list[_Entry]):
    """One WriteTxnMarkers request (v1) for ``entries``: one marker per job, its partitions by
    topic."""
    from broker.wire import WriteTxnMarkersRequest
    marker_type, topic_type = _nested(WriteTxnMarkersRequest, "WritableTxnMarker", "WritableTxnMarkerTopic")
    markers = []
    for entry in entries:
        job = entry.job
        by_topic: dict[str, list[int]] = {}
        for topic, partition in entry.partitions:
            by_topic.setdefault(topic, []).append(partition)
        markers.append(marker_type(
            producer_id=job.producer_id, producer_epoch=job.producer_epoch,
            transaction_result=job.committed,
            topics=[topic_type(name=t, partition_indexes=p) for t, p in by_topic.items()],
            coordinator_epoch=job.coordinator_epoch))
    return WriteTxnMarkersRequest(markers=markers)


def parse_marker_response(response) -> dict:
    """(producer id, topic, partition) -> error code of a WriteTxnMarkers response."""
    errors = {}
    for marker in response.markers:
        for topic in marker.topics:
            for partition in topic.partitions:
                errors[(marker.producer_id, topic.name, partition.partition_index)] = partition.error_code
    return errors


def _nested(cls, *names):
    """The spec's nested struct classes, by Kafka's JSON names (or the field's own name)."""
    out = []
    for name in names:
        nested = getattr(cls, name, None)
        if nested is None:
            raise AttributeError(f"{cls.__name__} has no nested type {name}")
        out.append(nested)
    return out
