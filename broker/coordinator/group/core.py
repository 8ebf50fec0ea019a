"""``GroupCoordinatorCore``: the group coordinator of one broker, pure and synchronous.

INTERFACE CONTRACT (fixed; the shell in ``broker.server.group_coordinator`` and the simulation tier
are written against it — change it only together with them):

Inputs
------
* ``handle(token, api_key, api_version, request, client_id, client_host, now_ms) -> list[Effect]``
  — one decoded request of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  OffsetDelete, ListGroups, DescribeGroups, DeleteGroups (``request`` is the ``broker.wire``
  request object of that API at ``api_version``). ``token`` is the shell's opaque handle for the
  request: every request gets exactly one ``Reply(token, response)``, now or later (JoinGroup and
  SyncGroup park until the rebalance completes; commits wait for their append).
* ``load_partition(partition, records, now_ms) -> list[Effect]`` — this broker now leads
  ``__consumer_offsets`` partition ``partition``; ``records`` is every (key bytes, value bytes or
  None) of the partition up to its high watermark, in offset order. Until ``begin_load`` ...
  ``load_partition`` the groups of that partition answer COORDINATOR_LOAD_IN_PROGRESS (14).
* ``begin_load(partition)`` — leadership gained, records not read yet.
* ``unload_partition(partition) -> list[Effect]`` — leadership lost: its groups are dropped, parked
  requests are answered NOT_COORDINATOR (16), pending writes are forgotten (their
  ``write_done`` is then ignored).
* ``write_done(write_id, error_code, now_ms) -> list[Effect]`` — an ``Append`` finished: 0 when
  the records are replicated (acks=all), else the produce error code. The cache changes only now.
* ``tick(now_ms) -> list[Effect]`` — timers: session expiry, rebalance timeout, initial
  rebalance delay, offsets retention. ``next_deadline()`` says when the next tick is due
  (None: no timer).

Outputs (effects, in order)
---------------------------
* ``Reply(token, response)`` — send ``response`` (a ``broker.wire`` response object) for ``token``.
* ``Append(write_id, partition, records)`` — append ``records`` (list of (key, value-or-None)
  bytes) as one batch to ``__consumer_offsets`` partition ``partition`` with acks=all, then call
  ``write_done(write_id, ...)``.

The group of a request is ``partition_for(group_id, settings.num_partitions)``; a group whose
partition is neither loaded nor loading answers NOT_COORDINATOR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["GroupSettings", "Reply", "Append", "Effect", "GroupCoordinatorCore", "partition_for"]


@dataclass(frozen=True)
class GroupSettings:
    """Kafka's broker configs for groups, with Kafka's defaults."""

    num_partitions: int = 50                         # offsets.topic.num.partitions
    initial_rebalance_delay_ms: int = 3_000          # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6_000              # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000          # group.max.session.timeout.ms
    max_size: int = 2**31 - 1                        # group.max.size
    offset_metadata_max_bytes: int = 4_096           # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3_600_000   # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms


@dataclass(frozen=True)
class Reply:
    token: Any
    response: Any


@dataclass(frozen=True)
class Append:
    write_id: int
    partition: int
    records: list  # list[tuple[bytes, bytes | None]]


Effect = Reply | Append


def partition_for(group_id: str, num_partitions: int) -> int:
    """``Utils.abs(groupId.hashCode) % num_partitions``: Java's String.hashCode over UTF-16 code
    units with int32 wrap-around, then ``& 0x7fffffff`` (Kafka's ``Utils.abs``)."""
    h = 0
    data = group_id.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % num_partitions


class GroupCoordinatorCore:
    def __init__(self, settings: GroupSettings, rng) -> None:
        self.settings = settings
        self._rng = rng  # random.Random: member ids (clientId-UUID)

    def handle(self, token, api_key: int, api_version: int, request, client_id: str,
               client_host: str, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def begin_load(self, partition: int) -> None:
        raise NotImplementedError

    def load_partition(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                       now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def unload_partition(self, partition: int) -> list[Effect]:
        raise NotImplementedError

    def write_done(self, write_id: int, error_code: int, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def tick(self, now_ms: int) -> list[Effect]:
        raise NotImplementedError

    def next_deadline(self) -> int | None:
        raise NotImplementedError
