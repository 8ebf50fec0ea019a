"""The group options of the ``pylog`` source: which consumer group a query stands for and where
that group's committed offsets live. Pure; ``spark_log.options`` calls ``parse_group_options``.

``offsets.store`` names the store of the group's offsets, read and written:

- ``none`` (default): the query commits nothing, like Spark's Kafka source.
- ``zookeeper`` (with ``zookeeper.connect``): ``/consumers/<group>/offsets/<topic>/<partition>``,
  the layout of Kafka's old ZooKeeper consumer (``broker.client.offset_store.ZkOffsetStore``).
- ``kafka``: Kafka's offsets topic ``__consumer_offsets``, through the group coordinator of the
  cluster in ``kafka.bootstrap.servers``, as "simple" commits (OffsetCommit with generation -1
  and no member id, what a consumer that uses ``assign()`` sends). ``kafka-consumer-groups
  --describe``, Burrow and every other lag tool read it there. Spark's own connector never
  commits (SPARK-27549).

A streaming query commits to the store in ``commit(end)``; ``startingOffsets=group`` reads from
it. Why one option for both directions and not a commit-only name such as ``commitOffsetsTo``:
a batch read or an offline load with ``startingOffsets=group`` reads the store without
committing to it, so the option says where the group's offsets *are*.

Which group: ``kafka.group.id``, required by every store. Spark's connector, without
``kafka.group.id``, generates ``<groupIdPrefix>-<random UUID>-...`` each time a query starts, so
offsets committed under it would appear as a new group after every restart: a lag tool could not
follow the query and ``startingOffsets=group`` could never find them. So the generated id is not
used for commits, and ``groupIdPrefix`` only keeps its Spark meaning (ignored when
``kafka.group.id`` is set).

Group ids: Kafka allows any non-empty string; the ZooKeeper store also needs a valid znode name
(no "/", not "." or ".."). Both cap it at 249 characters here (Kafka's topic-name limit): a
longer id is a mistake, and the ZooKeeper store refuses it anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupOptionError", "GroupSettings", "OFFSETS_STORES", "parse_group_options"]

OFFSETS_STORES = ("none", "zookeeper", "kafka")
GROUP_ID_LENGTH_MAX = 249  # characters


class GroupOptionError(ValueError):
    """Raised as ``spark_log.options.OptionError`` (a subclass) by the caller's wrapper."""


@dataclass(frozen=True)
class GroupSettings:
    group_id: str | None
    offsets_store: str  # one of OFFSETS_STORES
    zookeeper_connect: str | None
    warnings: tuple[str, ...] = ()


def _check_group_id(group_id: str, store: str) -> None:
    if not group_id.strip() or "\x00" in group_id or len(group_id) > GROUP_ID_LENGTH_MAX:
        raise GroupOptionError(f"Option 'kafka.group.id': {group_id[:60]!r} is not a valid group id "
                               f"(1-{GROUP_ID_LENGTH_MAX} characters, not blank)")
    if store == "zookeeper" and ("/" in group_id or group_id in (".", "..")):
        raise GroupOptionError(f"Option 'kafka.group.id': {group_id!r} is not a valid group id for "
                               f"'offsets.store' = 'zookeeper' (it becomes a znode name: no '/', not "
                               f"'.' or '..'); choose another id or use 'offsets.store' = 'kafka'")


def _needs_group(store: str) -> str:
    return (f"Option 'offsets.store' = '{store}' needs 'kafka.group.id' (the group whose offsets are "
            f"committed). Spark's generated group id (groupIdPrefix plus a random UUID) changes every "
            f"time a query starts, so lag tools and startingOffsets=group could not follow it; set "
            f"'kafka.group.id' to a stable name")


def parse_group_options(opts: dict[str, str], group_id: str | None, starting_kind: str) -> GroupSettings:
    """``opts``: the options with lower-case names. ``group_id``: ``kafka.group.id`` or None.
    ``starting_kind``: the kind of the start spec (``group`` reads the store)."""
    store = opts.get("offsets.store", "none").strip().lower()
    if store not in OFFSETS_STORES:
        raise GroupOptionError(f"Option 'offsets.store' must be one of {', '.join(OFFSETS_STORES)}, "
                               f"got {opts['offsets.store']!r}")
    if group_id is not None:
        _check_group_id(group_id, store)
    zk = opts.get("zookeeper.connect", "").strip() or None
    warnings: list[str] = []
    if store != "none" and group_id is None:
        raise GroupOptionError(_needs_group(store))
    if store == "zookeeper" and zk is None:
        raise GroupOptionError("Option 'offsets.store' = 'zookeeper' needs 'zookeeper.connect' "
                               "(host:port[,host:port][/chroot])")
    if store != "zookeeper" and zk is not None:
        warnings.append(f"Option 'zookeeper.connect' is ignored: 'offsets.store' is '{store}' "
                        f"(set it to 'zookeeper' to use ZooKeeper)")
    if starting_kind == "group" and store == "none":
        raise GroupOptionError("Option 'startingOffsets' = 'group' needs 'kafka.group.id' and "
                               "'offsets.store' = 'kafka' (the group's offsets in __consumer_offsets) "
                               "or 'offsets.store' = 'zookeeper' with 'zookeeper.connect'")
    return GroupSettings(group_id, store, zk if store == "zookeeper" else None, tuple(warnings))
