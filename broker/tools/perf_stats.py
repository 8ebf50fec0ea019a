"""Measurement helpers for ``pylog perf``: latency percentiles, run summaries, a throughput
throttle and a progress line. Pure apart from the clock and the stream they are given.

Percentiles follow Kafka's perf tools: the value at index ``int(p * n)`` of the sorted samples
(``ProducerPerformance.percentiles``), here optionally weighted (a batch's latency counts once
per record in it, so a 9000-record batch weighs what 9000 single sends would).
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

__all__ = ["LatencySamples", "RunResult", "summarize_runs", "Throttle", "Progress", "PERCENTILES"]

PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("p99_9", 0.999))


class LatencySamples:
    """Latencies in ms with weights (records each sample stands for), bounded: past
    ``samples_max`` samples every other one is kept (and the stride doubles), as Kafka's
    ``Stats`` keeps a sampled subset."""

    def __init__(self, samples_max: int = 500_000) -> None:
        self.samples_max = samples_max
        self._values: list[float] = []
        self._weights: list[int] = []
        self._stride = 1
        self._seen = 0
        self.count = 0  # records covered, sampled or not
        self.total_ms = 0.0
        self.max_ms = 0.0

    def add(self, latency_ms: float, weight: int = 1) -> None:
        self.count += weight
        self.total_ms += latency_ms * weight
        if latency_ms > self.max_ms:
            self.max_ms = latency_ms
        self._seen += 1
        if self._seen % self._stride:
            return
        self._values.append(latency_ms)
        self._weights.append(weight)
        if len(self._values) >= self.samples_max:
            self._values = self._values[::2]
            self._weights = self._weights[::2]
            self._stride *= 2

    def add_many(self, latencies_ms: np.ndarray) -> None:
        """Many weight-1 samples at once (consumer-side latencies of a polled batch)."""
        if not len(latencies_ms):
            return
        self.count += len(latencies_ms)
        self.total_ms += float(latencies_ms.sum())
        self.max_ms = max(self.max_ms, float(latencies_ms.max()))
        picked = latencies_ms[(self._seen + np.arange(len(latencies_ms))) % self._stride == 0]
        self._seen += len(latencies_ms)
        self._values.extend(picked.tolist())
        self._weights.extend([1] * len(picked))
        while len(self._values) >= self.samples_max:
            self._values = self._values[::2]
            self._weights = self._weights[::2]
            self._stride *= 2

    def values(self) -> np.ndarray:
        return np.asarray(self._values, dtype=np.float64)

    def percentiles(self) -> dict[str, float]:
        out = {"avg": self.total_ms / self.count if self.count else 0.0, "max": self.max_ms}
        if not self._values:
            return {**out, **{name: 0.0 for name, _ in PERCENTILES}}
        values = np.asarray(self._values)
        weights = np.asarray(self._weights, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        values, cumulative = values[order], np.cumsum(weights[order])
        total = cumulative[-1]
        for name, p in PERCENTILES:
            index = min(int(np.searchsorted(cumulative, p * total, side="right")), len(values) - 1)
            out[name] = float(values[index])
        return out


@dataclass
class RunResult:
    records: int
    bytes: int
    elapsed_s: float
    latency: dict[str, float]
    extra: dict = field(default_factory=dict)
    latency_values: object = None  # the (sampled) latencies in ms, for plots; not in as_dict

    @property
    def records_per_sec(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / (1024 * 1024) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def as_dict(self) -> dict:
        return {"records": self.records, "bytes": self.bytes, "elapsed_s": round(self.elapsed_s, 6),
                "records_per_sec": round(self.records_per_sec, 1), "mb_per_sec": round(self.mb_per_sec, 3),
                "latency_ms": {k: round(v, 3) for k, v in self.latency.items()}, **self.extra}


def summarize_runs(runs: list[RunResult]) -> dict:
    """The median run's numbers at the top level, and min/median/max of each across runs."""
    assert runs, "at least one run"

    def spread(values: list[float]) -> dict:
        return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
                "max": round(max(values), 3)}

    rates = [r.records_per_sec for r in runs]
    mbs = [r.mb_per_sec for r in runs]
    latency_keys = ["p50", "p99", "p99_9", "avg", "max"]
    out = {
        "records_per_sec": round(statistics.median(rates), 1),
        "mb_per_sec": round(statistics.median(mbs), 3),
        "latency_ms": {k: round(statistics.median([r.latency.get(k, 0.0) for r in runs]), 3)
                       for k in ("avg", "p50", "p95", "p99", "p99_9", "max")},
        "runs": len(runs),
        "records": runs[0].records,
    }
    if len(runs) > 1:
        out["records_per_sec_runs"] = spread(rates)
        out["mb_per_sec_runs"] = spread(mbs)
        out["latency_ms_runs"] = {k: spread([r.latency.get(k, 0.0) for r in runs]) for k in latency_keys}
    return out


class Throttle:
    """Kafka's ``ThroughputThrottler``: keep ``sent`` at or below ``rate * elapsed`` by
    sleeping, but only once the sender is ahead of its schedule by ``sleep_min_s`` (Kafka's
    ``MIN_SLEEP_NS``, 2 ms); below that it sends on, so records go out in bursts of about
    ``rate * sleep_min_s`` per tick. Sleeping after every record cost a sleep call, a GIL
    hand-off and a context switch per record (10,000 a second on two shared cores); measured
    in ``pylog perf e2e`` at 10,000 records/s, 2 ms ticks beat 1 ms and 0.2 ms ones on p50
    and on the sending thread's CPU. A rate <= 0 never sleeps. ``clock`` is
    ``time.monotonic``-like (seconds)."""

    def __init__(self, rate_per_s: float, clock=time.monotonic, sleep=time.sleep,
                 sleep_min_s: float = 0.002) -> None:
        self.rate = rate_per_s
        self.sleep_min_s = sleep_min_s
        self._clock = clock
        self._sleep = sleep
        self._start = clock()

    def wait(self, sent: int) -> None:
        if self.rate <= 0:
            return
        ahead = sent / self.rate - (self._clock() - self._start)
        if ahead >= self.sleep_min_s:
            self._sleep(ahead)


class Progress:
    """A one-line progress bar on ``stream``, redrawn at most every ``interval_s``."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, enabled: bool | None = None,
                 interval_s: float = 0.5, clock=time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = max(total, 1)
        self.label = label
        self._interval = interval_s
        self._clock = clock
        self._start = clock()
        self._last = -1e9
        self._drawn = False

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        fraction = min(done / self.total, 1.0)
        width = 30
        filled = int(fraction * width)
        rate = done / (now - self._start) if now > self._start else 0.0
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{fraction * 100:5.1f}% {done:,}/{self.total:,} {rate:,.0f} rec/s")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
