"""``pylog perf --plot FILE.png``: a latency histogram and throughput over time, with matplotlib.

matplotlib is imported here, lazily (only when a plot is asked for), with the non-interactive
Agg backend so it works without a display.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plot_run", "throughput_series"]


def throughput_series(timeline: list[tuple[float, int]], bucket_ms: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    """(seconds since the first event, records/s) per ``bucket_ms`` from (time_ms, records)."""
    if not timeline:
        return np.empty(0), np.empty(0)
    times = np.array([t for t, _ in timeline], dtype=np.float64)
    counts = np.array([c for _, c in timeline], dtype=np.float64)
    buckets = ((times - times.min()) // bucket_ms).astype(np.int64)
    totals = np.bincount(buckets, weights=counts)
    seconds = np.arange(len(totals)) * bucket_ms / 1000.0
    return seconds, totals * (1000.0 / bucket_ms)


def plot_run(path: str, title: str, latencies_ms: np.ndarray, timeline: list[tuple[float, int]],
             latency_label: str = "latency (ms)") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    if len(latencies_ms):
        positive = np.maximum(latencies_ms, 1e-3)
        bins = np.logspace(np.log10(positive.min()), np.log10(positive.max() * 1.01 + 1e-3), 60)
        left.hist(positive, bins=bins, color="#4477aa")
        left.set_xscale("log")
        for q, style in ((50, "-"), (99, "--"), (99.9, ":")):
            value = float(np.percentile(positive, q))
            left.axvline(value, color="#cc3311", linestyle=style, label=f"p{q:g} = {value:.2f} ms")
        left.legend()
    left.set_xlabel(latency_label)
    left.set_ylabel("samples")
    left.set_title("latency")
    seconds, rates = throughput_series(timeline)
    right.plot(seconds, rates, color="#228833")
    right.set_xlabel("time (s)")
    right.set_ylabel("records/s (100 ms buckets)")
    right.set_title("throughput")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
