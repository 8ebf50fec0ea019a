"""The pure core of observability: one plain-data snapshot of what a broker knows.

``broker_state(...)`` reads the services' in-memory state (the cluster metadata, the local
partitions and logs, the cleaner's statistics, the group and transaction coordinators' caches)
and returns dicts, lists, strings and numbers only: nothing in it refers back to a live object,
so the renderer thread and the HTTP server can read it while the event loop goes on changing
the broker. It runs on the event loop, once per ``metrics.snapshot.interval.ms``; its cost grows
with partitions + groups' committed offsets + transactions, not with traffic.

What it leaves out on purpose: configs (they can hold passwords), member metadata and
assignments (opaque client bytes), and anything a reader could use to change state.

Two views of partitions, as in Kafka:
- the cluster view (every broker has it, from ZooKeeper): leader, replicas, ISR, and
  ``under_replicated`` (ISR smaller than the replica set) for the status page;
- the local view: logs on this broker (size, segments, offsets) and the gauges Kafka computes per
  broker (under-replicated and under-min-ISR among partitions *led here*, leader count; offline
  partitions only on the active controller).
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["broker_state", "group_lag"]

_OPEN_TXN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
# Committed offsets looked at per snapshot (lag rows): the snapshot runs on the event loop, and a
# coordinator can hold a million offsets (bench/consumer_groups.py's takeover); groups past the
# budget are listed with ``lag_truncated`` and no lag rows.
LAG_ROWS_MAX = 10_000


def broker_state(broker_id: int, now_ms: int, snapshot, partitions, *, is_controller: bool,
                 default_min_isr: int, end_offsets: Mapping[tuple[str, int], int],
                 cleaner_stats=None, group_core=None, txn_core=None,
                 isr_changes: Mapping[str, int] | None = None,
                 authentication: Mapping[str, Mapping[str, int]] | None = None) -> dict:
    """The snapshot: see the module docstring. ``partitions``: this broker's ``Partition``
    objects; ``end_offsets``: high watermarks of partitions led elsewhere (for lag)."""
    local = {p.key: p for p in partitions}
    ends = dict(end_offsets)
    for key, p in local.items():
        if p.is_leader:
            ends[key] = p.high_watermark
    topics = [_topic(name, meta, local, default_min_isr) for name, meta in sorted(snapshot.topics.items())]
    return {
        "broker_id": broker_id,
        "time_ms": now_ms,
        "cluster_id": snapshot.cluster_id,
        "controller_id": snapshot.controller_id,
        "brokers": [_broker(reg) for _, reg in sorted(snapshot.brokers.items())],
        "topics": topics,
        "local": _local_gauges(list(local.values()), topics, is_controller, isr_changes or {}),
        "logs": [_log(p) for _, p in sorted(local.items())],
        "cleaner": _cleaner(cleaner_stats),
        "groups": _groups(group_core, ends) if group_core is not None else [],
        "transactions": _transactions(txn_core, now_ms) if txn_core is not None else [],
        # decisions carried out by this coordinator, by result (copied: the core goes on counting)
        "transactions_ended": dict(txn_core.ended) if txn_core is not None else {},
        # SASL listeners' authentication counters (copied: the gates go on counting)
        "authentication": {name: dict(counts) for name, counts in sorted((authentication or {}).items())},
    }


def _broker(reg) -> dict:
    endpoint = reg.endpoints[0] if reg.endpoints else None
    return {"id": reg.broker_id, "host": endpoint.host if endpoint else None,
            "port": endpoint.port if endpoint else None}


def _topic(name: str, meta, local: Mapping, default_min_isr: int) -> dict:
    min_isr = _int(meta.config.get("min.insync.replicas"), default_min_isr)
    rows = []
    for index, view in sorted(meta.partitions.items()):
        state = view.state
        leader = state.leader if state is not None else -1
        isr = list(state.isr) if state is not None else []
        replicas = list(view.replicas)
        p = local.get((name, index))
        rows.append({
            "partition": index, "leader": leader, "replicas": replicas, "isr": isr,
            "under_replicated": len(isr) < len(replicas),
            "under_min_isr": len(isr) < min(min_isr, max(1, len(replicas))),
            "offline": leader < 0,
            "size_bytes": p.log.size_in_bytes if p is not None else None,
            "log_end_offset": p.log.log_end_offset if p is not None else None,
        })
    return {"name": name, "internal": name.startswith("__"), "partitions": rows}


def _local_gauges(partitions: list, topics: list, is_controller: bool, isr_changes: Mapping[str, int]) -> dict:
    led = [p for p in partitions if p.is_leader]
    return {
        "partition_count": len(partitions),
        "leader_count": len(led),
        "under_replicated": sum(len(p.isr) < len(p.replicas) for p in led),
        "under_min_isr": sum(len(p.isr) < p.effective_min_isr for p in led),
        "at_min_isr": sum(len(p.isr) == p.effective_min_isr for p in led),
        # Kafka reports offline partitions on the active controller only (0 elsewhere).
        "offline": sum(r["offline"] for t in topics for r in t["partitions"]) if is_controller else 0,
        "active_controller": int(is_controller),
        "isr_shrinks": isr_changes.get("shrinks", 0),
        "isr_expands": isr_changes.get("expands", 0),
    }


def _log(p) -> dict:
    log = p.log
    return {"topic": p.topic, "partition": p.partition, "size_bytes": log.size_in_bytes,
            "segments": len(log.segments), "log_start_offset": log.log_start_offset,
            "log_end_offset": log.log_end_offset, "high_watermark": p.high_watermark,
            "is_leader": p.is_leader}


def _cleaner(stats) -> dict:
    if stats is None:
        return {"enabled": False, "dirty_ratio": [], "uncleanable": 0, "max_dirty_ratio": 0.0}
    ratios = [{"topic": t, "partition": p, "ratio": r} for (t, p), r in sorted(stats.dirty_ratio.items())]
    return {"enabled": True, "dirty_ratio": ratios, "uncleanable": len(stats.uncleanable),
            "max_dirty_ratio": max((r["ratio"] for r in ratios), default=0.0)}


def _groups(core, ends: Mapping[tuple[str, int], int]) -> list:
    shards = list(getattr(core, "_shards", {}).values())
    live = {g.group_id: g for shard in shards for g in shard.groups.values()}
    offsets = {gid: o for shard in shards for gid, o in shard.offsets.items()}
    out = []
    budget = LAG_ROWS_MAX
    for group_id in sorted(set(live) | set(offsets)):
        group = live.get(group_id)
        committed = offsets.get(group_id, {})
        truncated = len(committed) > budget
        lag = [] if truncated else group_lag(committed, ends)
        budget = max(0, budget - len(committed))
        out.append({
            "group": group_id,
            "state": group.state.name if group is not None else "EMPTY",
            "generation": group.generation_id if group is not None else 0,
            "protocol": group.protocol_name if group is not None else None,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host}
                        for m in group.members.values()] if group is not None else [],
            "lag": lag,
            "total_lag": sum(row["lag"] for row in lag if row["lag"] is not None),
            "lag_truncated": truncated,
        })
    return out


def group_lag(committed: Mapping[tuple[str, int], object], ends: Mapping[tuple[str, int], int]) -> list:
    """Per partition: committed offset, end offset (the leader's high watermark, what a
    read_uncommitted consumer can reach) and their difference; ``None`` where the end is unknown."""
    rows = []
    for (topic, partition), meta in sorted(committed.items()):
        end = ends.get((topic, partition))
        rows.append({"topic": topic, "partition": partition, "committed": meta.offset, "end": end,
                     "lag": max(0, end - meta.offset) if end is not None else None})
    return rows


def _transactions(core, now_ms: int) -> list:
    out = []
    for shard in core.shards():
        for txn_id, meta in shard.txns.items():
            state = meta.state.name
            if state not in _OPEN_TXN_STATES:
                continue
            out.append({"transactional_id": txn_id, "producer_id": meta.producer_id,
                        "producer_epoch": meta.producer_epoch, "state": state,
                        "age_ms": max(0, now_ms - meta.start_ms) if meta.start_ms >= 0 else 0,
                        "partitions": sorted(f"{t}-{p}" for t, p in meta.partitions)})
    return sorted(out, key=lambda t: -t["age_ms"])


def _int(raw, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default
