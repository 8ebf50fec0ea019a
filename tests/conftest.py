"""Settings for every tier.

Hypothesis's per-example deadline (200 ms by default) measures the machine, not the code: on
CI's two busy cores a property test that takes 5 ms on a quiet laptop sometimes takes 300 ms and
fails with ``DeadlineExceeded`` although every example holds (seen on the murmur2 test while
brokers and Spark ran beside it). Properties are about correctness; speed has its benchmarks in
``bench/``. So the deadline is off everywhere, and the example counts stay as each test sets them.
"""

import importlib.util
import sys
from pathlib import Path

from hypothesis import settings

settings.register_profile("pylog", deadline=None)
settings.load_profile("pylog")


# ------------------------------------------------------------------ the shared real processes
#
# tests/integration/integration_support.py (ZooKeeper and pylog broker processes) serves the
# integration, peer and Spark tiers. It is loaded here once, by path, under one module name (and
# the older alias ``pylog_integration_fixtures``), so any mix of tiers' files in one pytest run has
# one copy of it: tier conftests and test files ``import integration_support`` and get this one.
# Its session fixture ``zookeeper`` is registered here, at the root, so the whole run starts one
# ZooKeeper, whichever tiers it runs (each cluster has its own chroot on it).

def _load_once(name: str, path: Path, alias: str):
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    sys.modules.setdefault(alias, module)
    return module


integration_support = _load_once("integration_support",
                                 Path(__file__).resolve().parent / "integration" / "integration_support.py",
                                 alias="pylog_integration_fixtures")
zookeeper = integration_support.zookeeper


# ------------------------------------------------------------------ where the test run's time goes
#
# CI runs every tier in one `make test` on two cores under a ~25 minute budget, and the tiers grow
# from several issues at once. The summary at the end of a run says how long each tier took, so a
# tier that outgrows its share shows in the CI log of the commit that made it grow, not weeks later.
# Over budget is a warning, not a failure: a loaded machine must not turn a green run red.

# Each tier's share of the run, in seconds of CI wall time on 2 cores. The peer tier's ~4 minutes is
# issue 12's; a tier without an entry has no budget yet.
TIER_BUDGETS_S = {
    "peer": 240.0,
}
_tier_spans: dict[str, list[float]] = {}  # tier -> [first start, last stop, summed test seconds, tests]


def _tier_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0].split("::")[0]


def pytest_runtest_logreport(report):
    span = _tier_spans.setdefault(_tier_of(report.nodeid), [report.start, report.stop, 0.0, 0])
    span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
    span[2] += report.duration
    span[3] += report.when == "call"


def pytest_terminal_summary(terminalreporter):
    """Per tier: wall time from its first test's start to its last test's end, and the summed
    time of its tests (the two differ when tiers interleave or run in parallel workers)."""
    if not _tier_spans:
        return
    terminalreporter.section("time per tier")
    for tier, (start, stop, summed, tests) in sorted(_tier_spans.items(), key=lambda item: item[1][0]):
        budget = TIER_BUDGETS_S.get(tier)
        line = f"{tier:<12} {stop - start:7.1f} s wall {summed:7.1f} s in tests  {tests:5d} tests"
        terminalreporter.write_line(line + (f"  (budget {budget:.0f} s)" if budget else ""))
        if budget and stop - start > budget:
            terminalreporter.write_line(f"WARNING: tier {tier} took {stop - start:.0f} s, over its budget of "
                                        f"{budget:.0f} s: see --durations above", yellow=True, bold=True)
    _report_kafka_tool_runners(terminalreporter)


def _report_kafka_tool_runners(terminalreporter) -> None:
    """How many Kafka tool runs the pooled runner JVMs served (broker/tools/kafka_tool_runner.py):
    a runner retired by a tool that left threads behind costs the next tool a JVM start."""
    runner = sys.modules.get("broker.tools.kafka_tool_runner")
    stats = runner.statistics() if runner is not None else {}
    if not stats.get("tool_runs"):
        return
    terminalreporter.write_line(f"kafka tools  {stats['tool_runs']} runs in {stats['runners_started']} runner JVMs "
                                f"({stats['runners_retired']} retired, {stats['runners_killed']} killed)")
    if stats["last_retirement"]:
        terminalreporter.write_line(f"  last retirement: {stats['last_retirement']}")
