"""``python -m broker.server --config FILE [--set key=value ...]``: run one broker in the foreground.

Logs go to stderr with timestamps. An invalid configuration prints one line naming the key and
exits 2; a failure to start (ZooKeeper unreachable, broker id taken, port in use, log directory
unusable) prints one line and exits 1. SIGTERM and SIGINT stop the broker cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import logging
import os
import signal
import sys

from broker.cluster.errors import ClusterError
from broker.log import LogError
from broker.server.broker import Broker
from broker.server.config import BrokerConfig, ConfigError, load_properties, parse_overrides

logger = logging.getLogger("pylog.broker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m broker.server",
                                     description="Run a pylog broker (Kafka wire protocol).")
    parser.add_argument("--config", required=True, help="server.properties-style file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one property (repeatable)")
    return parser


def load_config(path: str, overrides: list[str]) -> BrokerConfig:
    """Raises ConfigError (bad value or --set) or OSError (unreadable file)."""
    return BrokerConfig.from_properties(load_properties(path, parse_overrides(overrides)))


# glibc mallopt parameters (malloc.h) and the values the broker sets.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit
_TRIM_THRESHOLD = 256 << 20


def tune_malloc() -> bool:
    """Keep freed memory in the heap for reuse instead of handing it back to the kernel.

    The broker allocates and frees buffers of 0.1-50 MiB on every large request (a Fetch
    response joined for the socket, a 1 MiB Produce frame, segment reads). glibc serves blocks
    above its mmap threshold with fresh ``mmap``s and trims the heap top on free, so each such
    buffer is page-faulted in anew, at 2-5 us a 4 KiB page here: measured, the same broker served
    consumers at 3.9-5.0 M records/s with glibc's defaults and 11.5-12.5 M with these settings
    (``bench/client_produce_consume.py --only consume``, 3 M x 100 B, same run). The cost is up
    to ``_TRIM_THRESHOLD`` of freed memory kept in the process. An operator who sets glibc's own
    knobs (``GLIBC_TUNABLES`` with a malloc setting, ``MALLOC_TRIM_THRESHOLD_``,
    ``MALLOC_MMAP_THRESHOLD_``) keeps them: nothing is changed then. On a libc without
    ``mallopt`` (musl, macOS) nothing is done either. Returns True if applied."""
    if "malloc" in os.environ.get("GLIBC_TUNABLES", "") or any(
            key in os.environ for key in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))


async def _serve(config: BrokerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await Broker(config).run(stop)


def freeze_imported_heap() -> None:
    """Leave what the imports built (modules, classes, functions: ~130 k objects) out of every
    later garbage collection: none of it becomes garbage while the broker runs, and each full
    collection walked all of it. The broker's short-lived objects (a pipelined commit's request,
    effects and answer live a few loop iterations) keep reaching the oldest generation, so full
    collections come regularly: in one bench round (start, then 10 s of 65 k offset commits) 8 of
    them took 0.54 s of CPU (~68 ms each), 0.02 s for 11 frozen (docs/performance.md, issue 14)."""
    gc.collect()  # what the imports left as garbage goes now, not frozen with the rest
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        config = load_config(args.config, args.set)
    except ConfigError as exc:
        print(f"pylog broker: invalid configuration: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"pylog broker: cannot read {args.config}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for key in config.unknown_keys:
        logger.warning("%s was supplied but isn't a known config", key)
    if tune_malloc():
        logger.info("malloc: freed memory kept for reuse (mmap threshold %d MiB, trim threshold %d MiB)",
                    _MMAP_THRESHOLD >> 20, _TRIM_THRESHOLD >> 20)
    freeze_imported_heap()
    try:
        asyncio.run(_serve(config))
    except (ClusterError, LogError, OSError) as exc:
        logger.error("broker %d failed: %s", config.broker_id, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
