"""Kafka's coordinators: the group coordinator (``group/``) and, later, the transaction
coordinator (``txn/``).

Each is a pure state machine, shaped like ``broker.controller``: it is fed requests (the decoded
wire messages), the records of its internal topic (when this broker starts leading one of its
partitions) and timer ticks, and it answers with effects — replies to send and records to append —
for its asyncio shell in ``broker.server`` to carry out. Nothing here imports asyncio, sockets,
files or kazoo; time and randomness come in as arguments, so the simulation tier drives the same
code over many seeds.
"""
