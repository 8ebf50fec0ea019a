"""A seed is a reproducible test: the same seed gives the same run, in this process and in
another one with a different string hash seed (set iteration order must never leak in)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from broker.sim import SimSettings, run_simulation

REPO = Path(__file__).resolve().parents[2]


def test_the_same_seed_runs_the_same():
    first, second = run_simulation(7, SimSettings()), run_simulation(7, SimSettings())
    assert (first.events, first.sim_ms, first.acked, first.faults, first.trace) == \
        (second.events, second.sim_ms, second.acked, second.faults, second.trace)


def test_a_seed_replays_in_another_process_with_another_hash_seed():
    def line(hash_seed: str) -> str:
        out = subprocess.run([sys.executable, "-m", "broker.sim", "--seed", "11"], cwd=REPO,
                             capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": hash_seed},
                             timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.split(" (")[0]  # drop the wall-clock time

    assert line("1") == line("12345")
