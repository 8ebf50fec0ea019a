"""SCRAM credentials in ZooKeeper, where Kafka keeps them: ``/config/users/<name>`` holds
``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``
next to the user's other configs (quotas), which an update keeps. After a change a
``/config/changes/config_change_<n>`` notification ``{"version":2,"entity_path":"users/<name>"}``
is written, as Kafka's ``AdminZkClient.changeConfigs`` does, so Kafka brokers on the same
ZooKeeper (and pylog's dynamic-config watcher) see it.

Brokers read the znode at each SCRAM authentication instead of caching it: a ZooKeeper read is
well under a millisecond next to the 4096 PBKDF2 iterations the client spends, a deleted or
changed credential takes effect on the next login, and there is no cache to invalidate.
Blocking kazoo calls run in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import json

from kazoo.exceptions import NoNodeError, NodeExistsError

from broker.security.scram import MECHANISMS, ScramCredential

__all__ = ["CredentialStore", "USERS_PATH"]

USERS_PATH = "/config/users"
_CHANGE_PREFIX = "/config/changes/config_change_"


class CredentialStore:
    """``kazoo``: a started ``KazooClient`` (the broker's session)."""

    def __init__(self, kazoo) -> None:
        self._zk = kazoo

    async def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        config = await asyncio.to_thread(self.user_config, user)
        text = config.get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_text(text)
        except ValueError:
            return None  # a damaged entry logs no one in (and names no secret)

    def user_config(self, user: str) -> dict[str, str]:
        try:
            data, _ = self._zk.get(f"{USERS_PATH}/{user}")
        except NoNodeError:
            return {}
        try:
            return dict(json.loads(data.decode()).get("config", {}))
        except (ValueError, AttributeError):
            return {}

    def users(self) -> list[str]:
        try:
            return sorted(self._zk.get_children(USERS_PATH))
        except NoNodeError:
            return []

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        """The user's SCRAM credentials by mechanism (blocking)."""
        out = {}
        for mechanism, text in self.user_config(user).items():
            if mechanism in MECHANISMS:
                try:
                    out[mechanism] = ScramCredential.from_text(text)
                except ValueError:
                    pass
        return out

    def alter(self, user: str, upsert: dict[str, ScramCredential], delete: list[str]) -> None:
        """Set and remove mechanisms of one user, keeping its other configs (blocking)."""
        path = f"{USERS_PATH}/{user}"
        config = self.user_config(user)
        for mechanism in delete:
            config.pop(mechanism, None)
        for mechanism, credential in upsert.items():
            config[mechanism] = credential.to_text()
        data = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
        try:
            self._zk.set(path, data)
        except NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except NodeExistsError:
                self._zk.set(path, data)
        change = json.dumps({"version": 2, "entity_path": f"users/{user}"}, separators=(",", ":")).encode()
        self._zk.create(_CHANGE_PREFIX, change, sequence=True, makepath=True)
