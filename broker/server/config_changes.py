"""Dynamic configs in ZooKeeper, as Kafka's ZooKeeper mode keeps them: the shell around
``dynamic_config``.

Writes (AlterConfigs, IncrementalAlterConfigs) replace ``/config/<type>/<name>`` and add a
``/config/changes/config_change_N`` notification; every broker watches ``/config/changes`` and, for
each notification newer than the last it handled, re-reads the entity it names (Kafka's
``ZkConfigManager``): a topic's overrides reach the metadata cache and from there its logs and
partitions (``ReplicaManager.apply``); ``brokers/<default>`` and ``brokers/<own id>`` rebuild this
broker's configuration and apply it (``on_broker_config``); ``users``/``clients`` go to whoever
registered for them (quotas, SCRAM credentials). Notifications that existed at start-up are not
replayed: the start-up read already saw their result. As Kafka, each broker deletes notifications
older than 15 minutes whenever it handles new ones.

Kazoo is blocking: every ZooKeeper call runs in a worker thread; the watch only wakes the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Mapping

from kazoo.exceptions import KazooException

from broker.cluster.errors import ClusterError
from broker.cluster.zk import KafkaZkClient
from broker.server.dynamic_config import DEFAULT_BROKER, DynamicBrokerConfigs

__all__ = ["ConfigChangeService"]

logger = logging.getLogger(__name__)

RETRY_BACKOFF_MS = 500  # after a failed read of the notifications
CHANGE_EXPIRATION_MS = 15 * 60_000  # notifications older than this are deleted (Kafka's 15 min)


class ConfigChangeService:
    def __init__(self, zk: KafkaZkClient, broker_id: int, static: Mapping[str, str],
                 on_broker_config: Callable[[DynamicBrokerConfigs], Awaitable[None]],
                 request_topic_refresh: Callable[[set[str]], None]) -> None:
        self._zk = zk
        self._broker_id = str(broker_id)
        self.levels = DynamicBrokerConfigs(dict(static))
        self._on_broker_config = on_broker_config
        self._request_topic_refresh = request_topic_refresh
        self._listeners: dict[str, list[Callable[[str], None]]] = {}
        self._last_seen = -1
        self._wakeup = asyncio.Event()
        self._closed = False

    def add_listener(self, entity_type: str, callback: Callable[[str], None]) -> None:
        """Call ``callback(name)`` on the loop when ``/config/<entity_type>/<name>`` changed."""
        self._listeners.setdefault(entity_type, []).append(callback)

    # ------------------------------------------------------------------------- start-up

    async def load(self) -> DynamicBrokerConfigs:
        """Read this broker's dynamic levels (ZooKeeper errors propagate: start-up fails)."""
        self._last_seen = await asyncio.to_thread(self._zk.last_config_change)
        self.levels = await asyncio.to_thread(self._read_levels)
        return self.levels

    def start_watches(self, loop: asyncio.AbstractEventLoop) -> None:
        """Blocking: watch ``/config/changes`` (kazoo's thread only wakes the loop)."""
        def changed() -> bool | None:
            if self._closed:
                return False
            try:
                loop.call_soon_threadsafe(self._wakeup.set)
            except RuntimeError:
                return False
            return None
        self._zk.watch_config_changes(changed)

    def close(self) -> None:
        self._closed = True

    # ------------------------------------------------------------------------- reads/writes

    async def read(self, entity_type: str, name: str) -> dict[str, str]:
        return await asyncio.to_thread(self._zk.get_entity_config, entity_type, name)

    async def write(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace the entity's overrides and notify every broker (this one included)."""
        await asyncio.to_thread(self._zk.change_entity_config, entity_type, name, dict(config))

    # ------------------------------------------------------------------------- notifications

    async def run(self) -> None:
        """Handle notifications as they come, forever (cancel to stop)."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            try:
                await self._process()
            except (KazooException, ClusterError) as exc:
                logger.warning("reading config changes failed, retrying: %s", exc)
                await asyncio.sleep(RETRY_BACKOFF_MS / 1000)
                self._wakeup.set()

    async def _process(self) -> None:
        changes = await asyncio.to_thread(self._zk.get_config_changes, self._last_seen)
        if changes:
            await asyncio.to_thread(self._zk.purge_config_changes, CHANGE_EXPIRATION_MS, int(time.time() * 1000))
        broker_changed = False
        for number, entity_path in changes:
            self._last_seen = max(self._last_seen, number)
            entity_type, _, name = entity_path.partition("/")
            if entity_type == "topics":
                self._request_topic_refresh({name})
            elif entity_type == "brokers":
                broker_changed |= name in (DEFAULT_BROKER, self._broker_id)
            for callback in self._listeners.get(entity_type, ()):
                callback(name)
        if broker_changed:
            self.levels = await asyncio.to_thread(self._read_levels)
            logger.info("dynamic broker configs: default %s, broker %s",
                        dict(self.levels.cluster_default), dict(self.levels.per_broker))
            await self._on_broker_config(self.levels)

    def _read_levels(self) -> DynamicBrokerConfigs:
        return DynamicBrokerConfigs(self.levels.static,
                                    self._zk.get_entity_config("brokers", DEFAULT_BROKER),
                                    self._zk.get_entity_config("brokers", self._broker_id))
