"""The deterministic simulation tier: the replication and election logic of ``broker.replica``
and ``broker.controller`` driven in one process over a fake network, ZooKeeper and disk, from
a seed, with crashes, pauses, lost unflushed tails and partitions injected, and invariants
checked after every event (``run.py``). ``python -m broker.sim --seed N`` replays one seed.

Nothing here imports asyncio, sockets or kazoo; time is the scheduler's, randomness the seed's.
"""

from broker.sim.run import SimResult, SimSettings, Simulation, run_simulation

__all__ = ["SimResult", "SimSettings", "Simulation", "run_simulation"]
