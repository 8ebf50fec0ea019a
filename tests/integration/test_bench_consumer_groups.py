"""Smoke test of ``bench/consumer_groups.py``: its quick mode against pylog alone produces every
row, with numbers in the range a working group coordinator gives (a failed measurement becomes
the cell's text, and the bench's own checks fail a row whose commits erred, whose committed
offsets came back different, or whose consumer missed records)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
_BENCH_TIMEOUT_S = 240
# Upper bounds far above the targets (1 s, 10 ms, 3 s) so that a loaded shared machine passes,
# yet below what a broken coordinator gives: a member that never hears of the rebalance waits
# for its session timeout (10 s); a load that never ends runs into the bench's 120 s deadline.
_REBALANCE_MS_MAX = 9_000
_TAKEOVER_S_MAX = 60


def test_quick_mode_against_pylog_gives_sane_numbers(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "consumer_groups.py"), "--quick",
                           "--systems", "pylog", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=_BENCH_TIMEOUT_S, cwd=REPO,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert not results["failed_phases"], done.stderr[-3000:]
    rows = {row["name"]: row["values"]["pylog"] for row in results["rows"]}
    failed = {name: value for name, value in rows.items() if not isinstance(value, (int, float))}
    assert not failed, f"{failed}\n{done.stderr[-3000:]}"

    assert 0 < rows["rebalance 3 -> 4 members"] < _REBALANCE_MS_MAX
    assert rows["offset commits, 1 client"] > 50
    assert 0 < rows["offset commit latency p50"] <= rows["offset commit latency p99"] < 1_000
    assert rows["broker CPU per commit"] > 0
    assert 0 <= rows["coordinator takeover after restart"] < _TAKEOVER_S_MAX
    assert rows["coordinator takeover, from the new process"] >= rows["coordinator takeover after restart"]
    assert rows["consume with assign()"] > 0 and rows["consume with subscribe()"] > 0
    assert rows["subscribe / assign"] > 0
    assert (tmp_path / "table.md").read_text().count("\n") == len(results["rows"]) + 2
