"""The simulated producer: idempotent, acks=all, one batch in flight per partition, retried
until acknowledged (the same bytes, the same sequence numbers, so brokers deduplicate).

It finds leaders by asking (``NOT_LEADER_OR_FOLLOWER`` answers carry the broker's idea of the
leader; a timeout tries another broker), and reports every acknowledgement to the simulation,
which checks it against the committed logs. Values are unique: ``<partition>-<n>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from broker.records import Record, encode_batch
from broker.sim import messages as m
from broker.wire import ErrorCode

__all__ = ["SimProducer", "CLIENT"]

CLIENT = "client"
PRODUCER_ID = 4242
_RETRIABLE_QUIET = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
                    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE}


@dataclass
class _Stream:
    partition: int
    next_sequence: int = 0
    next_value: int = 0
    values: list[str] = field(default_factory=list)
    records: bytes = b""
    leader: int = -1
    attempts: int = 0
    in_flight: bool = False


class SimProducer:
    def __init__(self, sim, topic: str, partitions: int, on_ack: Callable, on_anomaly: Callable) -> None:
        self.sim = sim
        self.topic = topic
        self._on_ack = on_ack
        self._on_anomaly = on_anomaly
        self.streams = {p: _Stream(p) for p in range(partitions)}
        self.producing = False
        self._next_correlation = 0
        self._pending: dict[int, tuple[Callable, object]] = {}
        self.acked = 0
        self.zombie_gap_answers = 0
        sim.network.attach(CLIENT, self._receive)

    def start(self) -> None:
        self.producing = True
        for stream in self.streams.values():
            self.sim.scheduler.after(self.sim.rng.randint(0, 20), self._next_batch, stream)

    def stop_producing(self) -> None:
        """No new batches; the ones in flight keep being retried until acknowledged."""
        self.producing = False

    def idle(self) -> bool:
        return all(not s.values for s in self.streams.values())

    # ----------------------------------------------------------------------------- batches

    def _next_batch(self, stream: _Stream) -> None:
        if not self.producing or stream.values:
            return
        count = self.sim.rng.randint(1, 3)
        stream.values = [f"{stream.partition}-{stream.next_value + i}" for i in range(count)]
        stream.next_value += count
        now = self.sim.scheduler.now_ms
        stream.records = encode_batch(
            [Record(i, now, None, value.encode()) for i, value in enumerate(stream.values)],
            producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=stream.next_sequence)
        stream.attempts = 0
        self._send(stream)

    def _send(self, stream: _Stream) -> None:
        stream.attempts += 1
        target = stream.leader
        if target < 0 or stream.attempts % 4 == 0:
            target = self.sim.rng.choice(sorted(self.sim.nodes))
        stream.in_flight = True
        self._call(target, m.ProduceRequest((self.topic, stream.partition), stream.records),
                   lambda response: self._answered(stream, target, response))

    def _answered(self, stream: _Stream, target: int, response) -> None:
        stream.in_flight = False
        if response is None:
            stream.leader = -1
            self._retry(stream)
            return
        error = response.error_code
        if error in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
            base = response.base_offset if error == ErrorCode.NONE else -1
            self._on_ack((self.topic, stream.partition), list(stream.values), base, target)
            self.acked += len(stream.values)
            stream.next_sequence += len(stream.values)
            stream.values, stream.leader = [], target
            self.sim.scheduler.after(self.sim.rng.randint(0, 30), self._next_batch, stream)
            return
        if error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            stream.leader = response.leader_hint if response.leader_hint != target else -1
        elif error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._is_zombie(target, stream.partition):
            # A leader that lost its role without knowing yet (paused past its session, cut
            # off ZooKeeper) misses what its successor acknowledged: it sees a gap. Kafka's
            # brokers answer the same; a real client may treat it as fatal, so it is counted.
            self.zombie_gap_answers += 1
            stream.leader = -1
        elif error not in _RETRIABLE_QUIET:
            self._on_anomaly(f"produce to broker {target} for {self.topic}-{stream.partition} "
                             f"(sequence {stream.next_sequence}) answered {ErrorCode(error).name}")
        self._retry(stream)

    def _is_zombie(self, broker: int, partition: int) -> bool:
        """Not (or no longer) the leader ZooKeeper names, at that leader epoch."""
        found = self.sim.zookeeper.states.get((self.topic, partition))
        node = self.sim.nodes[broker]
        local = node.replicas.get(self.topic, partition) if node.replicas is not None else None
        return (found is None or found[0].leader != broker or local is None
                or local.leader_epoch != found[0].leader_epoch)

    def _retry(self, stream: _Stream) -> None:
        self.sim.scheduler.after(self.sim.rng.randint(5, 60), self._send, stream)

    # -------------------------------------------------------------------------------- rpc

    def _call(self, dst, body, on_response: Callable) -> None:
        self._next_correlation += 1
        correlation_id = self._next_correlation
        timer = self.sim.scheduler.after(body.timeout_ms + 500, self._timed_out, correlation_id)
        self._pending[correlation_id] = (on_response, timer)
        self.sim.network.send(CLIENT, dst, m.Request(correlation_id, body))

    def _timed_out(self, correlation_id: int) -> None:
        entry = self._pending.pop(correlation_id, None)
        if entry is not None:
            entry[0](None)

    def _receive(self, src, message) -> None:
        if isinstance(message, m.Response):
            entry = self._pending.pop(message.correlation_id, None)
            if entry is not None:
                entry[1].cancel()
                entry[0](message.body)
