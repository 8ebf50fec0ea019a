"""Shared helpers for the benchmarks: timing with repeats and one printed line per measurement."""

from __future__ import annotations

import json
import statistics
import time
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Run ``fn`` ``repeat`` times; return the median wall time in seconds (robust on a busy box)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(name: str, **fields: object) -> None:
    """Print a human line and a JSON line (for scripts) for one measurement."""
    human = "  ".join(f"{k}={_fmt(v)}" for k, v in fields.items())
    print(f"{name:<34} {human}")
    print("JSON " + json.dumps({"bench": name, **fields}), flush=True)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 100 else f"{value:,.0f}"
    return str(value)
