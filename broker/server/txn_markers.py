"""``MarkerSender``: the transaction coordinator's WriteTxnMarkers to partition leaders (Kafka's
``TransactionMarkerChannelManager``).

A ``WriteMarkers`` effect names a producer's partitions and the result (COMMIT or ABORT). The
sender has two kinds of task:

- **One task per job** (``_write_all``), a plain loop that is the whole retry story: route the
  partitions not yet written to their current leaders in this broker's metadata, send each
  leader its share and wait for every answer, drop the written ones; while some are left, back
  off (doubling from ``backoff_ms`` up to ``backoff_max_ms``, a metadata refresh of their topics
  requested) and go round again. When none is left it calls ``on_written(marker_id)``, once.
- **One task per destination broker** (``_destination``): the batching. A job's share for a
  broker is queued there with a future; the broker's task sends everything queued when it
  wakes as one WriteTxnMarkers request (many transactions' markers in one round trip under
  load, as Kafka drains its per-broker queues) and answers each share's future with the
  response's errors (none on a failed send: every partition of it retries). A marker whose
  leader is this broker is written in-process (the WriteTxnMarkers handler called directly, no
  socket); others go over an ``InterBrokerConnection`` to the leader's inter-broker listener.

Per partition, the answer decides:

- NONE: written.
- TRANSACTION_COORDINATOR_FENCED (a newer coordinator epoch has written to the partition's
  producer state) or INVALID_PRODUCER_EPOCH (the producer has a newer epoch there): this
  coordinator lost the transaction; the job ends and the core is not told (its partition was
  or will be unloaded; the new owner sends the markers), as Kafka aborts sending.
- UNSUPPORTED_FOR_MESSAGE_FORMAT / UNSUPPORTED_VERSION: written (Kafka's rule for leaders whose
  message format cannot hold markers).
- anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, no
  answer, a connection failure, a leader missing from the metadata): retried next round,
  re-resolving the leader.

A partition of a topic that is no longer in the metadata (deleted) counts as written, as in Kafka.

Restart and leader change of the coordinator itself are not this module's: a job lives only
while its ``__transaction_state`` partition is led here. On unload, ``drop`` cancels its task
(the new leader's core resumes every Prepare* transaction it loads with a new ``WriteMarkers``,
which is a new job there); markers are idempotent at the partition, so writing one twice (old
and new coordinator) is harmless, and a marker of the deposed coordinator epoch is refused.

Bounds: a job exists only for a transaction in PrepareCommit/PrepareAbort whose partition this
coordinator owns (at most one per transactional id: the core refuses a new transaction of an id
until its markers are written), and each of its partitions is in at most one place at a time
(in one share queued or in flight, or in the job's backoff), so the per-broker queues hold at
most the partitions of those prepared transactions; a dropped job's shares leave the queues at
once. An unreachable destination does not make them grow: a job waits for its share's answer
(a failed send) before it retries.

Every task belongs to the task group of ``run``; work submitted before ``run`` starts with it.
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
    dropped: bool = False


@dataclass
class _Entry:
    """A job's share for one destination: its partitions led there, answered by ``answer``
    ((producer id, topic, partition) -> error code) when the destination's request returns."""

    job: MarkerJob
    partitions: list
    answer: asyncio.Future


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
        self._tasks: dict[int, asyncio.Task] = {}  # marker id -> its _write_all (once run started)
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
        self._spawn(self._write_all(job), f"txn-markers-{job.marker_id}", job.marker_id)

    def pending(self) -> int:
        return len(self._jobs)

    def drop(self, marker_ids) -> None:
        """Stop the jobs ``marker_ids`` (their ``__transaction_state`` partition was unloaded:
        its new coordinator completes them) instead of retrying them for ever."""
        for marker_id in marker_ids:
            job = self._jobs.pop(marker_id, None)
            if job is not None:
                self._stop(job)
        self._prune_queues()

    def queued(self) -> int:
        """Partitions waiting in the per-broker queues (see Bounds in the module docstring)."""
        return sum(len(e.partitions) for entries in self._queues.values() for e in entries)

    def clear(self) -> None:
        """Forget every job (shutdown)."""
        for job in self._jobs.values():
            self._stop(job)
        self._jobs.clear()
        self._queues.clear()

    def _stop(self, job: MarkerJob) -> None:
        job.dropped = True
        task = self._tasks.pop(job.marker_id, None)
        if task is not None:
            task.cancel()

    def _prune_queues(self) -> None:
        for broker, entries in list(self._queues.items()):
            self._queues[broker] = [e for e in entries if not e.job.dropped]

    # ------------------------------------------------------------------------------- a job

    async def _write_all(self, job: MarkerJob) -> None:
        """Send, and resend what failed, until every partition of ``job`` is written; then
        report it once. Ends early (unreported) when the job is dropped or fenced."""
        backoff_ms = 0
        while not job.dropped:
            shares, failed = self._route(job)
            answers = [(keys, self._queue(leader, job, keys)) for leader, keys in shares.items()]
            for keys, answer in answers:
                errors = await answer
                for key in keys:
                    error = errors.get((job.producer_id, *key), ErrorCode.REQUEST_TIMED_OUT)
                    if error == ErrorCode.NONE or error in _WRITTEN_ANYWAY:
                        job.remaining.discard(key)
                    elif error in _ABORT_SENDING:
                        return self._fenced(job, key, error)
                    else:
                        failed.append(key)
            if job.dropped:
                return
            if not job.remaining:
                self._finish(job)
                return
            self.retries += 1
            backoff_ms = min(self._backoff_max_ms, max(self._backoff_ms, backoff_ms * 2))
            self._request_refresh(topics={key[0] for key in failed})
            await asyncio.sleep(backoff_ms / 1000)

    def _route(self, job: MarkerJob) -> tuple[dict[int, list], list]:
        """({leader: partitions}, partitions without a reachable leader) of ``job.remaining``;
        a deleted topic's partitions leave ``remaining`` (written, as in Kafka)."""
        snapshot = self._snapshot()
        shares: dict[int, list] = {}
        unrouted = []
        for key in sorted(job.remaining):
            topic = snapshot.topics.get(key[0])
            if topic is None:
                job.remaining.discard(key)
                continue
            view = topic.partitions.get(key[1])
            leader = -1 if view is None or view.state is None else view.state.leader
            if leader < 0 or (leader != self._broker_id and snapshot.endpoint(leader, self._listener) is None):
                unrouted.append(key)
            else:
                shares.setdefault(leader, []).append(key)
        return shares, unrouted

    def _queue(self, broker: int, job: MarkerJob, keys: list) -> asyncio.Future:
        """Queue ``keys`` for ``broker``'s next request; the future of its errors by (producer
        id, topic, partition)."""
        answer = asyncio.get_running_loop().create_future()
        self._queues.setdefault(broker, []).append(_Entry(job, keys, answer))
        self._wake(broker)
        return answer

    def _fenced(self, job: MarkerJob, key, error: int) -> None:
        logger.warning("markers of producer %d (epoch %d, coordinator epoch %d) refused at %s-%d with %s; "
                       "a newer coordinator or producer epoch owns the transaction",
                       job.producer_id, job.producer_epoch, job.coordinator_epoch, *key, ErrorCode(error).name)
        job.dropped = True
        self._forget(job)

    def _finish(self, job: MarkerJob) -> None:
        if self._jobs.get(job.marker_id) is job:
            self._forget(job)
            self._on_written(job.marker_id)

    def _forget(self, job: MarkerJob) -> None:
        if self._jobs.get(job.marker_id) is job:
            del self._jobs[job.marker_id]
        self._tasks.pop(job.marker_id, None)

    # ---------------------------------------------------------------------- per destination

    def _wake(self, broker: int) -> None:
        event = self._wakeups.get(broker)
        if event is None:
            event = self._wakeups[broker] = asyncio.Event()
            self._spawn(self._destination(broker, event), f"txn-markers-to-{broker}")
        event.set()

    async def _destination(self, broker: int, wakeup: asyncio.Event) -> None:
        """Send everything queued for ``broker`` as one request, answer each share, then wait
        for more."""
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
                for entry in entries:
                    if not entry.answer.done():
                        entry.answer.set_result(errors)
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

    # ---------------------------------------------------------------------------- lifecycle

    def _spawn(self, coroutine, name: str, marker_id: int | None = None) -> None:
        if self._group is None:
            self._pending_start.append((coroutine, name, marker_id))
            return
        task = self._group.create_task(coroutine, name=name)
        if marker_id is not None:
            self._tasks[marker_id] = task

    async def run(self, on_written: Callable[[int], None]) -> None:
        """Serve until cancelled; owns every job and destination task. ``on_written(marker_id)``:
        every partition of that job has its marker (the coordinator completes the transaction)."""
        self._on_written = on_written
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                pending, self._pending_start = self._pending_start, []
                for coroutine, name, marker_id in pending:
                    if marker_id is not None and marker_id not in self._jobs:
                        coroutine.close()  # dropped before it started
                        continue
                    self._spawn(coroutine, name, marker_id)
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
