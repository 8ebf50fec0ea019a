"""``pylog groups list|describe|delete|reset-offsets|delete-offsets``: consumer groups and their
committed offsets, with the behaviour and columns of Kafka's ``kafka-consumer-groups``::

    GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID        HOST        CLIENT-ID
    loads  orders  0          1200            1250            50   app-1-3f2a...      /127.0.0.1  app-1

Offsets live in one of two stores (``broker.client.offset_store``): ``kafka`` (the group
coordinator's ``__consumer_offsets``, reached through ``--bootstrap-server``; what Kafka's own
tools and Burrow read) or ``zookeeper`` (``/consumers/<group>/offsets``, the layout of Kafka's old
ZooKeeper consumer, under ``--zookeeper-connect``; the Spark connector's ``offsets.store=zookeeper``).
``--store`` picks one; without it the zookeeper store is used when ``--zookeeper-connect`` is
given (``--bootstrap-server`` then only adds log end offsets, as before the kafka store existed),
else the kafka store. ``--store all`` lists and describes both, with a STORE column.

CURRENT-OFFSET is the committed offset (the next one the group reads); LOG-END-OFFSET the
partition's high watermark (``-`` without ``--bootstrap-server`` or for a partition that is gone).
Members (CONSUMER-ID, HOST, CLIENT-ID, ``--members``, ``--state``) exist only in the kafka store.

``reset-offsets`` prints the plan and changes nothing unless ``--execute`` is given (Kafka's dry
run by default). Like Kafka it refuses a group with active members: the coordinator would refuse
the commit, and the members would overwrite it. The ZooKeeper store has no members to check.

User mistakes and broker errors (no such group, a group that is not empty, an unreachable
cluster) raise ``ValueError`` with one line; ``pylog`` prints it and exits 2.
"""

from __future__ import annotations

import argparse
from typing import Mapping, TextIO

from broker.client import SYSTEM_CLOCK, AdminClient, ClientConfig, KafkaError
from broker.client.group_admin import GROUP_STATES, GroupAdmin, GroupDescription
from broker.client.offset_store import KafkaOffsetStore, OffsetStoreError, ZkOffsetStore
from broker.tools.group_plan import (
    GroupRow, ResetSpec, committed_rows, describe_table, format_table, member_rows, members_table,
    offset_rows, parse_datetime_ms, parse_duration_ms, parse_topic_partitions, plan_reset, reset_table,
)

__all__ = ["add_groups_parser", "run_groups", "GroupSession", "group_offset_rows", "STORES"]

TopicPartition = tuple[str, int]
STORES = ("kafka", "zookeeper")
_DRY_RUN_WARNING = ("WARN: No action will be performed as the --execute option is missing. "
                    "Add --dry-run to say so explicitly.")


def add_groups_parser(subparsers) -> argparse.ArgumentParser:
    groups = subparsers.add_parser("groups", help="consumer groups: offsets, lag, members; reset and delete")
    actions = groups.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every consumer group (with --state: and its state)")
    _common(listing)
    listing.add_argument("--state", nargs="*", default=None, metavar="STATE",
                         help=f"show each group's state; with values, only groups in them ({', '.join(GROUP_STATES)})")
    describe = actions.add_parser("describe", help="committed offset, log end, lag and owner per partition")
    _common(describe)
    _which_groups(describe)
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="offsets and lag per partition (the default)")
    view.add_argument("--members", action="store_true", help="the group's members (kafka store)")
    view.add_argument("--state", action="store_true", help="coordinator, assignor, state, #members (kafka store)")
    describe.add_argument("--verbose", action="store_true", help="with --members: each member's partitions")
    delete = actions.add_parser("delete", help="delete groups and their offsets (only groups without members)")
    _common(delete)
    _which_groups(delete)
    reset = actions.add_parser("reset-offsets", help="set a group's offsets (dry run unless --execute)")
    _common(reset)
    _reset_arguments(reset)
    delete_offsets = actions.add_parser("delete-offsets", help="delete a group's offsets of some topics")
    _common(delete_offsets)
    delete_offsets.add_argument("--group", required=True, help="consumer group id")
    delete_offsets.add_argument("--topic", required=True, action="append", metavar="TOPIC[:P,P]",
                                help="a topic, or some of its partitions (repeatable)")
    return groups


def _which_groups(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", help="consumer group id (repeatable)")
    which.add_argument("--all-groups", action="store_true", help="every consumer group of the store")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,HOST:PORT]",
                        help="the cluster: the kafka store, and log end offsets for either store")
    parser.add_argument("--zookeeper-connect", default=None, metavar="HOST:PORT[/CHROOT]",
                        help="the ZooKeeper holding /consumers (the zookeeper store)")
    parser.add_argument("--store", choices=STORES + ("all",), default=None,
                        help="the offsets store: kafka (default with only --bootstrap-server), zookeeper "
                             "(default with --zookeeper-connect), or all (list/describe both, with a STORE column)")
    parser.add_argument("--timeout-ms", type=int, default=30_000,
                        help="how long to wait for the cluster (default 30000)")


def _reset_arguments(reset: argparse.ArgumentParser) -> None:
    reset.add_argument("--group", required=True, help="consumer group id")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P]", help="a topic or some of its partitions")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped into the log)")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset + N (may be negative)")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="the first offset at or after this time (UTC unless a zone is given)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the plan")


# ---------------------------------------------------------------------- running

def run_groups(args: argparse.Namespace, out: TextIO, err: TextIO | None = None, *, now_ms=None) -> int:
    """Run the action in ``args``; returns the exit code. Raises ValueError for user mistakes
    and broker errors. ``now_ms`` (a function) is the clock of ``--by-duration``."""
    err = err if err is not None else out
    args = _with_defaults(args)
    if args.timeout_ms <= 0:
        raise ValueError(f"--timeout-ms must be positive, got {args.timeout_ms}")
    action = {"list": _list, "describe": _describe, "delete": _delete,
              "reset-offsets": _reset, "delete-offsets": _delete_offsets}[args.groups_command]
    session = GroupSession(args, now_ms or SYSTEM_CLOCK.time_ms)
    try:
        return action(session, args, out, err)
    except OffsetStoreError as exc:
        raise ValueError(str(exc)) from None
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    finally:
        session.close()


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` as the parser makes them, also when a caller built the Namespace by hand with
    the options of the ZooKeeper-only command (``group`` one string)."""
    values = {"store": None, "timeout_ms": 30_000, "bootstrap_server": None, "zookeeper_connect": None,
              "offsets": False, "members": False, "state": None, "verbose": False,
              "dry_run": False, "execute": False, "all_groups": False, **vars(args)}
    if args.groups_command in ("describe", "delete") and isinstance(values.get("group"), str):
        values["group"] = [values["group"]]
    return argparse.Namespace(**values)


class GroupSession:
    """The stores and clients one command uses, opened on first use, closed at the end."""

    def __init__(self, args: argparse.Namespace, now_ms=SYSTEM_CLOCK.time_ms) -> None:
        self.args = args
        self.now_ms = now_ms
        self._admin: AdminClient | None = None
        self._groups: GroupAdmin | None = None
        self._zk: ZkOffsetStore | None = None

    def stores(self, mutating: bool) -> list[str]:
        """``--store``; without it the ZooKeeper store when ``--zookeeper-connect`` is given (as
        before the kafka store existed: ``--bootstrap-server`` then only adds log ends), else
        the kafka store. ``all``: both, for ``list`` and ``describe``."""
        args = self.args
        if args.store in ("kafka", "all") and not args.bootstrap_server:
            raise ValueError(f"--store {args.store} needs --bootstrap-server")
        if args.store in ("zookeeper", "all") and not args.zookeeper_connect:
            raise ValueError(f"--store {args.store} needs --zookeeper-connect")
        if args.store == "all":
            if mutating:
                raise ValueError("--store all only lists and describes: say which store to change")
            return list(STORES)
        if args.store:
            return [args.store]
        if args.zookeeper_connect:
            return ["zookeeper"]
        if args.bootstrap_server:
            return ["kafka"]
        raise ValueError("give --bootstrap-server (kafka store) or --zookeeper-connect (zookeeper store)")

    def admin(self) -> AdminClient:
        if self._admin is None:
            if not self.args.bootstrap_server:
                raise ValueError("this needs --bootstrap-server (log offsets come from the cluster)")
            config = ClientConfig(client_id="pylog-groups", request_timeout_ms=self.args.timeout_ms)
            self._admin = AdminClient(self.args.bootstrap_server, config=config)
        return self._admin

    def groups(self) -> GroupAdmin:
        if self._groups is None:
            self._groups = GroupAdmin(cluster=self.admin().cluster)
        return self._groups

    def store(self, name: str):
        if name == "kafka":
            return KafkaOffsetStore(cluster=self.admin().cluster)
        if self._zk is None:
            self._zk = ZkOffsetStore(self.args.zookeeper_connect)
        return self._zk

    def log_offsets(self, partitions, spec: str | int) -> dict[TopicPartition, int]:
        """``spec`` offsets of the partitions the cluster has (others are left out)."""
        admin = self.admin()
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        existing = set(admin.list_topics())
        out: dict[TopicPartition, int] = {}
        for topic, wanted in sorted(by_topic.items()):
            if topic not in existing:
                continue
            present = set(admin.cluster.partitions_for(topic))
            ids = sorted(p for p in set(wanted) if p in present)
            if ids:
                out.update({(topic, p): off for p, off in admin.list_offsets(topic, ids, spec).items()})
        return out

    def close(self) -> None:
        if self._zk is not None:
            self._zk.close()
        if self._admin is not None:
            self._admin.close()


def _list(session: GroupSession, args, out: TextIO, err: TextIO) -> int:
    stores = session.stores(mutating=False)
    with_state = args.state is not None
    rows: list[tuple] = []
    for store in stores:
        if store == "kafka":
            listed = session.groups().list_groups(args.state or None)
            rows += [(g.group_id, "kafka", g.state) for g in listed if g.is_consumer_group]
        else:
            if args.state:
                raise ValueError("--state with values filters kafka groups: add --store kafka")
            rows += [(g, "zookeeper", None) for g in session.store("zookeeper").groups()]
    rows.sort(key=lambda r: (r[0], r[1]))
    if len(stores) == 1 and not with_state:
        out.writelines(f"{group}\n" for group, _, _ in rows)
    elif len(stores) == 1:
        out.write(format_table(("GROUP", "STATE"), [(g, s) for g, _, s in rows]))
    else:
        headings = ("GROUP", "STORE") + (("STATE",) if with_state else ())
        out.write(format_table(headings, [r if with_state else r[:2] for r in rows]))
    return 0


def _describe(session: GroupSession, args, out: TextIO, err: TextIO) -> int:
    stores = session.stores(mutating=False)
    if (args.members or args.state) and "kafka" not in stores:
        raise ValueError("--members and --state describe the kafka store (members exist only there)")
    rows: list[GroupRow] = []
    tagged = len(stores) > 1
    for group in _group_ids(session, args, stores):
        if "kafka" in stores and (args.members or args.state):
            description = session.groups().describe_group(group)
            _require_exists(description, group)
            _state_notice(description, err)
            out.write(_members_or_state(description, args))
            continue
        found, group_rows = group_offset_rows(session, group, stores, tagged, err)
        rows += group_rows
        if not found:
            where = " or ".join(stores)
            raise ValueError(f"Consumer group '{group}' does not exist (no members or offsets in the {where} store).")
    if rows or not (args.members or args.state):
        out.write(describe_table(rows, with_store=tagged, with_members="kafka" in stores))
    return 0


def group_offset_rows(session: GroupSession, group: str, stores: list[str], tagged: bool,
                      err: TextIO) -> tuple[bool, list[GroupRow]]:
    """(whether the group exists in any of ``stores``, its offset rows with lag): the one place
    ``groups describe`` and ``pylog lag`` read committed offsets and log ends, so both show the
    same lag. ``tagged``: fill the STORE column."""
    found = False
    rows: list[GroupRow] = []
    if "kafka" in stores:
        description = session.groups().describe_group(group)
        found, rows = _kafka_rows(session, description, "kafka" if tagged else None, err)
    if "zookeeper" in stores:
        committed = session.store("zookeeper").fetch(group)
        found = found or bool(committed)
        ends = session.log_offsets(committed, "latest") if session.args.bootstrap_server else None
        rows += committed_rows(group, committed, ends, "zookeeper" if tagged else None)
    return found, rows


def _group_ids(session: GroupSession, args, stores: list[str]) -> list[str]:
    """``--group`` values, or with ``--all-groups`` every consumer group of the stores."""
    if not args.all_groups:
        return list(dict.fromkeys(args.group))
    found: set[str] = set()
    for store in stores:
        if store == "kafka":
            found.update(g.group_id for g in session.groups().list_groups() if g.is_consumer_group)
        else:
            found.update(session.store("zookeeper").groups())
    return sorted(found)


def _kafka_rows(session: GroupSession, description: GroupDescription, store: str | None,
                err: TextIO) -> tuple[bool, list[GroupRow]]:
    group = description.group_id
    committed = {tp: c.offset for tp, c in session.groups().list_group_offsets(group).items()}
    if description.state == "Dead" and not committed:
        return False, []
    _state_notice(description, err)
    members = member_rows(group, description.members)
    partitions = set(committed) | {tp for m in members for tp in m.assignment}
    ends = session.log_offsets(partitions, "latest")
    return True, offset_rows(group, members, committed, ends, store)


def _require_exists(description: GroupDescription, group: str) -> None:
    if description.state == "Dead":
        raise ValueError(f"Consumer group '{group}' does not exist.")


def _state_notice(description: GroupDescription, err: TextIO) -> None:
    """Kafka's notes on stderr before a group's rows."""
    if description.state == "Empty":
        err.write(f"\nConsumer group '{description.group_id}' has no active members.\n")
    elif description.state in ("PreparingRebalance", "CompletingRebalance"):
        err.write(f"\nWarning: Consumer group '{description.group_id}' is rebalancing.\n")


def _members_or_state(d: GroupDescription, args) -> str:
    if args.members:
        return members_table(member_rows(d.group_id, d.members), verbose=args.verbose)
    coordinator = f"{d.coordinator.host}:{d.coordinator.port}  ({d.coordinator.node_id})"
    return format_table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                        [(d.group_id, coordinator, d.protocol, d.state, len(d.members))])


def _delete(session: GroupSession, args, out: TextIO, err: TextIO) -> int:
    store = session.stores(mutating=True)[0]
    groups = _group_ids(session, args, [store])
    if not groups:
        out.write("There are no consumer groups to delete.\n")
        return 0
    if store == "kafka":
        results = session.groups().delete_groups(groups)
    else:
        zk = session.store("zookeeper")
        existing = set(zk.groups())
        results = {}
        for group in groups:
            results[group] = None if group in existing else ValueError(
                f"GROUP_ID_NOT_FOUND: no offsets of group '{group}' in ZooKeeper")
            if group in existing:
                zk.delete(group)
    deleted = [g for g, e in results.items() if e is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if deleted:
        out.write(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in deleted)}) was successful.\n")
    if failed:
        lines = "; ".join(f"group '{g}' could not be deleted due to: {e}" for g, e in failed.items())
        raise ValueError(f"Deletion of some consumer groups failed: {lines}")
    return 0


def _reset(session: GroupSession, args, out: TextIO, err: TextIO) -> int:
    store_name = session.stores(mutating=True)[0]
    group = args.group
    if store_name == "kafka":
        description = session.groups().describe_group(group)
        if description.is_active:
            raise ValueError(f"Assignments can only be reset if the group '{group}' is inactive, "
                             f"but the current state is {description.state}.")
    store = session.store(store_name)
    committed = store.fetch(group)
    partitions = _partitions_to_reset(session, args, committed)
    spec = _reset_spec(args, session.now_ms)
    starts = session.log_offsets(partitions, "earliest")
    ends = session.log_offsets(partitions, "latest")
    by_time = session.log_offsets(partitions, spec.value) if spec.kind == "timestamp" else None
    plan = plan_reset(partitions, spec, committed, starts, ends, by_time)
    for warning in plan.warnings:
        err.write(f"{warning}\n")
    if args.execute:
        store.commit(group, plan.offsets)
    elif not args.dry_run:
        err.write(f"{_DRY_RUN_WARNING}\n")
    out.write(reset_table(group, plan.offsets))
    return 0


def _partitions_to_reset(session: GroupSession, args, committed: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    if args.all_topics:
        if not committed:
            raise ValueError(f"group '{args.group}' has no committed offsets: name the partitions with --topic")
        return sorted(committed)
    return _named_partitions(session, args.topic)


def _named_partitions(session: GroupSession, topic_args) -> list[TopicPartition]:
    """``--topic`` values as partitions: a bare topic means all of its partitions."""
    topics, partitions = parse_topic_partitions(topic_args)
    if topics:
        admin = session.admin()
        existing = set(admin.list_topics())
        for topic in topics:
            if topic not in existing:
                raise ValueError(f"topic '{topic}' does not exist")
            partitions += [(topic, p) for p in admin.cluster.partitions_for(topic)]
    return sorted(set(partitions))


def _reset_spec(args, now_ms) -> ResetSpec:
    if args.to_earliest:
        return ResetSpec("earliest")
    if args.to_latest:
        return ResetSpec("latest")
    if args.to_offset is not None:
        return ResetSpec("offset", args.to_offset)
    if args.shift_by is not None:
        return ResetSpec("shift", args.shift_by)
    if args.to_datetime is not None:
        return ResetSpec("timestamp", parse_datetime_ms(args.to_datetime))
    assert args.by_duration is not None, "argparse requires one reset scenario"
    return ResetSpec("timestamp", max(now_ms() - parse_duration_ms(args.by_duration), 0))


def _delete_offsets(session: GroupSession, args, out: TextIO, err: TextIO) -> int:
    store_name = session.stores(mutating=True)[0]
    group = args.group
    if store_name == "zookeeper":
        topics, partitions = parse_topic_partitions(args.topic)
        if partitions:
            raise ValueError("the zookeeper store deletes whole topics: give --topic TOPIC without partitions")
        for topic in topics:
            session.store("zookeeper").delete(group, topic)
        out.write(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}\n")
        return 0
    results = session.groups().delete_offsets(group, _named_partitions(session, args.topic))
    failed = [e for e in results.values() if e is not None]
    if not failed:
        out.write(f"Request succeed for deleting offsets with topic {', '.join(args.topic)} group {group}\n")
    out.write(format_table(("TOPIC", "PARTITION", "STATUS"), [
        (t, p, "Successful" if e is None else f"Error: {e.name}: {KafkaError(e.code).message}")
        for (t, p), e in results.items()]))
    if failed:
        raise ValueError(f"group '{group}': {len(failed)} of {len(results)} partitions kept their offsets "
                         f"({failed[0].name}); see the table above")
    return 0
