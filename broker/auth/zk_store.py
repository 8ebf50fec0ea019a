"""ACLs in ZooKeeper (layout: ``zk_codec``), and the shell that keeps a broker's authorizer in
step with them.

``AclZkStore`` is blocking (kazoo): the broker calls it from worker threads, ``pylog acls`` directly.
Writes are compare-and-set on the pattern znode's version and its resource type znode's (two
admins adding ACLs to one topic at once both land; ``_update`` says why two versions), then a
change notification. ``AclSync`` is the broker's watcher and the only writer of its authorizer's
index: it loads every ACL at start, then on each new notification (and for the patterns this
broker's ACL handlers just wrote) re-reads only the patterns named, builds a new immutable
``AclIndex`` and hands it to the ``Authorizer``, one refresh at a time; a ZooKeeper session that
comes back after a loss, or a failed refresh, triggers a full reload (notifications may have been
missed and purged).
Notifications older than ``ACL_CHANGE_EXPIRATION_MS`` (Kafka's 15 minutes) are deleted by the
writer, so the change directories stay bounded.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.recipe.watchers import ChildrenWatch

from broker.auth.acl import AclBinding, AclBindingFilter, PatternType, ResourcePattern
from broker.auth.authorizer import AclIndex, Authorizer
from broker.auth.zk_codec import (
    ACL_ROOTS,
    CHANGE_PATHS,
    CHANGE_PREFIX,
    change_path,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    pattern_path,
    type_from_path,
)

__all__ = ["AclZkStore", "AclSync", "ACL_CHANGE_EXPIRATION_MS"]

log = logging.getLogger(__name__)

ACL_CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_CAS_ATTEMPTS_MAX = 20
# after a failed refresh, a full reload this much later, doubling while they keep failing (a
# ZooKeeper outage logs one line per try, not a stream); a session that comes back reloads at once
ACL_RETRY_BACKOFF_MS = 1000
ACL_RETRY_BACKOFF_MAX_MS = 10_000


class AclZkStore:
    """Read and write ACLs where Kafka's ZooKeeper authorizer kept them (blocking)."""

    def __init__(self, zk: KazooClient, now_ms: Callable[[], int]) -> None:
        self._zk = zk
        self._now_ms = now_ms

    def ensure_paths(self) -> None:
        for path in (*ACL_ROOTS.values(), *CHANGE_PATHS.values()):
            self._zk.ensure_path(path)

    def read_pattern(self, pattern: ResourcePattern):
        """The pattern's entries and znode version (-1: no znode)."""
        try:
            data, stat = self._zk.get(pattern_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return decode_acls(data), stat.version

    def load_all(self) -> AclIndex:
        by_pattern = {}
        for pattern_type, root in ACL_ROOTS.items():
            for type_name in self._children(root):
                try:
                    resource_type = type_from_path(type_name)
                except ValueError:
                    log.warning("ignoring %s/%s: not a resource type", root, type_name)
                    continue
                for name in self._children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    try:
                        by_pattern[pattern] = self.read_pattern(pattern)[0]
                    except ValueError as exc:
                        log.warning("ignoring malformed ACL znode %s: %s", pattern_path(pattern), exc)
        return AclIndex(by_pattern)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        by_pattern: dict[ResourcePattern, set] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
        for pattern, entries in by_pattern.items():
            self._update(pattern, lambda current, new=entries: current | new)

    def remove(self, acl_filter: AclBindingFilter, index: AclIndex | None = None) -> list[AclBinding]:
        """Delete every stored ACL the filter matches; return them."""
        index = self.load_all() if index is None else index
        gone_by_pattern: dict[ResourcePattern, set] = {}
        patterns = {b.pattern for b in index.bindings(acl_filter)}
        for pattern in patterns:
            def without(current, pattern=pattern):  # per attempt: only the one that lands counts
                gone = gone_by_pattern[pattern] = {e for e in current if acl_filter.matches(AclBinding(pattern, e))}
                return current - gone
            self._update(pattern, without)
        return [AclBinding(pattern, entry) for pattern, gone in gone_by_pattern.items() for entry in gone]

    def _update(self, pattern: ResourcePattern, change) -> None:
        """Compare-and-set the pattern's znode to ``change(current)``; delete it when empty; then
        notify every broker.

        The znode version alone cannot tell a znode from one deleted and created again since it
        was read (versions restart at 0), and a set that matched such a version would write a
        stale set over newer ACLs - revoked ones back in force. So a delete also bumps the data
        version of the resource type's znode (``/kafka-acl/Topic``: no data, in Kafka's layout
        too), and a set checks that version in the same ZooKeeper transaction."""
        path = pattern_path(pattern)
        parent = path.rsplit("/", 1)[0]
        for _ in range(_CAS_ATTEMPTS_MAX):
            parent_version = self._version(parent)
            current, version = self._read_for_update(pattern)
            new = frozenset(change(current))
            if new == current:
                return
            try:
                if version < 0:
                    self._zk.create(path, encode_acls(new), makepath=True)
                elif not new:
                    transaction = self._zk.transaction()
                    transaction.delete(path, version=version)
                    transaction.set_data(parent, b"", version=parent_version)
                    _commit(transaction)
                else:
                    transaction = self._zk.transaction()
                    transaction.check(parent, parent_version)
                    transaction.set_data(path, encode_acls(new), version=version)
                    _commit(transaction)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # someone else changed it: read again
        else:
            raise RuntimeError(f"{path} kept changing under us ({_CAS_ATTEMPTS_MAX} attempts)")
        self._zk.create(change_path(pattern), encode_change(pattern), sequence=True, makepath=True)
        self._purge_old_changes(pattern.pattern_type)

    def _read_for_update(self, pattern: ResourcePattern):
        return self.read_pattern(pattern)

    def _version(self, path: str) -> int:
        try:
            return self._zk.get(path)[1].version
        except NoNodeError:
            return -1

    def _purge_old_changes(self, pattern_type: PatternType) -> None:
        root = CHANGE_PATHS[pattern_type]
        oldest_ms = self._now_ms() - ACL_CHANGE_EXPIRATION_MS
        for child in self._children(root):
            try:
                _, stat = self._zk.get(f"{root}/{child}")
                if stat.ctime < oldest_ms:
                    self._zk.delete(f"{root}/{child}")
            except NoNodeError:
                pass

    def changes_after(self, root: str, after: int) -> list[tuple[int, ResourcePattern]]:
        """The notifications under ``root`` numbered above ``after``, oldest first."""
        found = []
        for child in self._children(root):
            if not child.startswith(CHANGE_PREFIX) or not child[len(CHANGE_PREFIX):].isdigit():
                continue
            number = int(child[len(CHANGE_PREFIX):])
            if number <= after:
                continue
            try:
                data, _ = self._zk.get(f"{root}/{child}")
                found.append((number, decode_change(root, data)))
            except NoNodeError:
                continue
            except ValueError as exc:
                log.warning("ignoring ACL change %s/%s: %s", root, child, exc)
        return sorted(found, key=lambda item: item[0])

    def last_change(self, root: str) -> int:
        numbers = [int(c[len(CHANGE_PREFIX):]) for c in self._children(root)
                   if c.startswith(CHANGE_PREFIX) and c[len(CHANGE_PREFIX):].isdigit()]
        return max(numbers, default=-1)

    def watch_changes(self, callback: Callable[[], None]) -> list[ChildrenWatch]:
        return [ChildrenWatch(self._zk, root, lambda _children: callback()) for root in CHANGE_PATHS.values()]

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._zk.get_children(path))
        except NoNodeError:
            return []


class AclSync:
    """Keeps ``authorizer``'s index equal to ZooKeeper's ACLs (module doc). Run ``run()`` as
    one of the broker's tasks after ``start()``; it ends when cancelled.

    It is the only writer of the authorizer's index, and its refreshes run one at a time: each
    reads ZooKeeper (through the broker's one session, whose reads never go back in time) after
    the previous one's reads, and its index is published before the next begins. So a pattern's
    entries in the index only ever move forward. A handler that just wrote ACLs asks for its
    patterns through ``refresh`` instead of reading and publishing them itself: a read of its own
    published after the sync had applied a newer state (another broker's change, notification
    already seen) left the older ACLs in force until that pattern changed again - a revoked ACL
    still allowing, in a quiet cluster for good."""

    def __init__(self, store: AclZkStore, authorizer: Authorizer, zk: KazooClient) -> None:
        self._store = store
        self._authorizer = authorizer
        self._zk = zk
        self._wake = asyncio.Event()
        self._full_reload = False
        self._seen = {root: -1 for root in CHANGE_PATHS.values()}
        self._index = AclIndex()  # what this sync last published
        self._requested: set[ResourcePattern] = set()  # by local writers, read at the next refresh
        self._waiters: list[asyncio.Future] = []  # for the next refresh
        self._in_flight: list[asyncio.Future] = []  # for the refresh under way
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Load every ACL before the broker answers its first request."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._store.ensure_paths)
        self._publish(await asyncio.to_thread(self._reload_all))
        self._zk.add_listener(self._on_session_state)
        await asyncio.to_thread(self._store.watch_changes, self._poke)

    async def refresh(self, patterns: Iterable[ResourcePattern]) -> None:
        """Re-read ``patterns`` (this broker just wrote them) and return once the authorizer
        holds what ZooKeeper held after the call (read-your-writes on this broker). Raises what
        the reads raised."""
        waiter = asyncio.get_running_loop().create_future()
        self._requested.update(patterns)
        self._waiters.append(waiter)
        self._wake.set()
        await waiter

    def _poke(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    def _on_session_state(self, state) -> None:
        if str(state).upper().endswith("CONNECTED"):
            self._full_reload = True
            self._poke()

    async def run(self) -> None:
        """Until cancelled (broker shutdown): apply each batch of notifications and requests."""
        try:
            await self._follow()
        finally:  # nobody is left to answer a handler's refresh
            for waiter in (*self._in_flight, *self._waiters):
                waiter.cancel()

    async def _follow(self) -> None:
        failures = 0  # refreshes failed in a row
        while True:
            await self._wake.wait()
            self._wake.clear()
            requested, self._requested = self._requested, set()
            waiters = self._in_flight = self._waiters
            self._waiters = []
            try:
                index = await asyncio.to_thread(self._refresh, self._index, requested)
            except Exception as exc:  # ZooKeeper trouble: keep the ACLs we have, read all soon
                backoff_ms = min(ACL_RETRY_BACKOFF_MS << min(failures, 16), ACL_RETRY_BACKOFF_MAX_MS)
                failures += 1
                log.warning("refreshing ACLs from ZooKeeper failed (%s: %s); reloading all in %d ms",
                            type(exc).__name__, exc, backoff_ms, exc_info=failures == 1)
                self._full_reload = True
                asyncio.get_running_loop().call_later(backoff_ms / 1000, self._wake.set)
                _settle(waiters, exc)
                continue
            failures = 0
            if index is not None:
                self._publish(index)
            _settle(waiters, None)

    def _publish(self, index: AclIndex) -> None:
        """On the event loop, in refresh order."""
        self._index = index
        self._authorizer.update(index)
        log.info("ACLs: %d on %d resource patterns", len(index), len(index.patterns()))

    def _reload_all(self) -> AclIndex:
        self._full_reload = False  # a session event from here on asks for another reload
        seen = {root: self._store.last_change(root) for root in self._seen}
        index = self._store.load_all()
        self._seen = seen
        return index

    def _refresh(self, index: AclIndex, requested: set[ResourcePattern]) -> AclIndex | None:
        """In a worker thread: ``index`` with every pattern a new notification names or a local
        writer asked for re-read (each once), or None when nothing changed."""
        if self._full_reload:
            return self._reload_all()
        patterns = set(requested)
        for root, after in self._seen.items():
            for number, pattern in self._store.changes_after(root, after):
                patterns.add(pattern)
                self._seen[root] = number
        if not patterns:
            return None
        by_pattern = dict(index.patterns())  # one new index, not one per pattern
        for pattern in patterns:
            by_pattern[pattern] = self._store.read_pattern(pattern)[0]
        return AclIndex(by_pattern)


def _commit(transaction) -> None:
    """Commit a ZooKeeper transaction; a refused one raises its first real error (the others
    answer RolledBackError)."""
    for result in transaction.commit():
        if isinstance(result, Exception) and not isinstance(result, RolledBackError):
            raise result


def _settle(waiters: list[asyncio.Future], error: Exception | None) -> None:
    for waiter in waiters:
        if not waiter.done():  # its request may have been cancelled (connection closed)
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)
