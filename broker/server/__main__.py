"""``python -m broker.server --config FILE [--set key=value ...]``: run one broker in the foreground.

Logs go to stderr with timestamps. An invalid configuration prints one line naming the key and
exits 2; a failure to start (ZooKeeper unreachable, broker id taken, port in use, log directory
unusable) prints one line and exits 1. SIGTERM and SIGINT stop the broker cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
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


async def _serve(config: BrokerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await Broker(config).run(stop)


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
    try:
        asyncio.run(_serve(config))
    except (ClusterError, LogError, OSError) as exc:
        logger.error("broker %d failed: %s", config.broker_id, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
