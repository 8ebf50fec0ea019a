"""The group coordinator's simulation tier (``broker.sim.groups``): many seeds of model consumers
against ``GroupCoordinatorCore`` with clients that stop, leave and restart, failing appends and
coordinator moves; and proof that the invariants bite (mutated cores and clients fail them).

Seeds: at least ``PYLOG_GROUP_SIM_MIN_SEEDS`` (default 200) from ``PYLOG_GROUP_SIM_FIRST_SEED``
(default 0), more while ``PYLOG_GROUP_SIM_BUDGET_S`` (default 10) seconds last. Replay one:
``python -m broker.sim.groups --seed N --verbose``.
"""

from __future__ import annotations

import os
import time

import pytest

from broker.coordinator.group import shard as shard_module
from broker.coordinator.group.core import GroupCoordinatorCore
from broker.sim import group_client
from broker.sim.groups import run_group_simulation

MIN_SEEDS = int(os.environ.get("PYLOG_GROUP_SIM_MIN_SEEDS", "200"))
BUDGET_S = float(os.environ.get("PYLOG_GROUP_SIM_BUDGET_S", "10"))
FIRST_SEED = int(os.environ.get("PYLOG_GROUP_SIM_FIRST_SEED", "0"))


def test_many_seeds_keep_every_invariant():
    started = time.monotonic()
    failures, seeds, generations, commits, moves, transactions = [], 0, 0, 0, 0, {True: 0, False: 0}
    seed = FIRST_SEED
    while seeds < MIN_SEEDS or time.monotonic() - started < BUDGET_S:
        result = run_group_simulation(seed)
        seeds += 1
        generations += result.generations
        commits += result.commits_acked
        moves += result.moves
        for committed, count in result.transactions.items():
            transactions[committed] += count
        if not result.ok:
            failures.append(result.summary())
        seed += 1
    assert not failures, f"{len(failures)} of {seeds} seeds failed:\n" + "\n".join(failures[:5])
    # the runs must have done something worth checking
    assert generations > seeds * 3 and commits > seeds * 100 and moves > seeds * 2 and min(transactions.values()) > seeds * 5


def test_a_seed_replays_identically():
    a, b = run_group_simulation(11, verbose=True), run_group_simulation(11, verbose=True)
    assert a.summary() == b.summary() and a.trace == b.trace


def _fails_somewhere(seeds=range(30)) -> list[str]:
    return [v for seed in seeds for v in run_group_simulation(seed).violations]


def test_invariant_every_request_answered_catches_a_core_that_forgets_parked_requests(monkeypatch):
    original = GroupCoordinatorCore.unload_partition

    def forgetful(self, partition):
        original(self, partition)
        return []
    monkeypatch.setattr(GroupCoordinatorCore, "unload_partition", forgetful)
    assert any("never answered" in v for v in _fails_somewhere())


def test_invariant_committed_offsets_catches_a_cache_that_misses_commits(monkeypatch):
    original = shard_module.Shard.put_offset

    def lossy(self, group_id, topic, partition, value):
        if value is not None and value.offset % 7 == 3:
            return
        original(self, group_id, topic, partition, value)
    monkeypatch.setattr(shard_module.Shard, "put_offset", lossy)
    assert any("acknowledged" in v for v in _fails_somewhere())


def test_invariant_transactional_offsets_catches_a_core_that_keeps_aborted_offsets(monkeypatch):
    from broker.coordinator.group import txn_offsets
    original = txn_offsets.end_transaction

    def commits_always(shard, producer_id, committed):
        return original(shard, producer_id, True)
    monkeypatch.setattr(txn_offsets, "end_transaction", commits_always)
    assert any("transactional offsets" in v for v in _fails_somewhere(range(1)))


def test_invariant_coverage_catches_an_assignment_with_overlaps(monkeypatch):
    def overlapping(member_ids, partitions):
        return {m: list(range(partitions)) for m in sorted(member_ids)}
    monkeypatch.setattr(group_client, "range_assignment", overlapping)
    assert any("exactly once" in v for v in _fails_somewhere(range(5)))


def test_invariant_generations_catch_a_core_that_reuses_generations(monkeypatch):
    from broker.coordinator.group import group as group_module
    original = group_module.ClassicGroup.init_next_generation

    def stuck(self, now_ms):
        original(self, now_ms)
        if self.generation_id > 2:
            self.generation_id = 2
    monkeypatch.setattr(group_module.ClassicGroup, "init_next_generation", stuck)
    assert _fails_somewhere(range(10))


@pytest.mark.parametrize("partitions,members,expected", [
    (6, ["b", "a"], {"a": [0, 1, 2], "b": [3, 4, 5]}),
    (5, ["x", "y", "z"], {"x": [0, 1], "y": [2, 3], "z": [4]}),
    (2, ["m1", "m2", "m3"], {"m1": [0], "m2": [1], "m3": []}),
])
def test_model_range_assignment(partitions, members, expected):
    assert group_client.range_assignment(members, partitions) == expected


def test_invariant_liveness_catches_a_member_that_never_comes_back(monkeypatch):
    original = group_client.GroupClient.rejoin_after_error

    def gives_up(self, code):
        if code == 27 and self.name == "client1":
            self.state = "idle"  # a client that drops out of the group without leaving
            return
        original(self, code)
    monkeypatch.setattr(group_client.GroupClient, "rejoin_after_error", gives_up)
    assert any("not settled" in v for v in _fails_somewhere(range(10)))
