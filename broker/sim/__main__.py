"""``python -m broker.sim --seed N [--seeds K] [--verbose]``: run (or replay) simulations.

Exit status 0 when every seed passes, 1 otherwise; a failing seed prints its violations, the
faults injected and the last events, and how to replay it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from broker.sim.run import SimSettings, run_simulation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.sim", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="the (first) seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many consecutive seeds")
    parser.add_argument("--produce-ms", type=int, default=SimSettings.produce_ms,
                        help="simulated time with faults and producing")
    parser.add_argument("--verbose", action="store_true", help="log the brokers and print the trace")
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s: %(message)s")
    settings = SimSettings(produce_ms=args.produce_ms)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        started = time.perf_counter()
        result = run_simulation(seed, settings, verbose=args.verbose)
        print(f"{result.summary()} ({time.perf_counter() - started:.2f} s)")
        if args.verbose:
            print("\n".join(result.trace))
        failed += not result.ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
