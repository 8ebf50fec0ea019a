"""The deterministic simulation tier: many seeds, each a cluster of three simulated brokers with
crashes, SIGSTOPs, SIGTERMs, power losses and network partitions, invariants checked after every
event (``broker.sim.run``). Time-bounded: seeds run in order from ``PYLOG_SIM_FIRST_SEED``
(default 0) until ``PYLOG_SIM_BUDGET_S`` (default 30) seconds are spent, at least
``PYLOG_SIM_MIN_SEEDS`` (default 25). A failing seed prints its violations, faults and how to
replay it: ``python -m broker.sim --seed N --verbose``.
"""

from __future__ import annotations

import os
import time

from broker.sim import SimSettings, run_simulation

BUDGET_S = float(os.environ.get("PYLOG_SIM_BUDGET_S", "30"))
MIN_SEEDS = int(os.environ.get("PYLOG_SIM_MIN_SEEDS", "25"))
FIRST_SEED = int(os.environ.get("PYLOG_SIM_FIRST_SEED", "0"))


def test_many_seeds_keep_every_invariant():
    started = time.monotonic()
    failures, seeds, acked = [], 0, 0
    seed = FIRST_SEED
    while seeds < MIN_SEEDS or time.monotonic() - started < BUDGET_S:
        result = run_simulation(seed, SimSettings())
        seeds += 1
        acked += result.acked
        if not result.ok:
            failures.append(result.summary())
        seed += 1
    assert not failures, f"{len(failures)} of {seeds} seeds failed:\n" + "\n".join(failures)
    assert acked > seeds * 50, "the producer made too little progress for the run to mean much"
