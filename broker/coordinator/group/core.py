"""``GroupCoordinatorCore``: the group coordinator of one broker, pure and synchronous.

INTERFACE CONTRACT (fixed; the shell in ``broker.server.group_coordinator`` and the simulation tier
are written against it — change it only together with them):

Inputs
------
* ``handle(token, api_key, api_version, request, client_id, client_host, now_ms) -> list[Effect]``
  — one decoded request of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  OffsetDelete, ListGroups, DescribeGroups, DeleteGroups, TxnOffsetCommit (``request`` is the ``broker.wire``
  request object of that API at ``api_version``). ``token`` is the shell's opaque handle for the
  request: every request gets exactly one ``Reply(token, response)``, now or later (JoinGroup and
  SyncGroup park until the rebalance completes; commits wait for their append).
* ``load_partition(partition, records, now_ms) -> list[Effect]`` — this broker now leads
  ``__consumer_offsets`` partition ``partition``; ``records`` is every (key bytes, value bytes or
  None) of the partition up to its high watermark, in offset order; a record of a transactional
  batch comes as ``(None, shard.TxnRecord)``, a COMMIT/ABORT marker as ``(None, shard.TxnMarker)``
  (the shell may leave both out of a partition without transactional batches). Until ``begin_load`` ...
  ``load_partition`` the groups of that partition answer COORDINATOR_LOAD_IN_PROGRESS (14).
* ``begin_load(partition)`` — leadership gained, records not read yet.
* ``unload_partition(partition) -> list[Effect]`` — leadership lost: its groups are dropped, parked
  requests are answered NOT_COORDINATOR (16), pending writes are forgotten (their
  ``write_done`` is then ignored).
* ``write_done(write_id, error_code, now_ms) -> list[Effect]`` — an ``Append`` finished: 0 when
  the records are replicated (acks=all), else the produce error code. The cache changes only now.
* ``transaction_completed(partition, producer_id, producer_epoch, committed, now_ms) ->
  list[Effect]`` — a COMMIT (``committed``) or ABORT marker of ``producer_id`` is replicated in
  ``__consumer_offsets`` partition ``partition``: that producer's pending transactional offsets
  (TxnOffsetCommit) of the partition are materialized or dropped (``txn_offsets``).
* ``tick(now_ms) -> list[Effect]`` — timers: session expiry, rebalance timeout, initial
  rebalance delay, offsets retention. ``next_deadline()`` says when the next tick is due
  (None: no timer); ``added_deadline()`` the earliest deadline scheduled since it was last
  asked (a cheap "must the timer wake earlier?" after each call).

Outputs (effects, in order)
---------------------------
* ``Reply(token, response)`` — send ``response`` (a ``broker.wire`` response object) for ``token``.
* ``Append(write_id, partition, records)`` — append ``records`` (list of (key, value-or-None)
  bytes) as one batch to ``__consumer_offsets`` partition ``partition`` with acks=all, then call
  ``write_done(write_id, ...)``. When ``transactional`` (TxnOffsetCommit), the batch is a
  transactional one of ``producer_id``/``producer_epoch`` and must not be merged with others.

The group of a request is ``partition_for(group_id, settings.num_partitions)``; a group whose
partition is neither loaded nor loading answers NOT_COORDINATOR.
"""

from __future__ import annotations

import functools
import itertools
from typing import Iterable

from broker.coordinator.group import admin, join, offsets, rebalance, sync, txn_offsets
from broker.coordinator.group import responses as rsp
from broker.coordinator.group.effects import Append, Effect, GroupSettings, Reply
from broker.coordinator.group.shard import Shard
from broker.wire.apis.delete_groups import DeleteGroupsResponse
from broker.wire.apis.describe_groups import DescribeGroupsResponse
from broker.wire.apis.list_groups import ListGroupsResponse
from broker.wire.apis.offset_delete import OffsetDeleteResponse
from broker.wire.apis.offset_fetch import OffsetFetchResponse

__all__ = ["GroupSettings", "Reply", "Append", "Effect", "GroupCoordinatorCore", "partition_for"]

COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
INVALID_GROUP_ID = 24
NOT_LEADER_OR_FOLLOWER = 6
UNSTABLE_OFFSET_COMMIT = 88
TXN_OFFSET_COMMIT = 28  # api key
TICK_ROUNDS_MAX = 100  # rounds of due timers per tick (see tick)


@functools.lru_cache(maxsize=65_536)  # every request hashes its group id: cache the hot ones
def partition_for(group_id: str, num_partitions: int) -> int:
    """``Utils.abs(groupId.hashCode()) % num_partitions`` (Kafka's GroupCoordinatorService):
    Java's String.hashCode over UTF-16 code units with int32 wrap-around, then Kafka's
    ``Utils.abs``, which is ``Math.abs`` except that Integer.MIN_VALUE gives 0 — not
    ``Utils.toPositive``'s ``& 0x7fffffff``, which differs for every negative hash."""
    h = 0
    data = group_id.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % num_partitions


# The APIs bound to one group: key -> (handler, error response builder for routing errors).
def _commit_error(version, request, code):
    return offsets._commit_response(request, None, code)


_GROUP_APIS = {
    rsp.JOIN_GROUP: (None, lambda v, r, c: rsp.join_error(v, c, r.member_id)),
    rsp.SYNC_GROUP: (sync.handle_sync, lambda v, r, c: rsp.sync_response(c)),
    rsp.HEARTBEAT: (sync.handle_heartbeat, lambda v, r, c: rsp.heartbeat_response(c)),
    rsp.LEAVE_GROUP: (sync.handle_leave, lambda v, r, c: rsp.leave_response(v, c, [])),
    rsp.OFFSET_COMMIT: (offsets.handle_commit, _commit_error),
    rsp.OFFSET_DELETE: (offsets.handle_offset_delete, lambda v, r, c: OffsetDeleteResponse(error_code=c)),
    TXN_OFFSET_COMMIT: (txn_offsets.handle_txn_commit, txn_offsets.error_response),
}


class GroupCoordinatorCore:
    def __init__(self, settings: GroupSettings, rng) -> None:
        self.settings = settings
        self._rng = rng  # random.Random: member ids (clientId-UUID)
        self._shards: dict[int, Shard] = {}
        self._loading: set[int] = set()
        # partition -> markers replicated while it loads (producer id, committed), in order: the
        # load may have read up to an offset before them (see transaction_completed)
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._write_ids = itertools.count(1)
        self._now_ms = 0
        self._added_deadline: int | None = None  # see added_deadline

    # -- requests -----------------------------------------------------------------------------
    def handle(self, token, api_key: int, api_version: int, request, client_id: str,
               client_host: str, now_ms: int) -> list[Effect]:
        self._now_ms = max(self._now_ms, now_ms)
        if api_key in _GROUP_APIS:
            return self._handle_group_api(token, api_key, api_version, request, client_id,
                                          client_host, now_ms)
        if api_key == rsp.OFFSET_FETCH:
            return [Reply(token, self._offset_fetch(api_version, request))]
        if api_key == rsp.LIST_GROUPS:
            return [Reply(token, self._list_groups(api_version, request))]
        if api_key == rsp.DESCRIBE_GROUPS:
            return [Reply(token, DescribeGroupsResponse(groups=[
                self._describe(group_id, api_version) for group_id in request.groups]))]
        if api_key == rsp.DELETE_GROUPS:
            return self._delete_groups(token, request)
        raise AssertionError(f"api key {api_key} is not a group coordinator API")

    def _route(self, group_id: str) -> tuple[Shard | None, int]:
        """(shard, 0) or (None, COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR)."""
        partition = partition_for(group_id, self.settings.num_partitions)
        if partition in self._loading:
            return None, COORDINATOR_LOAD_IN_PROGRESS
        shard = self._shards.get(partition)
        return (shard, 0) if shard is not None else (None, NOT_COORDINATOR)

    def _handle_group_api(self, token, api_key, version, request, client_id, client_host, now_ms):
        handler, error_response = _GROUP_APIS[api_key]
        if not request.group_id:
            return [Reply(token, error_response(version, request, INVALID_GROUP_ID))]
        shard, code = self._route(request.group_id)
        if shard is None:
            return [Reply(token, error_response(version, request, code))]
        if api_key == rsp.JOIN_GROUP:
            return join.handle_join(shard, token, version, request, client_id, client_host, now_ms)
        return handler(shard, token, version, request, now_ms)

    def _offset_fetch(self, version: int, request):
        if version >= 8:
            return OffsetFetchResponse(groups=[self._fetch_group_v8(g, request.require_stable)
                                               for g in request.groups])
        topics = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
        code, rows = self._fetch(request.group_id, topics, version >= 7 and request.require_stable)
        topic_cls = OffsetFetchResponse.OffsetFetchResponseTopic
        part_cls = OffsetFetchResponse.OffsetFetchResponsePartition
        if code and version >= 2:
            return OffsetFetchResponse(error_code=code, topics=[])
        if code:  # v0-1 have no top-level error: every partition carries it
            rows = [(name, [(p, -1, -1, "") for p in parts]) for name, parts in topics or []]
        return OffsetFetchResponse(error_code=code, topics=[
            topic_cls(name=name, partitions=[
                part_cls(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                         metadata=m, error_code=code or rest[0] if rest else code)
                for p, o, e, m, *rest in parts])
            for name, parts in rows])

    def _fetch_group_v8(self, group, require_stable: bool):
        topics = None if group.topics is None else [(t.name, t.partition_indexes) for t in group.topics]
        code, rows = self._fetch(group.group_id, topics, require_stable)
        topics_cls = OffsetFetchResponse.OffsetFetchResponseTopics
        parts_cls = OffsetFetchResponse.OffsetFetchResponsePartitions
        return OffsetFetchResponse.OffsetFetchResponseGroup(group_id=group.group_id, error_code=code, topics=[
            topics_cls(name=name, partitions=[
                parts_cls(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                          error_code=rest[0] if rest else 0)
                for p, o, e, m, *rest in parts])
            for name, parts in rows])

    def _fetch(self, group_id: str, topics, require_stable: bool = False) -> tuple[int, list]:
        """(error, [(topic, [(partition, offset, epoch, metadata[, error])])]). With
        ``require_stable`` (v7+, KIP-447) a partition with pending transactional offsets is
        UNSTABLE_OFFSET_COMMIT with offset -1 (Kafka's OffsetMetadataManager.fetchOffsets)."""
        if not group_id:
            return INVALID_GROUP_ID, []
        shard, code = self._route(group_id)
        if shard is None:
            return code, []
        rows = offsets.fetch_group_offsets(shard, group_id, topics)
        if require_stable and group_id in shard.txn_groups:
            rows = [(name, [(row[0], -1, -1, "", UNSTABLE_OFFSET_COMMIT)
                            if txn_offsets.has_pending(shard, group_id, name, row[0]) else row
                            for row in parts])
                    for name, parts in rows]
        return 0, rows

    def _list_groups(self, version: int, request):
        states = list(request.states_filter or []) if version >= 4 else []
        types = list(request.types_filter or []) if version >= 5 else []
        groups = []
        for partition in sorted(self._shards):
            groups += admin.listed_groups(self._shards[partition], states, types)
        code = COORDINATOR_LOAD_IN_PROGRESS if self._loading else 0
        return ListGroupsResponse(error_code=code, groups=groups)

    def _describe(self, group_id: str, version: int):
        """One group's entry. An empty group id is routed like any other (Kafka: a Dead group,
        GROUP_ID_NOT_FOUND from v6), not refused INVALID_GROUP_ID as the group APIs do."""
        shard, code = self._route(group_id)
        if shard is None:
            return DescribeGroupsResponse.DescribedGroup(error_code=code, group_id=group_id)
        return admin.describe_group(shard, group_id, version)

    def _delete_groups(self, token, request) -> list:
        names = list(request.groups_names)
        results: dict[int, int] = {}

        def reporter(index: int):
            def report(code: int) -> list:
                assert index not in results, "a group's deletion reported twice"
                results[index] = code
                if len(results) < len(names):
                    return []
                cls = DeleteGroupsResponse.DeletableGroupResult
                return [Reply(token, DeleteGroupsResponse(results=[
                    cls(group_id=name, error_code=results[i]) for i, name in enumerate(names)]))]
            return report

        if not names:
            return [Reply(token, DeleteGroupsResponse(results=[]))]
        effects: list = []
        for index, name in enumerate(names):
            report = reporter(index)
            if not name:
                effects += report(INVALID_GROUP_ID)
                continue
            shard, code = self._route(name)
            effects += report(code) if shard is None else admin.delete_group(shard, name, report)
        return effects

    # -- partitions ---------------------------------------------------------------------------
    def begin_load(self, partition: int) -> None:
        # Loaded already (a reload): the old shard keeps its parked requests until
        # load_partition replaces it; meanwhile requests answer COORDINATOR_LOAD_IN_PROGRESS.
        self._loading.add(partition)

    def load_partition(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                       now_ms: int) -> list[Effect]:
        self._now_ms = max(self._now_ms, now_ms)
        markers = self._markers_while_loading.pop(partition, ())  # unload_partition forgets them
        effects = self.unload_partition(partition) if partition in self._shards else []
        self._loading.discard(partition)
        shard = Shard(partition, self.settings, self._rng, lambda: next(self._write_ids), now_ms,
                      self._timer_added)
        shard.load(records, now_ms)
        for producer_id, committed in markers:
            txn_offsets.end_transaction(shard, producer_id, committed)
        self._shards[partition] = shard
        self._timer_added(shard.next_deadline())
        for group in shard.groups.values():
            if len(group.members) > self.settings.max_size:
                effects += rebalance.prepare_rebalance(shard, group, now_ms)  # group.max.size lowered
        return effects

    def unload_partition(self, partition: int) -> list[Effect]:
        """Drop the partition's groups. Parked JoinGroup/SyncGroup and requests waiting for an
        append are answered NOT_COORDINATOR; Appends produced while winding down are dropped."""
        self._loading.discard(partition)
        self._markers_while_loading.pop(partition, None)
        shard = self._shards.pop(partition, None)
        if shard is None:
            return []
        effects: list = []
        for group in shard.groups.values():
            for member in group.members.values():
                effects += rebalance.answer_waiters(member, NOT_COORDINATOR)
        for write_id in sorted(shard.writes):
            on_done = shard.writes.pop(write_id)
            effects += [e for e in on_done(NOT_LEADER_OR_FOLLOWER, self._now_ms) if isinstance(e, Reply)]
        return effects

    def write_done(self, write_id: int, error_code: int, now_ms: int, partition: int | None = None) -> list[Effect]:
        """``partition``: the ``__consumer_offsets`` partition appended to, when the caller knows
        it (one lookup instead of a search through every loaded partition, 50 by default)."""
        self._now_ms = max(self._now_ms, now_ms)
        shard = self._shards.get(partition) if partition is not None else None
        if shard is not None and write_id in shard.writes:
            return shard.write_done(write_id, error_code, now_ms)
        for shard in self._shards.values():
            if write_id in shard.writes:
                return shard.write_done(write_id, error_code, now_ms)
        return []  # the partition was unloaded: forgotten

    def transaction_completed(self, partition: int, producer_id: int, producer_epoch: int,
                              committed: bool, now_ms: int) -> list[Effect]:
        """A marker of ``producer_id`` is replicated in ``partition`` (see the contract).
        The epoch is not checked: the partition checked it when it appended the marker. A marker
        that comes while the partition loads is kept and applied after the load, whose read may
        end before it (one the read did include then finds nothing pending: no transaction of
        the producer can write offsets to a partition still loading)."""
        self._now_ms = max(self._now_ms, now_ms)
        if partition in self._loading:
            self._markers_while_loading.setdefault(partition, []).append((producer_id, committed))
            return []
        shard = self._shards.get(partition)
        if shard is not None:
            txn_offsets.end_transaction(shard, producer_id, committed)
        return []

    # -- timers -------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> list[Effect]:
        self._now_ms = max(self._now_ms, now_ms)
        effects: list = []
        for shard in list(self._shards.values()):
            # Timers firing may set new deadlines that are already due (a zero initial delay):
            # run until nothing is due. Each round completes something or clears a flag
            # (new_member_added); the bound only guards against a bug (what is left stays due,
            # so next_deadline() asks for another tick at once).
            for _ in range(TICK_ROUNDS_MAX):
                due = shard.pop_due(now_ms)
                if not due:
                    break
                for group_id in due:
                    group = shard.groups.get(group_id)
                    if group is not None:
                        effects += rebalance.on_timers(shard, group, now_ms)
                        shard.schedule(group_id, shard.group_deadline(group))
            if shard.next_retention_ms <= now_ms:
                shard.next_retention_ms = now_ms + self.settings.offsets_retention_check_interval_ms
                effects += offsets.expire_offsets(shard, now_ms)
        return effects

    def next_deadline(self) -> int | None:
        return min((shard.next_deadline() for shard in self._shards.values()), default=None)

    def added_deadline(self) -> int | None:
        """The earliest deadline added since the last call (None: none), and forget it. The
        shell's timer sleeps until ``next_deadline()``, a min over every loaded partition (50 of
        them: ~10 us); after each request it only needs to know whether anything earlier was
        scheduled, and most requests (commits, fetches) schedule nothing."""
        added, self._added_deadline = self._added_deadline, None
        return added

    def _timer_added(self, deadline_ms: int) -> None:
        if self._added_deadline is None or deadline_ms < self._added_deadline:
            self._added_deadline = deadline_ms

    # -- additions beyond the fixed contract (for metrics and tests) --------------------------
    def owned_partitions(self) -> list[int]:
        return sorted(self._shards)

    def groups(self, partition: int | None = None) -> list:
        """The live ``ClassicGroup`` objects (of one partition, or all loaded ones)."""
        shards = self._shards.values() if partition is None else [self._shards[partition]]
        return [g for shard in shards for g in shard.groups.values()]

    def statistics(self) -> dict:
        """Sizes of everything the core holds (STYLE: every in-flight map visible)."""
        shards = list(self._shards.values())
        groups = [g for shard in shards for g in shard.groups.values()]
        members = [m for g in groups for m in g.members.values()]
        return {
            "partitions_loaded": len(shards),
            "partitions_loading": len(self._loading),
            "groups": len(groups),
            "members": len(members),
            "pending_members": sum(len(g.pending_members) for g in groups),
            "parked_joins": sum(m.join_waiter is not None for m in members),
            "parked_syncs": sum(m.sync_waiter is not None for m in members),
            "offsets": sum(len(o) for shard in shards for o in shard.offsets.values()),
            "pending_writes": sum(len(shard.writes) for shard in shards),
            "timer_entries": sum(len(shard._timers) for shard in shards),
            "skipped_records": sum(shard.skipped_records for shard in shards),
            "pending_txn_offsets": sum(len(p) for shard in shards for p in shard.txn_offsets.values()),
        }

    def committed_offsets(self, group_id: str) -> dict:
        """{(topic, partition): OffsetAndMetadata} from the cache of the group's partition."""
        shard = self._shards.get(partition_for(group_id, self.settings.num_partitions))
        return dict(shard.offsets.get(group_id, {})) if shard is not None else {}
