"""Two stores of consumer-group offsets with one interface (``commit``, ``fetch``, ``groups``,
``delete``, ``close``), chosen by the user (Spark's ``offsets.store``, ``pylog groups --store``):

- ``KafkaOffsetStore``: Kafka's ``__consumer_offsets`` through the group's coordinator, what lag
  tools (``kafka-consumer-groups``, Burrow) read. Works against pylog and Apache Kafka alike.
- ``ZkOffsetStore``: ZooKeeper, in the layout of Kafka's original ZooKeeper-based consumer.

``ZkOffsetStore`` keeps pylog tools and Kafka-era tooling reading the same tree::

    /consumers/<group>/offsets/<topic>/<partition>   data: the next offset to read, decimal ASCII

(``kafka.zk.ZkData`` ``ConsumerPathZNode``; the same bytes ``broker.cluster.zk`` writes and reads.)
An offset is the *next* offset to read (last consumed + 1), like a consumer's position.

Writes are last-writer-wins per partition (``set``, or ``create`` on the first commit), as in the
old consumer; several partitions are not committed atomically. Group and topic names become znode
names, so they are checked first: a "/" would write somewhere else in the tree.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.group_admin import GroupAdmin
from broker.client.metadata import Cluster
from broker.wire import ErrorCode

__all__ = ["KafkaOffsetStore", "ZkOffsetStore", "OffsetStoreError", "consumer_offsets_path", "consumer_offset_path"]

TopicPartition = tuple[str, int]
_CONSUMERS = "/consumers"
_NAME_MAX = 249  # Kafka's topic name limit; a group id this long is surely a mistake too


class OffsetStoreError(ValueError):
    """A bad group/topic name, a malformed stored offset, or ZooKeeper out of reach."""


def _znode_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\x00" in name \
            or len(name) > _NAME_MAX:
        raise OffsetStoreError(f"invalid {kind} {name!r}: must be 1-{_NAME_MAX} characters, "
                               f"no '/', not '.' or '..'")
    return name


def consumer_offsets_path(group: str) -> str:
    return f"{_CONSUMERS}/{_znode_name('group id', group)}/offsets"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise OffsetStoreError(f"invalid partition {partition!r}")
    return f"{consumer_offsets_path(group)}/{_znode_name('topic', topic)}/{partition}"


def _encode(offset: int) -> bytes:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise OffsetStoreError(f"a committed offset is a non-negative int, got {offset!r}")
    return str(offset).encode("ascii")


def _decode(path: str, data: bytes) -> int:
    text = bytes(data).decode("ascii", errors="replace").strip()
    if not text.isdigit():
        raise OffsetStoreError(f"{path}: {bytes(data)[:40]!r} is not an offset")
    return int(text)


class ZkOffsetStore:
    """Commit and fetch a group's offsets. ``zookeeper_connect`` may end in a chroot
    (``host:2181/kafka``). Not thread-safe; ``close()`` (or ``with``) when done."""

    def __init__(self, zookeeper_connect: str, *, session_timeout_ms: int = 10_000,
                 connect_timeout_ms: int = 10_000, client: KazooClient | None = None) -> None:
        if session_timeout_ms <= 0 or connect_timeout_ms <= 0:
            raise ValueError("session_timeout_ms and connect_timeout_ms must be positive")
        self._owned = client is None
        self._zk = client or KazooClient(hosts=zookeeper_connect, timeout=session_timeout_ms / 1000)
        if self._owned:
            try:
                self._zk.start(timeout=connect_timeout_ms / 1000)
            except (KazooTimeoutError, ValueError) as exc:
                self._zk.close()
                raise OffsetStoreError(f"cannot reach ZooKeeper at {zookeeper_connect!r}: {exc}") from exc

    def close(self) -> None:
        if self._owned:
            self._zk.stop()
            self._zk.close()

    def __enter__(self) -> "ZkOffsetStore":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Write each partition's offset (``ZkUtils.updatePersistentPath``)."""
        encoded = [(consumer_offset_path(group, t, p), _encode(off)) for (t, p), off in offsets.items()]
        for path, data in encoded:  # every name checked before the first write
            try:
                self._zk.set(path, data)
            except NoNodeError:
                try:
                    self._zk.create(path, data, makepath=True)
                except NodeExistsError:  # a concurrent first commit: last writer wins
                    self._zk.set(path, data)

    def fetch(self, group: str, topics: Iterable[str] | None = None) -> dict[TopicPartition, int]:
        """The group's committed offsets (of ``topics`` only, if given); ``{}`` if none."""
        root = consumer_offsets_path(group)
        names = self._children(root) if topics is None else [_znode_name("topic", t) for t in topics]
        out: dict[TopicPartition, int] = {}
        for topic in names:
            for name in self._children(f"{root}/{topic}"):
                if not (name.isascii() and name.isdigit()):
                    raise OffsetStoreError(f"{root}/{topic}/{name}: {name!r} is not a partition number")
                path = f"{root}/{topic}/{name}"
                try:
                    data, _ = self._zk.get(path)
                except NoNodeError:
                    continue  # deleted between listing and reading
                out[(topic, int(name))] = _decode(path, data)
        return dict(sorted(out.items()))

    def groups(self) -> list[str]:
        return sorted(self._children(_CONSUMERS))

    def delete(self, group: str, topic: str | None = None) -> None:
        """Remove the group's offsets (of one topic)."""
        path = consumer_offsets_path(group) if topic is None else \
            f"{consumer_offsets_path(group)}/{_znode_name('topic', topic)}"
        try:
            self._zk.delete(path, recursive=True)
        except NoNodeError:
            pass

    def _children(self, path: str) -> list[str]:
        try:
            return self._zk.get_children(path)
        except NoNodeError:
            return []


class KafkaOffsetStore:
    """Commit and fetch a group's offsets in Kafka's ``__consumer_offsets``, through the group
    coordinator (``broker.client.group_admin``). Commits are "simple" commits (generation -1, no
    member id), the commits of a consumer that uses ``assign()``: the coordinator accepts them
    only while the group has no active members, so give the store a group id of its own (a
    Spark query's), not that of a subscribing consumer group, or the commit fails with
    UNKNOWN_MEMBER_ID. Offsets are the *next* offset to read, like ``ZkOffsetStore``'s.

    One OffsetCommit per ``commit``: the coordinator appends all its partitions as one batch.
    Broker errors raise ``KafkaError`` (retriable ones after ``request_timeout_ms`` of retries);
    bad input raises ``OffsetStoreError``. Not thread-safe; ``close()`` (or ``with``) when done."""

    def __init__(self, bootstrap_servers: str | None = None, *, config: ClientConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK, cluster: Cluster | None = None) -> None:
        self._admin = GroupAdmin(bootstrap_servers, config=config, clock=clock, cluster=cluster)

    def close(self) -> None:
        self._admin.close()

    def __enter__(self) -> "KafkaOffsetStore":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Set each partition's offset (a simple OffsetCommit)."""
        checked = {(_topic_name(t), _partition(p)): _offset(off) for (t, p), off in offsets.items()}
        self._admin.alter_group_offsets(_group_id(group), checked)

    def fetch(self, group: str, topics: Iterable[str] | None = None) -> dict[TopicPartition, int]:
        """The group's committed offsets (of ``topics`` only, if given); ``{}`` if none."""
        wanted = None if topics is None else {_topic_name(t) for t in topics}
        committed = self._admin.list_group_offsets(_group_id(group))
        return {tp: c.offset for tp, c in committed.items() if wanted is None or tp[0] in wanted}

    def groups(self) -> list[str]:
        """Consumer groups the cluster knows (protocol type ``consumer`` or none), sorted."""
        return [g.group_id for g in self._admin.list_groups() if g.is_consumer_group]

    def delete(self, group: str, topic: str | None = None) -> None:
        """Remove the group's offsets (of one topic). DeleteGroups, or OffsetDelete of the
        topic's committed partitions; refused (``KafkaError``) while the group has members."""
        group = _group_id(group)
        if topic is None:
            error = self._admin.delete_groups([group])[group]
            if error is not None and error.code != ErrorCode.GROUP_ID_NOT_FOUND:
                raise error
            return
        partitions = [tp for tp in self.fetch(group, [topic])]
        for error in self._admin.delete_offsets(group, partitions).values():
            if error is not None:
                raise error


def _group_id(group: str) -> str:
    if not isinstance(group, str) or not group or len(group) > _NAME_MAX:
        raise OffsetStoreError(f"invalid group id {group!r}: must be 1-{_NAME_MAX} characters")
    return group


def _topic_name(topic: str) -> str:
    if not isinstance(topic, str) or not topic or len(topic) > _NAME_MAX:
        raise OffsetStoreError(f"invalid topic {topic!r}: must be 1-{_NAME_MAX} characters")
    return topic


def _partition(partition: int) -> int:
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise OffsetStoreError(f"invalid partition {partition!r}")
    return partition


def _offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise OffsetStoreError(f"a committed offset is a non-negative int, got {offset!r}")
    return offset
