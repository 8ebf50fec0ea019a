"""What the controller tells brokers, as plain values (Kafka's ``ControllerBrokerRequestBatch``).

The core returns ``Send(broker_id, request)`` values; ``broker.server.controller`` encodes them as
LeaderAndIsr (4), UpdateMetadata (6) and StopReplica (5) and sends them over one connection per
broker, in order; the simulator delivers them over its fake network. Every request carries the
controller's epoch, which brokers use to ignore a deposed controller (STALE_CONTROLLER_EPOCH),
and the recipient's broker epoch (KIP-380).

``RequestBatch`` collects what one controller event wants sent and emits, per broker, the
LeaderAndIsr first, then the UpdateMetadata, then the StopReplica, as Kafka does: a new leader
learns it leads before clients are told to go there. Adding a LeaderAndIsr for a partition also
queues an UpdateMetadata of that partition for every live broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple

from broker.cluster.layout import BrokerRegistration, PartitionState

__all__ = ["TopicPartition", "PartitionLeadership", "LeaderAndIsr", "UpdateMetadata", "StopReplica",
           "Send", "RequestBatch"]

TopicPartition = tuple[str, int]


class PartitionLeadership(NamedTuple):
    """One partition as the controller knows it: its replicas, its state znode and that
    znode's version (Kafka's ``LeaderIsrAndControllerEpoch`` plus the assignment)."""

    replicas: tuple[int, ...]
    state: PartitionState
    zk_version: int


@dataclass(frozen=True)
class LeaderAndIsr:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[tuple[TopicPartition, PartitionLeadership, bool], ...]  # (tp, leadership, is_new)
    live_leaders: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class UpdateMetadata:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[tuple[TopicPartition, PartitionLeadership, tuple[int, ...]], ...]  # offline replicas
    live_brokers: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class StopReplica:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[tuple[TopicPartition, int, bool], ...]  # (tp, leader epoch, delete)


Request = LeaderAndIsr | UpdateMetadata | StopReplica


class Send(NamedTuple):
    broker_id: int
    request: Request


class RequestBatch:
    """Requests of one controller event, grouped per broker. ``live`` maps each live broker to
    (registration, broker epoch); ``leaderships`` is the controller's current view."""

    def __init__(self, controller_id: int, controller_epoch: int,
                 live: dict[int, tuple[BrokerRegistration, int]],
                 leaderships: dict[TopicPartition, PartitionLeadership]) -> None:
        self._controller_id = controller_id
        self._epoch = controller_epoch
        self._live = live
        self._leaderships = leaderships
        self._leader_and_isr: dict[int, dict[TopicPartition, bool]] = {}
        self._update_metadata: dict[int, set[TopicPartition]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, tuple[int, bool]]] = {}

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        if tp not in self._leaderships:
            return
        for broker in brokers:
            if broker in self._live:
                entries = self._leader_and_isr.setdefault(broker, {})
                entries[tp] = entries.get(tp, False) or is_new
        self.add_update_metadata(self._live, [tp])

    def add_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition]) -> None:
        tps = [tp for tp in tps if tp in self._leaderships]
        for broker in brokers:
            if broker in self._live:
                self._update_metadata.setdefault(broker, set()).update(tps)

    def add_stop_replica(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        if broker not in self._live:
            return
        leadership = self._leaderships.get(tp)
        epoch = leadership.state.leader_epoch if leadership is not None else -1
        entries = self._stop_replica.setdefault(broker, {})
        old = entries.get(tp)
        entries[tp] = (epoch, delete or (old is not None and old[1]))

    def build(self) -> list[Send]:
        sends: list[Send] = []
        registrations = tuple(reg for _, (reg, _) in sorted(self._live.items()))
        for broker in sorted(self._leader_and_isr):
            entries = self._leader_and_isr[broker]
            partitions = tuple((tp, self._leaderships[tp], entries[tp]) for tp in sorted(entries))
            leaders = {leadership.state.leader for _, leadership, _ in partitions}
            live_leaders = tuple(reg for reg in registrations if reg.broker_id in leaders)
            sends.append(Send(broker, LeaderAndIsr(self._controller_id, self._epoch,
                                                   self._live[broker][1], partitions, live_leaders)))
        for broker in sorted(self._update_metadata):
            partitions = tuple(
                (tp, self._leaderships[tp],
                 tuple(r for r in self._leaderships[tp].replicas if r not in self._live))
                for tp in sorted(self._update_metadata[broker]))
            sends.append(Send(broker, UpdateMetadata(self._controller_id, self._epoch,
                                                     self._live[broker][1], partitions, registrations)))
        for broker in sorted(self._stop_replica):
            entries = self._stop_replica[broker]
            partitions = tuple((tp, epoch, delete) for tp, (epoch, delete) in sorted(entries.items()))
            sends.append(Send(broker, StopReplica(self._controller_id, self._epoch,
                                                  self._live[broker][1], partitions)))
        return sends
