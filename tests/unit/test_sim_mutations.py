"""The simulator has teeth: with a replication or election rule broken on purpose, some seed
among the first few dozen reports a violation. (Each mutation is a bug Kafka's design exists to
prevent.)"""

from __future__ import annotations

import dataclasses

from broker.controller import election
from broker.controller.core import ControllerCore
from broker.replica import fetcher as fetcher_module
from broker.replica.partition import Partition
from broker.replica.truncation import Truncation
from broker.sim import SimSettings, run_simulation

SEEDS_MAX = 40


def first_violation(seeds_max: int = SEEDS_MAX) -> str | None:
    for seed in range(seeds_max):
        result = run_simulation(seed, SimSettings(produce_ms=8_000))
        if not result.ok:
            return result.violations[0]
    return None


def test_electing_outside_the_isr_is_caught(monkeypatch):
    def any_live(assignment, isr, live, unclean_enabled):
        for replica in assignment:
            if replica in live:
                return election.Election(replica, (replica,), unclean=True)
        return None

    monkeypatch.setattr("broker.controller.core.offline_partition_leader", any_live)
    assert first_violation() is not None


def test_a_high_watermark_that_ignores_followers_is_caught(monkeypatch):
    def eager(self):
        if self.is_leader and self.log.log_end_offset > self.high_watermark:
            self.high_watermark = self.log.log_end_offset
            self._on_high_watermark(self.key)

    monkeypatch.setattr(Partition, "_maybe_increment_high_watermark", eager)
    assert first_violation() is not None


def test_followers_that_never_truncate_are_caught(monkeypatch):
    monkeypatch.setattr(fetcher_module, "truncation_offset",
                        lambda epoch, end, cache, log_end, hw: Truncation(log_end, True))
    assert first_violation() is not None


def test_elections_that_do_not_bump_the_leader_epoch_are_caught(monkeypatch):
    original = ControllerCore._write_state

    def same_epoch(self, tp, old, state):
        return original(self, tp, old, dataclasses.replace(state, leader_epoch=old.state.leader_epoch))

    monkeypatch.setattr(ControllerCore, "_write_state", same_epoch)
    assert first_violation() is not None


def test_a_broker_that_restarts_without_fencing_itself_is_caught(monkeypatch):
    """Power loss on a leader that is also the controller (or during a fail-over): without the
    self-fencing of ``broker.replica.fencing`` it is elected again with less than was committed."""
    monkeypatch.setattr("broker.sim.node.fence_after_unclean_shutdown", lambda zk, broker: [])
    assert first_violation(seeds_max=200) is not None
