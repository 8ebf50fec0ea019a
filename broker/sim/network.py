"""An in-memory network between simulated processes: latency, FIFO links, cuts, and paused or
crashed receivers (the ``RaftEventSimulationTest`` router, reliability.md section 5).

Every message goes ``src -> dst`` over a link with a random latency; a link delivers in order
(TCP), so a message never overtakes an earlier one on the same link. A cut link (``cut``,
symmetric or one way) drops what is sent over it and what is in flight. A crashed receiver
drops; a paused receiver holds messages and gets them, in order, when it resumes (its socket
buffers kept them). ZooKeeper is the endpoint ``"zk"``, so cutting a broker off ZooKeeper is a
link cut like any other.
"""

from __future__ import annotations

from random import Random
from typing import Callable, Hashable

from broker.sim.scheduler import Scheduler

__all__ = ["Network"]

Endpoint = Hashable


class Network:
    def __init__(self, scheduler: Scheduler, rng: Random, latency_ms: tuple[int, int] = (1, 8)) -> None:
        self._scheduler = scheduler
        self._rng = rng
        self._latency = latency_ms
        self._cut: set[tuple[Endpoint, Endpoint]] = set()
        self._link_clock: dict[tuple[Endpoint, Endpoint], int] = {}
        self._link_generation: dict[tuple[Endpoint, Endpoint], int] = {}
        self._receivers: dict[Endpoint, Callable] = {}
        self._paused: dict[Endpoint, list] = {}
        self.delivered = 0
        self.dropped = 0

    # ------------------------------------------------------------------------- endpoints

    def attach(self, endpoint: Endpoint, receive: Callable[[Endpoint, object], None]) -> None:
        self._receivers[endpoint] = receive
        self._paused.pop(endpoint, None)

    def detach(self, endpoint: Endpoint) -> None:
        """A crash: the endpoint receives nothing until attached again; its connections break."""
        self._receivers.pop(endpoint, None)
        self._paused.pop(endpoint, None)
        for link in list(self._link_generation):
            if endpoint in link:
                self._link_generation[link] += 1

    def pause(self, endpoint: Endpoint) -> None:
        self._paused.setdefault(endpoint, [])

    def resume(self, endpoint: Endpoint) -> None:
        held = self._paused.pop(endpoint, [])
        receive = self._receivers.get(endpoint)
        for src, message in held:
            if receive is not None:
                self.delivered += 1
                receive(src, message)

    def is_paused(self, endpoint: Endpoint) -> bool:
        return endpoint in self._paused

    # ---------------------------------------------------------------------------- links

    def cut(self, a: Endpoint, b: Endpoint, both_ways: bool = True) -> None:
        links = [(a, b), (b, a)] if both_ways else [(a, b)]
        for link in links:
            self._cut.add(link)
            self._link_generation[link] = self._link_generation.get(link, 0) + 1

    def heal(self, a: Endpoint | None = None, b: Endpoint | None = None) -> None:
        if a is None:
            self._cut.clear()
            return
        self._cut.discard((a, b))
        self._cut.discard((b, a))

    def connected(self, a: Endpoint, b: Endpoint) -> bool:
        return (a, b) not in self._cut and (b, a) not in self._cut

    def reachable(self, src: Endpoint, dst: Endpoint) -> bool:
        return (src, dst) not in self._cut and dst in self._receivers

    # ---------------------------------------------------------------------------- send

    def send(self, src: Endpoint, dst: Endpoint, message: object) -> bool:
        """Queue ``message``; False if it was dropped at once."""
        link = (src, dst)
        if link in self._cut or dst not in self._receivers:
            self.dropped += 1
            return False
        low, high = self._latency
        arrival = max(self._link_clock.get(link, 0), self._scheduler.now_ms + self._rng.randint(low, high))
        self._link_clock[link] = arrival
        generation = self._link_generation.setdefault(link, 0)
        self._scheduler.at(arrival, self._deliver, link, generation, message)
        return True

    def _deliver(self, link: tuple[Endpoint, Endpoint], generation: int, message: object) -> None:
        src, dst = link
        if link in self._cut or self._link_generation.get(link, 0) != generation:
            self.dropped += 1
            return
        receive = self._receivers.get(dst)
        if receive is None:
            self.dropped += 1
            return
        held = self._paused.get(dst)
        if held is not None:
            held.append((src, message))
            return
        self.delivered += 1
        receive(src, message)
