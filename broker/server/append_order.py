"""Appends in request order per connection, while the requests themselves run concurrently.

Why: the network layer runs a connection's pipelined requests as concurrent tasks (responses
still leave in request order). Kafka serves one request per connection at a time, so a
producer's pipelined Produce requests (max.in.flight up to 5, sequence numbers in send order)
are appended in the order they were sent. Here a Produce may await before it appends (KIP-890:
``ctx.txn_verifier.verify``, possibly a round trip to the transaction coordinator), so a later
request that needs no verification, or whose verification answers first, would append first:
its batch gets OUT_OF_ORDER_SEQUENCE_NUMBER (or, across partitions, records land out of send
order), and once the earlier one is acknowledged the producer cannot recover.

``AppendOrder`` is a per-connection ticket line. A request takes its ticket synchronously in its
task's first step, before any await: tasks start in arrival order (``asyncio`` runs a new task's
first step FIFO), so tickets follow request order. It may then await anything (verification runs
concurrently), but appends only at its turn, when every earlier ticket holder has appended or
failed, and releases right after appending, so the acks=all replication waits stay pipelined.
The common case (nothing earlier pending) costs no await and no future.

Bounded: one entry per in-flight request of the connection, so at most the network layer's
``inflight_requests_max``; a ticket is released in ``finally`` (also on cancellation).
Connections are independent: each has its own line (``network.connection_state``).
"""

from __future__ import annotations

import asyncio
import collections

from broker.server.network import connection_state

__all__ = ["AppendOrder", "Ticket", "produce_order"]

_STATE_KEY = "produce_append_order"


class Ticket:
    """One request's place in the line."""

    __slots__ = ("released", "turn")

    def __init__(self) -> None:
        self.released = False
        self.turn: asyncio.Future | None = None  # created only if the holder has to wait


class AppendOrder:
    """Tickets in request order; ``wait_turn`` returns once every earlier ticket is released."""

    def __init__(self) -> None:
        self._line: collections.deque[Ticket] = collections.deque()

    def __len__(self) -> int:
        return len(self._line)

    def take(self) -> Ticket:
        """Call before the request's first await."""
        ticket = Ticket()
        self._line.append(ticket)
        return ticket

    async def wait_turn(self, ticket: Ticket) -> None:
        if self._line[0] is ticket:
            return
        ticket.turn = asyncio.get_running_loop().create_future()
        await ticket.turn

    def release(self, ticket: Ticket) -> None:
        """The holder appended or failed (or was cancelled): let the next one append."""
        if ticket.released:
            return
        ticket.released = True
        line = self._line
        while line and line[0].released:
            line.popleft()
        if line and line[0].turn is not None and not line[0].turn.done():
            line[0].turn.set_result(None)


def produce_order() -> AppendOrder:
    """The calling connection's line for Produce appends (a fresh one outside a connection,
    i.e. a handler called directly, which orders nothing)."""
    return connection_order(_STATE_KEY)


def connection_order(key: str) -> AppendOrder:
    """The calling connection's line named ``key`` (Produce has its own; TxnOffsetCommit, which
    also awaits verification before it reaches the group coordinator, has another)."""
    state = connection_state()
    order = state.get(key)
    if order is None:
        order = state[key] = AppendOrder()
    return order
