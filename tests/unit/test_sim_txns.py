"""The transaction coordinator's simulation tier (``broker.sim.txns``): many seeds of model
transactional producers against ``TxnCoordinatorCore`` with crashes, zombies, stalls past the
timeout, delayed EndTxn, failing appends and allocations, and coordinator moves; and proof that
the invariants bite (mutated cores fail them).

Seeds: at least ``PYLOG_TXN_SIM_MIN_SEEDS`` (default 200) from ``PYLOG_TXN_SIM_FIRST_SEED``
(default 0), more while ``PYLOG_TXN_SIM_BUDGET_S`` (default 10) seconds last. Replay one:
``python -m broker.sim.txns --seed N --verbose``.
"""

from __future__ import annotations

import os
import time

import pytest

from broker.coordinator.txn import apis, core as core_module
from broker.sim.txns import TxnSimSettings, run_txn_simulation

MIN_SEEDS = int(os.environ.get("PYLOG_TXN_SIM_MIN_SEEDS", "200"))
BUDGET_S = float(os.environ.get("PYLOG_TXN_SIM_BUDGET_S", "10"))
FIRST_SEED = int(os.environ.get("PYLOG_TXN_SIM_FIRST_SEED", "0"))
MUTANT_SEEDS = 40
TV2_SEEDS = 20  # ~1 s each under load
TV2 = TxnSimSettings(transaction_version=2)


def test_many_seeds_keep_every_invariant():
    started = time.monotonic()
    failures, seeds, committed, aborted, zombies, moves, timeouts = [], 0, 0, 0, 0, 0, 0
    seed = FIRST_SEED
    while seeds < MIN_SEEDS or time.monotonic() - started < BUDGET_S:
        result = run_txn_simulation(seed)
        seeds += 1
        committed += result.committed
        aborted += result.aborted
        zombies += result.fenced_requests
        moves += result.moves
        timeouts += result.timeout_aborts
        if not result.ok:
            failures.append(result.summary())
        seed += 1
    assert not failures, f"{len(failures)} of {seeds} seeds failed:\n" + "\n".join(failures[:5])
    # the faults happened: the seeds exercised what the invariants are about
    assert committed > 100 * seeds and aborted > 10 * seeds
    assert zombies > seeds // 2 and moves > seeds and timeouts > seeds // 4


def test_transaction_version_2_survives_end_txn_copies_past_the_next_transaction():
    """EndTxn v5 (epoch bumped at every EndTxn) with the network duplicating EndTxn requests and
    delivering the copy seconds later: every invariant holds and copies were refused."""
    results = [run_txn_simulation(seed, TV2) for seed in range(FIRST_SEED, FIRST_SEED + TV2_SEEDS)]
    failures = [r.summary() for r in results if not r.ok]
    assert not failures, "\n".join(failures[:5])
    assert sum(r.duplicates_fenced for r in results) > TV2_SEEDS // 2


def test_producer_ids_rotate_when_epochs_run_out():
    """Every id starts near Short.MAX: version-2 EndTxns (and InitProducerIds) run the epoch out
    within the run and hand out new producer ids, under the same faults, keeping every
    invariant (the markers of the rotating decision carry the old id at the last epoch)."""
    settings = TxnSimSettings(transaction_version=2, start_epoch=32_755)
    results = [run_txn_simulation(seed, settings) for seed in range(FIRST_SEED, FIRST_SEED + 6)]
    failures = [r.summary() for r in results if not r.ok]
    assert not failures, "\n".join(failures[:5])
    assert sum(r.rotations for r in results) >= 6


def test_an_end_txn_v5_that_does_not_bump_the_epoch_is_caught(monkeypatch):
    """Without the bump a delayed copy commits the next transaction of the id."""
    original = apis.end_transaction

    def no_bump(*args, **kwargs):
        return original(*args, **{**kwargs, "bump_epoch": False})
    monkeypatch.setattr(apis, "end_transaction", no_bump)
    _first_failure("before its EndTxn(commit) was sent", TV2)


def _first_failure(match: str, settings: TxnSimSettings | None = None) -> str:
    for seed in range(MUTANT_SEEDS):
        result = run_txn_simulation(seed, settings)
        if not result.ok:
            text = "\n".join(result.violations)
            assert match in text, text
            return text
    pytest.fail(f"no seed of {MUTANT_SEEDS} caught the mutant ({match!r})")


def test_markers_that_disagree_with_the_decision_are_caught(monkeypatch):
    original = core_module.WriteMarkers

    def always_commit(marker_id, pid, epoch, committed, coordinator_epoch, partitions):
        return original(marker_id, pid, epoch, True, coordinator_epoch, partitions)
    monkeypatch.setattr(core_module, "WriteMarkers", always_commit)
    _first_failure("got the other marker")


def test_a_partition_left_out_of_the_markers_is_caught(monkeypatch):
    original = core_module.WriteMarkers

    def drop_last(marker_id, pid, epoch, committed, coordinator_epoch, partitions):
        return original(marker_id, pid, epoch, committed, coordinator_epoch, partitions[:-1] or partitions)
    monkeypatch.setattr(core_module, "WriteMarkers", drop_last)
    _first_failure("after the quiet period")


def test_a_load_that_does_not_resume_prepared_transactions_is_caught(monkeypatch):
    original_load = core_module.TxnCoordinatorCore.load_partition

    def load_without_resuming(self, partition, records, now_ms):
        self.send_markers = lambda shard, meta, now: []  # only while loading
        try:
            return original_load(self, partition, records, now_ms)
        finally:
            del self.send_markers
    monkeypatch.setattr(core_module.TxnCoordinatorCore, "load_partition", load_without_resuming)
    _first_failure("left in Prepare")


def test_a_core_that_lets_an_old_epoch_end_a_transaction_is_caught(monkeypatch):
    original = apis.end_transaction

    def epoch_blind(core, shard, meta, producer_id, producer_epoch, commit, from_client, now_ms, done, **kw):
        if from_client:
            producer_epoch = meta.producer_epoch
        return original(core, shard, meta, producer_id, producer_epoch, commit, from_client, now_ms, done, **kw)
    monkeypatch.setattr(apis, "end_transaction", epoch_blind)
    _first_failure("zombie")


def test_answering_end_txn_before_the_prepare_is_written_is_caught(monkeypatch):
    """A core that acknowledges the commit before its PrepareCommit is durable: a failed write or
    a coordinator move then loses an acknowledged commit."""
    original = apis.end_transaction

    def eager(core, shard, meta, producer_id, producer_epoch, commit, from_client, now_ms, done, **kw):
        if not from_client or meta.state is not apis.S.Ongoing or meta.pending is not None \
                or (producer_id, producer_epoch) != (meta.producer_id, meta.producer_epoch):
            return original(core, shard, meta, producer_id, producer_epoch, commit, from_client, now_ms, done, **kw)
        effects = done(0, now_ms)
        return effects + original(core, shard, meta, producer_id, producer_epoch, commit, from_client,
                                  now_ms, lambda code, now: [], **kw)
    monkeypatch.setattr(apis, "end_transaction", eager)
    _first_failure("has no marker")
