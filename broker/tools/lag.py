"""``pylog lag``: consumer-group lag per partition, once or as a live table (``--watch``), and a
plot of lag over time (``--plot FILE.png``)::

    GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  STORE
    loads  orders  0          1200            1250            50   kafka
    TOTAL-LAG 50

Offsets and lag come from ``pylog groups describe``'s own function
(``broker.tools.groups.group_offset_rows``: the offsets topic through the group coordinator, or
ZooKeeper's ``/consumers``, and ListOffsets for the log end), so the two commands never disagree.
``--store`` means what it means there; ``all`` reads both stores.

Each tick prints a table and the total. Without ``--watch`` there is one tick unless
``--iterations`` asks for more; with it ticks go on every ``--interval`` seconds until
``--iterations`` ticks (or Ctrl-C). ``--plot`` draws each partition's lag and the total over the
ticks (matplotlib, as ``pylog perf --plot``), written after the last tick.
"""

from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Sequence, TextIO

from broker.client import KafkaError
from broker.client.offset_store import OffsetStoreError
from broker.tools.group_plan import GroupRow, describe_table
from broker.tools.groups import STORES, GroupSession, group_offset_rows

__all__ = ["add_lag_parser", "run_lag", "LagSample", "lag_sample", "plot_lag"]

DEFAULT_INTERVAL_S = 5.0
SeriesKey = tuple[str, str, str, int]  # group, store, topic, partition


@dataclass(frozen=True)
class LagSample:
    """One tick: seconds since the first tick and the lag per (group, store, topic, partition);
    partitions whose lag is unknown (no log end) are left out."""

    seconds: float
    lags: dict[SeriesKey, int]

    @property
    def total(self) -> int:
        return sum(self.lags.values())


def add_lag_parser(subparsers) -> argparse.ArgumentParser:
    lag = subparsers.add_parser("lag", help="consumer-group lag per partition; --watch for a live table, --plot")
    lag.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]",
                     help="the cluster: log end offsets, and the kafka store")
    lag.add_argument("--zookeeper-connect", default=None, metavar="HOST:PORT[/CHROOT]",
                     help="the ZooKeeper holding /consumers (the zookeeper store)")
    lag.add_argument("--group", action="append", required=True, help="consumer group id (repeatable)")
    lag.add_argument("--store", choices=STORES + ("all",), default=None,
                     help="kafka (default without --zookeeper-connect), zookeeper (default with it), or all")
    lag.add_argument("--watch", action="store_true", help="print a new table every --interval seconds")
    lag.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="S",
                     help=f"seconds between ticks (default {DEFAULT_INTERVAL_S:g})")
    lag.add_argument("--iterations", type=int, default=None, metavar="N",
                     help="stop after N ticks (default: 1, or until Ctrl-C with --watch)")
    lag.add_argument("--plot", default=None, metavar="FILE.png", help="lag per partition and total over time")
    lag.add_argument("--timeout-ms", type=int, default=30_000, help="how long to wait for the cluster")
    return lag


def run_lag(args: argparse.Namespace, out: TextIO, err: TextIO | None = None, *,
            sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic) -> int:
    """Print ticks until done; returns the exit code. Raises ValueError for user mistakes and
    broker errors (``pylog`` prints them and exits 2). ``sleep`` waits between ticks."""
    err = err if err is not None else out
    if args.interval <= 0:
        raise ValueError(f"--interval must be positive, got {args.interval:g}")
    if args.iterations is not None and args.iterations <= 0:
        raise ValueError(f"--iterations must be positive, got {args.iterations}")
    if args.timeout_ms <= 0:
        raise ValueError(f"--timeout-ms must be positive, got {args.timeout_ms}")
    ticks = args.iterations if args.iterations is not None else (None if args.watch else 1)
    session = GroupSession(args)
    samples: list[LagSample] = []
    started: float | None = None
    try:
        stores = session.stores(mutating=False)
        for tick in itertools.count():
            rows = _rows(session, list(dict.fromkeys(args.group)), stores)
            now = monotonic()
            started = now if started is None else started
            samples.append(lag_sample(now - started, rows))
            out.write(f"{datetime.now(timezone.utc).isoformat(timespec='seconds')}\n")
            out.write(describe_table(rows, with_store=True, with_members=False))
            out.write(f"TOTAL-LAG {samples[-1].total}\n\n")
            out.flush()
            if ticks is not None and tick + 1 >= ticks:
                break
            sleep(args.interval)
    except KeyboardInterrupt:
        pass
    except (OffsetStoreError, KafkaError) as exc:
        raise ValueError(str(exc)) from None
    finally:
        session.close()
    if args.plot and samples:
        plot_lag(args.plot, f"consumer lag: {', '.join(args.group)}", samples)
    return 0


def _rows(session: GroupSession, groups: Sequence[str], stores: list[str]) -> list[GroupRow]:
    rows: list[GroupRow] = []
    for group in groups:
        found, group_rows = group_offset_rows(session, group, stores, True, _Quiet())
        if not found:
            raise ValueError(f"Consumer group '{group}' does not exist (no offsets in the "
                             f"{' or '.join(stores)} store).")
        rows += group_rows
    return rows


class _Quiet:
    """Swallows ``describe``'s per-group notices (no active members), which would repeat every tick."""

    def write(self, text: str) -> int:
        return len(text)


def lag_sample(seconds: float, rows: Sequence[GroupRow]) -> LagSample:
    return LagSample(seconds, {(r.group, r.store or "", r.topic, r.partition): r.lag
                               for r in rows if r.lag is not None})


def plot_lag(path: str, title: str, samples: Sequence[LagSample]) -> None:
    """Lag of each partition (thin lines) and the total (thick) against seconds since the first
    tick; a partition missing from a tick is a gap. Agg backend, imported lazily, as perf_plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seconds = [s.seconds for s in samples]
    keys = sorted({k for s in samples for k in s.lags})
    figure, axes = plt.subplots(figsize=(10, 4.5))
    for group, store, topic, partition in keys:
        values = [s.lags.get((group, store, topic, partition), float("nan")) for s in samples]
        axes.plot(seconds, values, marker=".", linewidth=1,
                  label=f"{group} {topic}-{partition}" + (f" ({store})" if store else ""))
    axes.plot(seconds, [s.total for s in samples], color="black", linewidth=2.5, marker="o", label="total")
    axes.set_xlabel("time (s)")
    axes.set_ylabel("lag (records)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
