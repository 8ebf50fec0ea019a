"""Client quotas from ZooKeeper: the shell around ``quota.ClientQuotas``.

At start-up every quota entity is read (``/config/users/*``, ``/config/users/*/clients/*``,
``/config/clients/*``); afterwards the dynamic-config watcher (``config_changes``) names each
changed ``users/...`` or ``clients/...`` entity and only that one is read again, so a quota
applies without restart. Writes go through ``KafkaZkClient.change_entity_config``, which adds the
``/config/changes`` notification as Kafka's ``AdminZkClient`` does.

Kazoo is blocking: every read runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import NoNodeError

from broker.cluster.zk import KafkaZkClient
from broker.server.quota import ClientQuotas, QuotaSettings

__all__ = ["QuotaStore", "entity_of_path"]

logger = logging.getLogger(__name__)


def entity_of_path(entity_type: str, name: str) -> tuple[str | None, str | None] | None:
    """``("users", "alice/clients/app")`` -> ``("alice", "app")``; None for a path that is no
    quota entity."""
    if entity_type == "clients":
        return (None, name) if "/" not in name else None
    if entity_type == "users":
        user, sep, rest = name.partition("/clients/")
        if not sep:
            return (name, None) if "/" not in name else None
        return (user, rest) if rest and "/" not in rest else None
    return None


class QuotaStore:
    def __init__(self, zk: KafkaZkClient, settings: QuotaSettings) -> None:
        self._zk = zk
        self.quotas = ClientQuotas(settings)
        self._tasks: set[asyncio.Task] = set()

    async def load(self) -> None:
        for (user, client), config in (await asyncio.to_thread(self.read_all)).items():
            self.quotas.set_entity(user, client, config)
        if self.quotas.entities:
            logger.info("client quotas: %s", self.quotas.entities)

    def on_change(self, entity_type: str):
        """The ``config_changes`` listener for ``entity_type`` (users or clients)."""
        def changed(name: str) -> None:
            entity = entity_of_path(entity_type, name)
            if entity is not None:
                task = asyncio.get_running_loop().create_task(self._reload(entity_type, name, entity))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        return changed

    async def _reload(self, entity_type: str, name: str, entity) -> None:
        try:
            config = await asyncio.to_thread(self._zk.get_entity_config, entity_type, name)
        except Exception as exc:  # noqa: BLE001 - logged; the next change reads it again
            logger.warning("reading the quotas of %s/%s failed: %s", entity_type, name, exc)
            return
        self.quotas.set_entity(*entity, config)
        logger.info("client quotas of %s/%s: %s", entity_type, name, config)

    def read_all(self) -> dict:
        """Every quota entity's config, ``(user, client) -> {key: value}`` (blocking)."""
        kazoo, found = self._zk._zk, {}
        for user in _children(kazoo, "/config/users"):
            found[(user, None)] = self._zk.get_entity_config("users", user)
            for client in _children(kazoo, f"/config/users/{user}/clients"):
                found[(user, client)] = self._zk.get_entity_config("users", f"{user}/clients/{client}")
        for client in _children(kazoo, "/config/clients"):
            found[(None, client)] = self._zk.get_entity_config("clients", client)
        return found


def _children(kazoo, path: str) -> list[str]:
    try:
        return kazoo.get_children(path)
    except NoNodeError:
        return []
