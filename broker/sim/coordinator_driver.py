"""What the coordinator simulation tiers share (``broker.sim.groups``, ``broker.sim.txns``): the
driver of one core incarnation on the simulated scheduler, the reply bookkeeping, and the seed
replay command line.

Both tiers drive a pure coordinator core (``handle``/``tick``/``write_done``/``unload_partition``
returning effects) over one internal partition modelled as a list of records, with the same
discipline: a core's ``Append`` lands after a random latency (the simulation decides whether it
fails), its timer is one scheduler event at ``core.next_deadline()``, and at a coordinator move
the old core is retired (its appends still in flight reach the log or not, unacknowledged; it may
emit nothing afterwards). Kept here once so the two tiers cannot drift apart.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

__all__ = ["SimCoordinator", "SimulationLog", "seed_main"]

class SimulationLog:
    """Violations and the verbose trace, stamped with the simulated time (``self.sched``)."""

    def violation(self, text: str) -> None:
        self.violations.append(f"t={self.sched.now_ms}: {text}")

    def note(self, text: str) -> None:
        if self.verbose:
            self.trace.append(f"t={self.sched.now_ms}: {text}")

    def claim_reply(self, reply):
        """The outstanding entry ``reply`` answers, or None (a violation: answered twice, or
        for a token never sent). Every request must get exactly one answer."""
        if reply.token in self.answered:
            self.violation(f"token {reply.token} answered twice")
            return None
        entry = self.outstanding.pop(reply.token, None)
        if entry is None:
            self.violation(f"reply for unknown token {reply.token}")
            return None
        self.answered.add(reply.token)
        return entry


class SimCoordinator:
    """One broker's core, from its load to its unload. The simulation provides
    ``deliver_reply(coordinator, reply)``, ``land_append(coordinator, append)``,
    ``land_unacknowledged(append)``, ``violation``, ``rng``, ``sched`` and
    ``settings.append_latency_ms``; a subclass names its core's ``REPLY`` and ``APPEND`` effect
    types, handles the other effects (``other_effect``) and may look at a tick's (``ticked``)."""

    REPLY: type
    APPEND: type

    def __init__(self, sim, incarnation: int, core) -> None:
        self.sim = sim
        self.incarnation = incarnation
        self.core = core
        self.unloaded = False
        self.loaded = False
        self.timer = None
        self.pending: dict[int, object] = {}  # write id -> Append in flight

    def apply(self, effects: list) -> None:
        sim = self.sim
        for effect in effects:
            if isinstance(effect, self.REPLY):
                sim.deliver_reply(self, effect)
            elif self.unloaded:
                sim.violation(f"core {self.incarnation} emitted {effect} after its unload")
            elif isinstance(effect, self.APPEND):
                self.pending[effect.write_id] = effect
                sim.sched.after(sim.rng.randint(*sim.settings.append_latency_ms), sim.land_append, self, effect)
            else:
                self.other_effect(effect)
        self.reschedule()

    def other_effect(self, effect) -> None:
        raise AssertionError(f"unknown effect {effect!r}")

    def ticked(self, effects: list) -> None:
        """A tick's effects, before they are applied."""

    def reschedule(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.unloaded:
            return
        deadline = self.core.next_deadline()
        if deadline is not None:
            self.timer = self.sim.sched.at(max(deadline, self.sim.sched.now_ms), self.tick)

    def tick(self) -> None:
        self.timer = None
        effects = self.core.tick(self.sim.sched.now_ms)
        self.ticked(effects)
        self.apply(effects)

    def retire(self, land_in_flight: bool) -> None:
        """A coordinator move (``land_in_flight``: each append in flight reaches the log, without
        its acknowledgement, with probability 1/2) or the end of the run: unload; answered
        requests and later effects go through ``apply`` (which refuses appends now)."""
        self.unloaded = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if land_in_flight:
            for _, append in sorted(self.pending.items()):
                if self.sim.rng.random() < 0.5:
                    self.sim.land_unacknowledged(append)
        self.pending.clear()
        self.apply(self.core.unload_partition(0))


def seed_main(prog: str, doc: str, run: Callable, argv: list[str] | None) -> int:
    """``prog --seed N [--seeds K] [--verbose]``: run seeds, print each summary (and the trace of
    a failed one when verbose); exit status 1 when any failed."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        started = time.perf_counter()
        result = run(seed, verbose=args.verbose)
        print(f"{result.summary()} ({time.perf_counter() - started:.2f} s)")
        if args.verbose and not result.ok:
            print("\n".join(result.trace[-200:]))
        failed += not result.ok
    return 1 if failed else 0
