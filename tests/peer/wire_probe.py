"""Raw requests for the peer tier's error and idempotence tests: the same bytes to Apache Kafka and
to pylog, and what came back, reduced to what a client acts on (error codes, offsets, whether the
connection stayed open).

The socket helper is ``tests/integration/raw_socket.py`` (shared with the integration tier's bad
input tests), loaded here by path as conftest.py loads the integration fixtures.
"""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path

from broker.records import Record, encode_batch
from broker.wire import API_SPECS, ApiKey, ApiVersionsRequest, ErrorCode, ProduceRequest

_RAW_SOCKET = Path(__file__).resolve().parents[1] / "integration" / "raw_socket.py"
if "pylog_raw_socket" in sys.modules:
    raw_socket = sys.modules["pylog_raw_socket"]
else:
    _spec = importlib.util.spec_from_file_location("pylog_raw_socket", _RAW_SOCKET)
    raw_socket = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = raw_socket
    _spec.loader.exec_module(raw_socket)
Raw = raw_socket.Raw

__all__ = ["Raw", "connect", "api_version_ranges", "highest_common_version", "batch_of",
           "produce_request", "produce_partition", "answer_or_close", "serves_after"]

_SOFTWARE = ApiVersionsRequest(client_software_name="pylog-peer-tier", client_software_version="1")


def connect(peer, timeout_s: float = 10.0) -> Raw:
    return Raw(peer.ports[0], client_id="peer-tier", timeout_s=timeout_s)


def api_version_ranges(peer) -> dict[int, tuple[int, int]]:
    """What ``peer`` advertises in ApiVersions v3: api key -> (min, max)."""
    with connect(peer) as raw:
        response = raw.call(ApiKey.API_VERSIONS, 3, _SOFTWARE)
    assert response.error_code == ErrorCode.NONE
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def highest_common_version(peers, api_key: int) -> int:
    """The highest version of ``api_key`` that both peers advertise and pylog's codec speaks, so
    both are compared at the same version."""
    highs = [api_version_ranges(peer)[api_key][1] for peer in peers]
    return min(*highs, API_SPECS[api_key].valid.high)


def batch_of(values: list[bytes], producer_id: int = -1, producer_epoch: int = -1,
             base_sequence: int = -1, timestamp_ms: int | None = None) -> bytes:
    """One batch of ``values`` at offsets 0.., every record at ``timestamp_ms`` (default: now)."""
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return encode_batch([Record(i, now, None, v) for i, v in enumerate(values)],
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence)


def produce_request(topic: str, batch: bytes | None, acks: int = -1, partition: int = 0) -> ProduceRequest:
    data = ProduceRequest.PartitionProduceData(index=partition, records=batch)
    return ProduceRequest(acks=acks, timeout_ms=10_000,
                          topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[data])])


def produce_partition(raw: Raw, version: int, request: ProduceRequest):
    """The one partition answer of a one-partition Produce."""
    response = raw.call(ApiKey.PRODUCE, version, request)
    [topic] = response.responses
    [partition] = topic.partition_responses
    return partition


def answer_or_close(raw: Raw, wait_s: float = 5.0) -> str:
    """What the peer did with the last request: ``"answered"`` (a response frame came),
    ``"closed"`` (the connection closed with no answer) or ``"silent"`` (neither within
    ``wait_s``: it is still waiting for bytes)."""
    raw.sock.settimeout(wait_s)
    try:
        data = raw.sock.recv(1)
    except ConnectionResetError:
        return "closed"
    except socket.timeout:
        return "silent"
    return "answered" if data else "closed"


def serves_after(peer) -> bool:
    """A fresh connection is answered: the broker keeps serving other clients."""
    with connect(peer) as raw:
        response = raw.call(ApiKey.API_VERSIONS, 3, _SOFTWARE)
    return response.error_code == ErrorCode.NONE and bool(response.api_keys)
