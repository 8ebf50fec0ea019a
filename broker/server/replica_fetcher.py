"""Follower fetchers over asyncio: the I/O shell of ``broker.replica.fetcher.FetchSession``.

``ReplicaFetcherManager`` is the replica manager's ``FollowerFetchers``: partitions are added
(with their leader and leader epoch) when this broker becomes a follower and removed when it
leads or stops. It keeps one ``FetchSession`` per leader broker and, in its ``run()`` TaskGroup,
one task per session with partitions (Kafka's ``ReplicaFetcherThread``; ``num.replica.fetchers``
is 1). A task loops: connect to the leader's advertised endpoint for our listener, send
OffsetForLeaderEpoch v3 for partitions still truncating, then Fetch v11 (``replica_id`` = this
broker, ``current_leader_epoch`` set so the leader fences stale followers), hand the answers to
the session, repeat. A failure closes the connection and the session backs off
(``replica.fetch.backoff.ms``). A task whose session has no partitions left ends; the manager
starts a new one when partitions come back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable, Mapping

from broker.replica.fetcher import (
    EpochEndOffset,
    FetchedPartition,
    FetcherSettings,
    FetchSession,
)
from broker.replica.manager import FetchTarget
from broker.server.inter_broker import InterBrokerConnection, InterBrokerError
from broker.server.metadata import MetadataCache
from broker.wire import ApiKey, FetchRequest, OffsetForLeaderEpochRequest

__all__ = ["ReplicaFetcherManager", "FETCH_VERSION", "OFFSET_FOR_LEADER_EPOCH_VERSION"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
FETCH_VERSION = 11  # current_leader_epoch (v9+), not flexible, topic names (v12 would do too)
OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # replica_id (v3+)
_Topic, _Part = FetchRequest.FetchTopic, FetchRequest.FetchPartition
_ETopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_EPart = OffsetForLeaderEpochRequest.OffsetForLeaderPartition


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, metadata: MetadataCache, listener_name: str,
                 settings: FetcherSettings, socket_timeout_ms: int, now_ms: Callable[[], int],
                 quota=None) -> None:
        self.broker_id = broker_id
        self.quota = quota  # the follower ReplicationQuota (replication throttles); None: none
        self._metadata = metadata
        self._listener = listener_name
        self.settings = settings
        self._timeout_s = socket_timeout_ms / 1000
        self._now_ms = now_ms
        self.get_partition: Callable = lambda topic, partition: None  # set by the broker
        self._sessions: dict[int, FetchSession] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._changed = asyncio.Event()
        self._running: set[int] = set()

    # ----------------------------------------------------------------- FollowerFetchers

    def add_partitions(self, targets: Mapping[TopicPartition, FetchTarget]) -> None:
        for tp, target in targets.items():
            for leader, session in self._sessions.items():
                if leader != target.leader_id:
                    session.remove(tp)
            session = self._sessions.get(target.leader_id)
            if session is None:
                session = FetchSession(self.broker_id, target.leader_id, self.get_partition, self.settings,
                                       self.quota)
                self._sessions[target.leader_id] = session
            session.add(tp, target.leader_epoch)
            self._wake(target.leader_id)
        self._changed.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            for session in self._sessions.values():
                session.remove(tp)

    def _wake(self, leader_id: int) -> None:
        event = self._wakeups.get(leader_id)
        if event is not None:
            event.set()

    def statistics(self) -> dict:
        return {"leaders": len([s for s in self._sessions.values() if s.partitions]),
                "partitions": sum(len(s.partitions) for s in self._sessions.values()),
                "fetch_tasks": len(self._running),
                "partition_max_bytes": self.settings.partition_max_bytes,
                "response_max_bytes": self.settings.response_max_bytes}

    def following(self) -> dict[TopicPartition, int]:
        """tp -> leader, for statistics and tests."""
        return {tp: leader for leader, s in self._sessions.items() for tp in s.partitions}

    # ------------------------------------------------------------------------------ run

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            while True:
                for leader, session in list(self._sessions.items()):
                    if session.partitions and leader not in self._running:
                        self._running.add(leader)
                        group.create_task(self._run_session(leader), name=f"replica-fetcher-{leader}")
                await self._changed.wait()
                self._changed.clear()

    async def _run_session(self, leader_id: int) -> None:
        session = self._sessions[leader_id]
        wakeup = self._wakeups.setdefault(leader_id, asyncio.Event())
        connection: InterBrokerConnection | None = None
        try:
            while session.partitions:
                wait_ms = session.next_ready_ms() - self._now_ms()
                if wait_ms > 0:
                    wakeup.clear()
                    try:
                        async with asyncio.timeout(wait_ms / 1000):
                            await wakeup.wait()
                    except TimeoutError:
                        pass
                    continue
                connection = connection or self._connect(leader_id)
                if connection is None:
                    session.on_failure(self._now_ms())
                    continue
                try:
                    sent = await self._round(session, connection)
                except InterBrokerError as exc:
                    logger.info("fetching from broker %d failed: %s", leader_id, exc)
                    await connection.close()
                    connection = None
                    session.on_failure(self._now_ms())
                    continue
                if not sent:  # nothing to ask (roles changing, or throttled): wait for news, briefly
                    wakeup.clear()
                    wait_s = self.settings.backoff_ms / 1000
                    if session.throttled_until_ms is not None:  # until the follower rate is back under
                        wait_s = min(wait_s, max(0.001, (session.throttled_until_ms - self._now_ms()) / 1000))
                    try:
                        async with asyncio.timeout(wait_s):
                            await wakeup.wait()
                    except TimeoutError:
                        pass
        finally:
            self._running.discard(leader_id)
            if connection is not None:
                await connection.close()
            if session.partitions:
                self._changed.set()  # partitions arrived as we left: start again

    def _connect(self, leader_id: int) -> InterBrokerConnection | None:
        endpoint = self._metadata.snapshot.endpoint(leader_id, self._listener)
        if endpoint is None:
            logger.info("no endpoint for leader %d yet", leader_id)
            return None
        return InterBrokerConnection(endpoint.host, endpoint.port, f"replica-fetcher-{self.broker_id}",
                                     self._timeout_s + self.settings.max_wait_ms / 1000)

    async def _round(self, session: FetchSession, connection: InterBrokerConnection) -> bool:
        """One truncation exchange (if needed) and one fetch; False if nothing was sent."""
        queries = session.epoch_requests(self._now_ms())
        if queries:
            response = await connection.request(
                ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION,
                OffsetForLeaderEpochRequest(replica_id=self.broker_id, topics=_epoch_topics(queries)))
            session.on_epoch_responses({(t.topic, p.partition): EpochEndOffset(p.error_code, p.leader_epoch,
                                                                              p.end_offset)
                                        for t in response.topics for p in t.partitions}, self._now_ms())
        fetches = session.fetch_requests(self._now_ms())
        if not fetches:
            return bool(queries)
        settings = self.settings
        request = FetchRequest(
            replica_id=self.broker_id, max_wait_ms=settings.max_wait_ms, min_bytes=settings.min_bytes,
            max_bytes=settings.response_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=_fetch_topics(fetches, settings.partition_max_bytes), forgotten_topics_data=[])
        response = await connection.request(ApiKey.FETCH, FETCH_VERSION, request)
        answers = {(t.topic, p.partition_index): FetchedPartition(
            p.error_code, p.high_watermark, p.log_start_offset, p.records or b"")
            for t in response.responses for p in t.partitions}
        session.on_fetch_responses(answers, self._now_ms())
        return True


def _epoch_topics(queries) -> list:
    by_topic: dict[str, list] = {}
    for q in queries:
        by_topic.setdefault(q.tp[0], []).append(_EPart(partition=q.tp[1], current_leader_epoch=q.current_leader_epoch,
                                                       leader_epoch=q.leader_epoch))
    return [_ETopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()]


def _fetch_topics(fetches, partition_max_bytes: int) -> list:
    by_topic: dict[str, list] = {}
    for f in fetches:
        by_topic.setdefault(f.tp[0], []).append(_Part(
            partition=f.tp[1], current_leader_epoch=f.current_leader_epoch, fetch_offset=f.fetch_offset,
            log_start_offset=f.log_start_offset, partition_max_bytes=partition_max_bytes))
    return [_Topic(topic=topic, partitions=parts) for topic, parts in by_topic.items()]
