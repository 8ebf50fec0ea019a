"""The messages simulated processes exchange: plain values instead of wire bytes.

The simulator tests replication and election logic, not the codec (which has its own tests
against kafka-python), so requests travel as Python values; what they carry is what the real
requests carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.replica.fetcher import EpochEndOffset, EpochQuery, FetchedPartition, FetchQuery

__all__ = ["Request", "Response", "ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse",
           "EpochRequest", "EpochResponse", "ControllerRequest", "ControllerResponse",
           "ShutdownRequest", "ShutdownResponse", "MetadataRequest", "MetadataResponse"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Request:
    correlation_id: int
    body: object


@dataclass(frozen=True)
class Response:
    correlation_id: int
    body: object


@dataclass(frozen=True)
class ProduceRequest:
    tp: TopicPartition
    records: bytes
    acks: int = -1
    timeout_ms: int = 3_000


@dataclass(frozen=True)
class ProduceResponse:
    error_code: int
    base_offset: int = -1
    leader_hint: int = -1


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    partitions: tuple[FetchQuery, ...]
    max_wait_ms: int
    max_bytes: int


@dataclass(frozen=True)
class FetchResponse:
    partitions: dict[TopicPartition, FetchedPartition] = field(default_factory=dict)


@dataclass(frozen=True)
class EpochRequest:
    replica_id: int
    queries: tuple[EpochQuery, ...]


@dataclass(frozen=True)
class EpochResponse:
    partitions: dict[TopicPartition, EpochEndOffset] = field(default_factory=dict)


@dataclass(frozen=True)
class ControllerRequest:
    request: object  # broker.controller.requests.LeaderAndIsr | UpdateMetadata | StopReplica


@dataclass(frozen=True)
class ControllerResponse:
    error_code: int


@dataclass(frozen=True)
class ShutdownRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class ShutdownResponse:
    error_code: int
    remaining: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class MetadataRequest:
    tp: TopicPartition


@dataclass(frozen=True)
class MetadataResponse:
    leader: int
