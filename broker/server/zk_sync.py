"""Keep the ``MetadataCache`` in step with ZooKeeper, off the event loop's thread.

ZooKeeper watches (``/brokers/ids`` and ``/brokers/topics`` children) fire on kazoo's thread; the
callbacks only hand the new child list to the event loop (``call_soon_threadsafe``) and mark what
is stale. ``run()`` then re-reads the stale parts in a worker thread (kazoo is blocking), builds
a new snapshot and publishes it, and calls ``on_change`` (the broker applies it to its replicas
and its controller). A partition whose state znode does not exist yet (the controller writes it
just after the topic) is read again after ``STATE_RETRY_BACKOFF_MS``, doubling up to
``STATE_RETRY_BACKOFF_MAX_MS``; so is everything after a ZooKeeper error.

Partition state changes are not watched: brokers learn them from the controller (LeaderAndIsr
for their own partitions, UpdateMetadata for the cache), as in Kafka 2.x. A topic read here is
merged with the cached one, keeping any partition state that is newer by (leader epoch, znode
version), so a read that was in flight when an UpdateMetadata arrived never moves the cache back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from kazoo.exceptions import KazooException

from broker.cluster.errors import ClusterError, MalformedZnodeError, UnknownTopicOrPartitionError
from broker.cluster.layout import BrokerRegistration
from broker.cluster.zk import KafkaZkClient
from broker.server.metadata import (
    ClusterSnapshot,
    MetadataCache,
    TopicMetadata,
    merge_topic,
    parse_topic_id,
    topic_metadata,
)

__all__ = ["MetadataSync", "STATE_RETRY_BACKOFF_MS", "STATE_RETRY_BACKOFF_MAX_MS"]

logger = logging.getLogger(__name__)

STATE_RETRY_BACKOFF_MS = 50
STATE_RETRY_BACKOFF_MAX_MS = 5_000


@dataclass
class _Stale:
    """What the next refresh must read. ``topic_names`` is the watch's latest child list."""

    brokers: bool = True
    controller: bool = True
    topic_names: list[str] | None = None
    topics: set[str] = field(default_factory=set)

    def any(self) -> bool:
        return self.brokers or self.controller or self.topic_names is not None or bool(self.topics)


@dataclass
class _Read:
    brokers: dict[int, BrokerRegistration] | None
    controller_id: int | None
    topics: dict[str, TopicMetadata]
    gone: set[str]


class MetadataSync:
    def __init__(self, zk: KafkaZkClient, cache: MetadataCache,
                 on_change: Callable[[ClusterSnapshot], Awaitable[None]]) -> None:
        self._zk = zk
        self._cache = cache
        self._on_change = on_change
        self._stale = _Stale()
        self._wakeup = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backoff_ms = 0
        self._closed = False

    # ------------------------------------------------------------------ watches (kazoo thread)

    def start_watches(self, loop: asyncio.AbstractEventLoop) -> None:
        """Blocking: register the watches (each calls back once at once with the children)."""
        self._loop = loop
        self._zk.watch_broker_ids(lambda ids: self._from_kazoo(self._brokers_changed))
        self._zk.watch_topics(lambda names: self._from_kazoo(self._topics_changed, names))

    def _from_kazoo(self, callback, *args) -> bool | None:
        if self._closed:
            return False  # stops the kazoo watch
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: the broker is gone
            return False
        return None

    # ------------------------------------------------------------------- loop-side marking

    def _brokers_changed(self) -> None:
        self._stale.brokers = self._stale.controller = True  # a dead controller loses its node too
        self._wakeup.set()

    def _topics_changed(self, names: list[str]) -> None:
        self._stale.topic_names = list(names)
        self._wakeup.set()

    def request_refresh(self, topics: set[str] | None = None, controller: bool = False,
                        brokers: bool = False) -> None:
        """Ask for a re-read (the controller after writing a topic, handlers that met a topic
        this broker has not read yet)."""
        self._stale.topics |= set(topics or ())
        self._stale.controller |= controller
        self._stale.brokers |= brokers
        self._wakeup.set()

    # ------------------------------------------------------------------------------- run

    async def run(self) -> None:
        """Refresh on every watch event or request at once, and retry incomplete topics or a
        failed read after the backoff; forever (cancel to stop)."""
        while True:
            timeout_s = self._backoff_ms / 1000 if self._backoff_ms else None
            try:
                async with asyncio.timeout(timeout_s):
                    await self._wakeup.wait()
            except TimeoutError:
                pass
            self._wakeup.clear()
            await self.refresh()

    async def initial_load(self) -> ClusterSnapshot:
        """Read everything once, at start-up; ZooKeeper errors propagate (the broker cannot
        start without knowing which topics exist: it would delete logs it must keep)."""
        self._stale.topic_names = await asyncio.to_thread(self._zk.get_topics)
        self._stale.brokers = self._stale.controller = True
        return await self.refresh(raise_errors=True)

    async def refresh(self, raise_errors: bool = False) -> ClusterSnapshot:
        """Read what is stale and publish the result."""
        stale, self._stale = self._stale, _Stale(brokers=False, controller=False)
        snapshot = self._cache.snapshot
        to_read = set(stale.topics)
        if stale.topic_names is not None:
            to_read |= set(stale.topic_names) - set(snapshot.topics)
        try:
            read = await asyncio.to_thread(self._read, stale, sorted(to_read))
        except (KazooException, ClusterError) as exc:
            self._merge_back(stale)
            if raise_errors:
                raise
            logger.warning("reading cluster metadata from ZooKeeper failed, retrying: %s", exc)
            self._grow_backoff()
            return snapshot
        # Not the snapshot from before the read: UpdateMetadata may have been applied meanwhile.
        new = self._apply(self._cache.snapshot, stale, read)
        incomplete = {name for name, topic in new.topics.items() if not topic.complete}
        self._stale.topics |= incomplete
        if incomplete:
            self._grow_backoff()
        else:
            self._backoff_ms = 0
        self._cache.publish(new)
        await self._on_change(new)
        return new

    def _merge_back(self, stale: _Stale) -> None:
        self._stale.brokers |= stale.brokers
        self._stale.controller |= stale.controller
        self._stale.topics |= stale.topics
        if self._stale.topic_names is None:
            self._stale.topic_names = stale.topic_names

    def _grow_backoff(self) -> None:
        self._backoff_ms = min(max(STATE_RETRY_BACKOFF_MS, self._backoff_ms * 2), STATE_RETRY_BACKOFF_MAX_MS)

    def _apply(self, snapshot: ClusterSnapshot, stale: _Stale, read: _Read) -> ClusterSnapshot:
        topics = dict(snapshot.topics)
        if stale.topic_names is not None:
            for name in set(topics) - set(stale.topic_names):
                del topics[name]
        for name in read.gone:
            topics.pop(name, None)
        for name, topic in read.topics.items():
            topics[name] = merge_topic(topics.get(name), topic)
        changes: dict = {"topics": topics}
        if read.brokers is not None:
            changes["brokers"] = read.brokers
        if read.controller_id is not None:
            changes["controller_id"] = read.controller_id
        return snapshot.with_changes(**changes)

    # ------------------------------------------------------------------ reads (worker thread)

    def _read(self, stale: _Stale, topics: list[str]) -> _Read:
        brokers = self._zk.get_brokers() if stale.brokers else None
        controller_id = self._zk.get_controller_id() if stale.controller else None
        found: dict[str, TopicMetadata] = {}
        gone: set[str] = set()
        for name in topics:
            try:
                found[name] = self._read_topic(name)
            except UnknownTopicOrPartitionError:
                gone.add(name)
            except MalformedZnodeError as exc:
                logger.error("ignoring topic %s: %s", name, exc)
                gone.add(name)
        return _Read(brokers, controller_id, found, gone)

    def _read_topic(self, name: str) -> TopicMetadata:
        assignment = self._zk.get_topic_assignment(name)
        config = self._zk.get_topic_config(name)
        states = {}
        for index in assignment.partitions:
            try:
                states[index] = self._zk.get_partition_state(name, index)
            except UnknownTopicOrPartitionError:
                states[index] = None  # not written yet by the controller
        return topic_metadata(name, assignment.partitions, states, config,
                              parse_topic_id(assignment.topic_id))

    def close(self) -> None:
        self._closed = True
