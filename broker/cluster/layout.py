"""What each znode of Kafka 2.x holds, as builders and parsers (``kafka.zk.ZkData``). Pure.

pylog writes exactly what a Kafka 2.x broker writes, so Kafka's tools (``kafka-topics
--zookeeper``, ``zookeeper-shell``) and pylog can read each other's trees. JSON is compact (no
spaces, as Jackson writes it) and UTF-8. Key order is fixed here for readable diffs; Kafka's
own order is a hash map's, so readers must never depend on it.

Parsers accept every version Kafka 2.0-2.8 writes and raise ``MalformedZnodeError`` naming the
znode kind and the broken rule for anything else, instead of a ``KeyError`` deep in a caller.
The reference table is ``shared/reference/kafka-protocol.md`` section 6.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from random import Random
from types import MappingProxyType
from typing import Any

from broker.cluster.assignment import validate_config
from broker.cluster.errors import MalformedZnodeError, ProducerIdsExhaustedError

__all__ = [
    "EndPoint", "BrokerRegistration", "TopicAssignment", "PartitionState", "ProducerIdBlock",
    "PRODUCER_ID_BLOCK_SIZE", "next_producer_id_block",
    "encode_entity_config", "decode_entity_config",
    "encode_controller", "decode_controller",
    "encode_controller_epoch", "decode_controller_epoch",
    "encode_cluster_id", "decode_cluster_id", "generate_cluster_id", "generate_topic_id",
    "encode_config_change", "decode_config_change",
    "encode_isr_change", "decode_isr_change",
    "encode_log_dir_event", "decode_log_dir_event",
    "encode_offset", "decode_offset",
]

_INT64_MAX = 2**63 - 1
_DECIMAL = re.compile(r"-?[0-9]+")
# EndPoint.uriParseExp: "LISTENER://host:port", IPv6 hosts in brackets, empty host allowed.
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")
# SecurityProtocol names: a v2/v3 registration without a listener map uses listener = protocol.
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdManager.PidBlockSize


# -- JSON helpers: every parser goes through these, so every failure reads the same way. ---------

def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes, what: str) -> Any:
    try:
        return json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedZnodeError(f"{what}: not UTF-8 JSON ({exc}): {bytes(data)[:120]!r}") from None


def _object(data: bytes, what: str) -> dict[str, Any]:
    obj = _loads(data, what)
    if not isinstance(obj, dict):
        raise MalformedZnodeError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(obj: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in obj:
        raise MalformedZnodeError(f"{what}: missing field {key!r}")
    return obj[key]


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = _get(obj, key, what)
    if not _is_int(value):
        raise MalformedZnodeError(f"{what}: field {key!r} must be a JSON integer, got {value!r}")
    return value


def _str(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = _get(obj, key, what)
    if not isinstance(value, str):
        raise MalformedZnodeError(f"{what}: field {key!r} must be a JSON string, got {value!r}")
    return value


def _decimal(text: str, what: str) -> int:
    if not _DECIMAL.fullmatch(text):
        raise MalformedZnodeError(f"{what}: {text!r} is not a decimal integer")
    return int(text)


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise MalformedZnodeError(f"{what}: expected a JSON array of integers, got {value!r}")
    return tuple(value)


def _version(obj: Mapping[str, Any], what: str, supported: Sequence[int]) -> int:
    version = _int(obj, "version", what)
    if version not in supported:
        raise MalformedZnodeError(f"{what}: unsupported version {version} (supported: {list(supported)})")
    return version


def _checked(what: str, build):
    """Run a constructor whose ``__post_init__`` raises ValueError; report it as a bad znode."""
    try:
        return build()
    except MalformedZnodeError:
        raise
    except (ValueError, TypeError) as exc:
        raise MalformedZnodeError(f"{what}: {exc}") from None


# -- /brokers/ids/{id} ---------------------------------------------------------------------------

@dataclass(frozen=True)
class EndPoint:
    """One advertised listener, ``LISTENER://host:port``; ``host == ""`` means Kafka's null host."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        """``EndPoint.connectionString``: IPv6 hosts are bracketed (``Utils.formatAddress``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str]) -> "EndPoint":
        match = _ENDPOINT.match(text) if isinstance(text, str) else None
        if match is None:
            raise MalformedZnodeError(f"broker endpoint {text!r} is not LISTENER://host:port")
        listener = match.group(1).upper()  # ListenerName.normalised
        if listener not in protocol_map:
            raise MalformedZnodeError(f"broker endpoint {text!r}: no security protocol for {listener}")
        return cls(listener, match.group(2), int(match.group(3)), protocol_map[listener])


@dataclass(frozen=True)
class BrokerRegistration:
    """The ephemeral ``/brokers/ids/{id}`` znode (``BrokerIdZNode``), written as version 4.

    ``host``/``port`` at top level are the first PLAINTEXT endpoint's (null/-1 without one): they
    exist for pre-0.10 clients. The broker id is the znode's name, not part of the JSON; the
    broker epoch is the znode's czxid, also not in the JSON. Version 5's ``features`` are
    accepted and dropped (pylog advertises none).
    """

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    timestamp_ms: int
    rack: str | None = None
    jmx_port: int = -1

    def __post_init__(self) -> None:
        if not _is_int(self.broker_id) or self.broker_id < 0:
            raise ValueError(f"broker id must be a non-negative int, got {self.broker_id!r}")
        object.__setattr__(self, "endpoints", tuple(self.endpoints))
        if not self.endpoints:
            raise ValueError("a broker registers at least one endpoint")

    def plaintext_endpoint(self) -> EndPoint | None:
        return next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)

    def to_json(self) -> bytes:
        plaintext = self.plaintext_endpoint()
        obj: dict[str, Any] = {
            "version": 4,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp_ms),
            "endpoints": [e.connection_string() for e in self.endpoints],
            "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in self.endpoints},
        }
        if self.rack is not None:
            obj["rack"] = self.rack
        return _dumps(obj)

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> "BrokerRegistration":
        what = f"broker registration {broker_id}"
        obj = _object(data, what)
        version = _version(obj, what, (1, 2, 3, 4, 5))
        if version == 1:
            endpoints = (EndPoint("PLAINTEXT", _str(obj, "host", what), _int(obj, "port", what), "PLAINTEXT"),)
        else:
            protocol_map = _protocol_map(obj, what)
            listeners = _get(obj, "endpoints", what)
            if not isinstance(listeners, list):
                raise MalformedZnodeError(f"{what}: 'endpoints' must be a JSON array, got {listeners!r}")
            try:
                endpoints = tuple(EndPoint.parse(text, protocol_map) for text in listeners)
            except MalformedZnodeError as exc:
                raise MalformedZnodeError(f"{what}: {exc}") from None
        rack = obj.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise MalformedZnodeError(f"{what}: 'rack' must be a string or null, got {rack!r}")
        timestamp = _decimal(_str(obj, "timestamp", what), what) if "timestamp" in obj else -1
        jmx_port = _int(obj, "jmx_port", what)
        return _checked(what, lambda: cls(broker_id, endpoints, timestamp, rack, jmx_port))


def _protocol_map(obj: Mapping[str, Any], what: str) -> dict[str, str]:
    if "listener_security_protocol_map" not in obj:  # versions 2-3
        return {name: name for name in _SECURITY_PROTOCOLS}
    raw = obj["listener_security_protocol_map"]
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise MalformedZnodeError(f"{what}: listener_security_protocol_map must map names to strings")
    for protocol in raw.values():
        if protocol not in _SECURITY_PROTOCOLS:
            raise MalformedZnodeError(f"{what}: unknown security protocol {protocol!r}")
    return {name.upper(): protocol for name, protocol in raw.items()}


# -- /brokers/topics/{t} -------------------------------------------------------------------------

_Replicas = Mapping[int, tuple[int, ...]]


def _frozen_replicas(raw: Mapping[int, Iterable[int]], what: str) -> _Replicas:
    out = {}
    for partition, replicas in sorted(raw.items()):
        replicas = tuple(replicas)
        if not _is_int(partition) or partition < 0 or not all(_is_int(b) for b in replicas):
            raise ValueError(f"{what}: partition {partition!r} -> {replicas!r} is not int -> ints")
        out[partition] = replicas
    return MappingProxyType(out)


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/{t}`` (``TopicZNode``): partition -> replica list, the first replica
    being the preferred leader. Written as version 2 (Kafka 2.4+, empty ``adding_replicas`` and
    ``removing_replicas`` outside a reassignment), or 3 when ``topic_id`` is set (2.8).
    Versions 1-3 parse. The mappings are read-only views, so instances are not hashable.
    """

    partitions: _Replicas
    adding_replicas: _Replicas = field(default_factory=dict)
    removing_replicas: _Replicas = field(default_factory=dict)
    topic_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("partitions", "adding_replicas", "removing_replicas"):
            object.__setattr__(self, name, _frozen_replicas(getattr(self, name), name))
        for name in ("adding_replicas", "removing_replicas"):
            unknown = set(getattr(self, name)) - set(self.partitions)
            if unknown:
                raise ValueError(f"{name} names partitions {sorted(unknown)} the topic does not have")

    def to_json(self) -> bytes:
        def as_json(replicas: _Replicas) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in replicas.items()}

        obj: dict[str, Any] = {"version": 2 if self.topic_id is None else 3}
        if self.topic_id is not None:
            obj["topic_id"] = self.topic_id
        obj["partitions"] = as_json(self.partitions)
        obj["adding_replicas"] = as_json(self.adding_replicas)
        obj["removing_replicas"] = as_json(self.removing_replicas)
        return _dumps(obj)

    @classmethod
    def from_json(cls, data: bytes, topic: str = "?") -> "TopicAssignment":
        what = f"topic assignment {topic}"
        obj = _object(data, what)
        version = _version(obj, what, (1, 2, 3))
        partitions = _replica_map(_get(obj, "partitions", what), f"{what} partitions")
        adding = _replica_map(obj.get("adding_replicas", {}), f"{what} adding_replicas")
        removing = _replica_map(obj.get("removing_replicas", {}), f"{what} removing_replicas")
        topic_id = _str(obj, "topic_id", what) if version >= 3 and "topic_id" in obj else None
        return _checked(what, lambda: cls(partitions, adding, removing, topic_id))


def _replica_map(raw: Any, what: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(raw, dict):
        raise MalformedZnodeError(f"{what}: expected a JSON object, got {raw!r}")
    out = {}
    for key, replicas in raw.items():
        if not key.isdigit() or not key.isascii():
            raise MalformedZnodeError(f"{what}: partition key {key!r} is not a non-negative integer")
        out[int(key)] = _int_list(replicas, f"{what} partition {key}")
    return out


# -- /brokers/topics/{t}/partitions/{p}/state ----------------------------------------------------

@dataclass(frozen=True)
class PartitionState:
    """``TopicPartitionStateZNode``, version 1: leader (-1 = none), leader epoch, ISR, and the
    epoch of the controller that wrote it. Updates are conditional on the znode's version, which
    is the ``zk_version`` Kafka calls ``partitionEpoch``; it is not part of this value."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))
        ints = [self.leader, self.leader_epoch, self.controller_epoch, *self.isr]
        if not all(_is_int(v) for v in ints):
            raise ValueError(f"partition state fields must be ints: {self!r}")
        if self.leader < -1 or self.leader_epoch < 0 or self.controller_epoch < 0:
            raise ValueError(f"leader >= -1, leader_epoch >= 0, controller_epoch >= 0: {self!r}")
        if any(b < 0 for b in self.isr) or len(set(self.isr)) != len(self.isr):
            raise ValueError(f"isr must be distinct non-negative broker ids, got {list(self.isr)}")

    def to_json(self) -> bytes:
        return _dumps({
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
            "controller_epoch": self.controller_epoch,
        })

    @classmethod
    def from_json(cls, data: bytes) -> "PartitionState":
        what = "partition state"
        obj = _object(data, what)
        _version(obj, what, (1,))
        leader, epoch = _int(obj, "leader", what), _int(obj, "leader_epoch", what)
        isr = _int_list(_get(obj, "isr", what), f"{what} isr")
        controller_epoch = _int(obj, "controller_epoch", what)
        return _checked(what, lambda: cls(leader, epoch, isr, controller_epoch))


# -- /latest_producer_id_block -------------------------------------------------------------------

@dataclass(frozen=True)
class ProducerIdBlock:
    """``ProducerIdBlockZNode``: the last block of producer ids handed out, ``[block_start,
    block_end]`` inclusive, start and end written as decimal *strings*."""

    broker_id: int
    block_start: int
    block_end: int

    def __post_init__(self) -> None:
        if not all(_is_int(v) for v in (self.broker_id, self.block_start, self.block_end)):
            raise ValueError(f"producer id block fields must be ints: {self!r}")
        if not 0 <= self.block_start <= self.block_end <= _INT64_MAX:
            raise ValueError(f"need 0 <= block_start <= block_end <= 2**63-1: {self!r}")

    @property
    def size(self) -> int:
        return self.block_end - self.block_start + 1

    def to_json(self) -> bytes:
        return _dumps({
            "version": 1,
            "broker": self.broker_id,
            "block_start": str(self.block_start),
            "block_end": str(self.block_end),
        })

    @classmethod
    def from_json(cls, data: bytes) -> "ProducerIdBlock":
        what = "producer id block"
        obj = _object(data, what)
        _version(obj, what, (1,))
        broker = _int(obj, "broker", what)
        start = _decimal(_str(obj, "block_start", what), what)
        end = _decimal(_str(obj, "block_end", what), what)
        return _checked(what, lambda: cls(broker, start, end))


def next_producer_id_block(
    latest: ProducerIdBlock | None, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE
) -> ProducerIdBlock:
    """The block after ``latest`` (``ProducerIdManager.getNewProducerIdBlock``); the first is
    ``[0, block_size - 1]``. Producer ids are int64 and never reused, so running out is fatal."""
    if not _is_int(block_size) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    if latest is None:
        return ProducerIdBlock(broker_id, 0, block_size - 1)
    if latest.block_end > _INT64_MAX - block_size:
        raise ProducerIdsExhaustedError(
            f"producer ids exhausted: the block after {latest.block_end} would pass 2**63-1"
        )
    return ProducerIdBlock(broker_id, latest.block_end + 1, latest.block_end + block_size)


# -- /config/{topics,clients,users,brokers}/{name} -----------------------------------------------

def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """``ConfigEntityZNode``: ``{"version":1,"config":{...}}``, every value a string."""
    validate_config(config)
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_entity_config(data: bytes) -> dict[str, str]:
    """Empty data reads as no overrides, as in Kafka (``ConfigEntityZNode.decode``)."""
    if not data:
        return {}
    what = "entity config"
    obj = _object(data, what)
    config = _get(obj, "config", what)
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise MalformedZnodeError(f"{what}: 'config' must map names to strings, got {config!r}")
    return dict(config)


# -- /controller, /controller_epoch, /cluster/id -------------------------------------------------

def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (``ControllerZNode.decode``)."""
    obj = _object(data, "controller")
    return _int(obj, "brokerid", "controller")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise MalformedZnodeError(f"controller epoch: not ASCII: {bytes(data)[:40]!r}") from None
    return _decimal(text, "controller epoch")


def encode_cluster_id(cluster_id: str) -> bytes:
    """``ClusterIdZNode.toJson``; note the version is the *string* "1"."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    cluster_id = _str(_object(data, "cluster id"), "id", "cluster id")
    if not cluster_id:
        raise MalformedZnodeError("cluster id: 'id' is empty")
    return cluster_id


def generate_cluster_id(rng: Random) -> str:
    """A random (version 4) UUID as 22 chars of unpadded URL-safe base64, the shape of
    ``CoreUtils.generateUuidAsBase64``; randomness comes from the caller."""
    raw = uuid.UUID(int=rng.getrandbits(128), version=4).bytes
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def generate_topic_id(rng: Random) -> str:
    """A new topic's id for ``/brokers/topics/{t}`` (Kafka 2.8+ writes one on creation): a
    random (version 4) UUID as 22 chars of unpadded URL-safe base64, drawn again, as
    ``Uuid.randomUuid`` does, when it reads as an option ("-...") or is a reserved id (zero, or
    one: the KRaft metadata topic's)."""
    while True:
        raw = uuid.UUID(int=rng.getrandbits(128), version=4).bytes
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        if not text.startswith("-") and int.from_bytes(raw, "big") > 1:
            return text


# -- notifications (PERSISTENT_SEQUENTIAL children) ----------------------------------------------

def encode_config_change(entity_path: str) -> bytes:
    """``/config/changes/config_change_N``: ``{"version":2,"entity_path":"topics/t"}``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path; version 1's ``entity_type``/``entity_name`` read as ``type/name``."""
    what = "config change notification"
    obj = _object(data, what)
    if _version(obj, what, (1, 2)) == 1:
        return f"{_str(obj, 'entity_type', what)}/{_str(obj, 'entity_name', what)}"
    return _str(obj, "entity_path", what)


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    """``/isr_change_notification/isr_change_N``: the partitions whose ISR a leader changed."""
    return _dumps({
        "version": 1,
        "partitions": [{"topic": topic, "partition": partition} for topic, partition in partitions],
    })


def decode_isr_change(data: bytes) -> list[tuple[str, int]]:
    what = "isr change notification"
    obj = _object(data, what)
    _version(obj, what, (1,))
    entries = _get(obj, "partitions", what)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise MalformedZnodeError(f"{what}: 'partitions' must be an array of objects")
    return [(_str(e, "topic", what), _int(e, "partition", what)) for e in entries]


LOG_DIR_FAILURE_EVENT = 1  # LogDirEventNotificationHandler.LogDirFailureEvent


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker whose log directory failed."""
    what = "log dir event notification"
    obj = _object(data, what)
    _version(obj, what, (1,))
    event = _int(obj, "event", what)
    if event != LOG_DIR_FAILURE_EVENT:
        raise MalformedZnodeError(f"{what}: unknown event {event}")
    return _int(obj, "broker", what)


# -- /consumers/{g}/offsets/{t}/{p} --------------------------------------------------------------

def encode_offset(offset: int) -> bytes:
    """The old ZooKeeper consumer's committed offset: decimal text, nothing else."""
    if not _is_int(offset) or offset < 0:
        raise ValueError(f"a committed offset is a non-negative int, got {offset!r}")
    return str(offset).encode("ascii")


def decode_offset(data: bytes) -> int:
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise MalformedZnodeError(f"consumer offset: not ASCII: {bytes(data)[:40]!r}") from None
    offset = _decimal(text, "consumer offset")
    if offset < 0:
        raise MalformedZnodeError(f"consumer offset: negative offset {offset}")
    return offset
