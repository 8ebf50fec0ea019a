"""An in-memory ZooKeeper for ``broker.auth.zk_store`` tests whose point is an interleaving.

Real ZooKeeper delivers a watch when its event thread gets to it and answers a read when the
read's thread gets the answer back; to put a stale read, a delete and a watch delivery in one
exact order, the test needs both under its hand. ``FakeZkData`` holds the znodes (data, version,
ctime, sequential children); each ``FakeSession`` is one client's view of it with the kazoo calls
``AclZkStore`` makes. Watches fire only when the test calls ``deliver_watches()``. A ``ReadGate``
holds the next read of a path that finds data: the reader takes its answer, signals, and waits
for ``release()`` before returning it - a read made now and used later.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from types import SimpleNamespace

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from broker.auth.zk_store import AclZkStore

__all__ = ["FakeZkData", "FakeSession", "FakeAclStore", "ReadGate"]


@dataclass
class _Node:
    data: bytes
    version: int
    ctime: int


class ReadGate:
    """Holds the next read of ``path`` that finds a znode (module doc)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.session: "FakeSession | None" = None  # whose read it holds
        self.held = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def hold(self, session: "FakeSession") -> None:
        self.session = session
        self.held.set()
        if not self._released.wait(30):
            raise TimeoutError("the test never released the gated read")


class FakeZkData:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, _Node] = {}
        self._sequence = itertools.count()
        self._clock_ms = itertools.count(1)
        self._children_watches: dict[str, list] = {}
        self._pending: list = []  # watch callbacks waiting for deliver_watches()
        self.gate: ReadGate | None = None

    def deliver_watches(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for callback in pending:
            callback()

    def _changed_children(self, parent: str) -> None:  # under the lock
        self._pending.extend(self._children_watches.get(parent, ()))


class FakeSession:
    """The kazoo calls AclZkStore makes, against ``FakeZkData``."""

    def __init__(self, data: FakeZkData, name: str) -> None:
        self.data = data
        self.name = name

    def get(self, path: str):
        data = self.data
        with data._lock:
            node = data._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            answer = node.data, SimpleNamespace(version=node.version, ctime=node.ctime)
            gate = data.gate if data.gate is not None and data.gate.path == path else None
            if gate is not None:
                data.gate = None
        if gate is not None:
            gate.hold(self)
        return answer

    def get_children(self, path: str) -> list[str]:
        with self.data._lock:
            prefix = path.rstrip("/") + "/"
            return [p[len(prefix):] for p in self.data._nodes
                    if p.startswith(prefix) and "/" not in p[len(prefix):]]

    def ensure_path(self, path: str) -> None:
        parts = path.strip("/").split("/")
        with self.data._lock:
            for i in range(1, len(parts) + 1):
                self.data._nodes.setdefault("/" + "/".join(parts[:i]), _Node(b"", 0, next(self.data._clock_ms)))

    def create(self, path: str, value: bytes = b"", sequence: bool = False, makepath: bool = False) -> str:
        parent = path.rsplit("/", 1)[0]
        if makepath:
            self.ensure_path(parent)
        data = self.data
        with data._lock:
            if sequence:
                path = f"{path}{next(data._sequence):010d}"
            if path in data._nodes:
                raise NodeExistsError(path)
            data._nodes[path] = _Node(value, 0, next(data._clock_ms))
            data._changed_children(parent)
        return path

    def set(self, path: str, value: bytes, version: int = -1) -> None:
        with self.data._lock:
            node = self._expect(path, version)
            node.data, node.version = value, node.version + 1

    def delete(self, path: str, version: int = -1) -> None:
        with self.data._lock:
            self._expect(path, version)
            del self.data._nodes[path]
            self.data._changed_children(path.rsplit("/", 1)[0])

    def transaction(self) -> "_FakeTransaction":
        return _FakeTransaction(self)

    def _expect(self, path: str, version: int) -> _Node:
        node = self.data._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if version != -1 and node.version != version:
            raise BadVersionError(path)
        return node

    def add_listener(self, _listener) -> None:
        pass  # sessions here are never lost


class _FakeTransaction:
    """check / set_data / delete on distinct paths, all or none (kazoo's results list)."""

    def __init__(self, session: FakeSession) -> None:
        self._session = session
        self._ops: list[tuple[str, str, object, int]] = []

    def check(self, path: str, version: int) -> None:
        self._ops.append(("check", path, None, version))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.append(("set", path, value, version))

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(("delete", path, None, version))

    def commit(self) -> list:
        session, data = self._session, self._session.data
        with data._lock:
            for i, (_, path, _, version) in enumerate(self._ops):
                try:
                    session._expect(path, version)
                except (NoNodeError, BadVersionError) as exc:
                    return [RolledBackError()] * i + [exc] + [RolledBackError()] * (len(self._ops) - i - 1)
            for kind, path, value, _ in self._ops:
                node = data._nodes[path]
                if kind == "set":
                    node.data, node.version = value, node.version + 1
                elif kind == "delete":
                    del data._nodes[path]
                    data._changed_children(path.rsplit("/", 1)[0])
        return [True] * len(self._ops)


class FakeAclStore(AclZkStore):
    """``AclZkStore`` over a ``FakeSession``: change watches wait for ``deliver_watches()``."""

    def __init__(self, session: FakeSession) -> None:
        super().__init__(session, lambda: 0)
        self.session = session

    def watch_changes(self, callback):
        from broker.auth.zk_codec import CHANGE_PATHS
        with self.session.data._lock:
            for root in CHANGE_PATHS.values():
                self.session.data._children_watches.setdefault(root, []).append(callback)
                self.session.data._pending.append(callback)  # kazoo calls it once at once
        return []
