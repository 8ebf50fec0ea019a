"""Test doubles for code that talks to Kafka through ``broker.client``: no ZooKeeper, no broker.

``FakeBroker`` is a real TCP listener on 127.0.0.1 (port 0) with one thread per connection. It
reads frames, decodes requests with the wire codec and answers with whatever its handler returns:
a wire response message (encoded for the request's version), ``Raw(bytes)`` (sent as-is, to
script broken frames), ``None`` (no answer, as for acks=0) or ``CLOSE`` (drop the connection).

``InMemoryKafka`` is a handler that behaves like a small Kafka cluster held in memory: topics,
partitions with leaders on several fake brokers, Produce with offset assignment and idempotent
deduplication (reference section 4), Fetch with high watermark, last stable offset and the
aborted-transactions list (section 3), ListOffsets, CreateTopics/DeleteTopics on the
controller, InitProducerId, DescribeConfigs. ``Fault``s injected with ``inject`` make a request
fail in a chosen way (error code, dropped connection before or after the append), which is what
the client's retry paths are tested with. It is a test double, not a broker: no replication,
no persistence, no limits beyond what a test needs.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from broker.records import ControlType, RecordsError, decode_batch, decode_control_record, set_base_offset, validate_batch
from broker.records.header import BatchHeader, BatchLimits
from broker.wire import (
    SUPPORTED_API_VERSIONS,
    ApiKey,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    ErrorCode,
    FetchResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ProduceResponse,
    UnsupportedVersion,
    decode_request,
    encode_response,
    with_size_prefix,
)

__all__ = ["FakeBroker", "Raw", "CLOSE", "InMemoryKafka", "Fault", "api_versions_response"]

_SIZE = struct.Struct(">i")
_LIMITS = BatchLimits(batch_bytes_max=0x7FFFFFFF)
CLOSE = object()


@dataclass(frozen=True)
class Raw:
    """A complete response frame, size prefix included, sent without any checking."""

    frame: bytes


Handler = Callable[[object, object], object]


def api_versions_response(versions=SUPPORTED_API_VERSIONS, error_code: int = 0) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=error_code, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(versions.items())
    ])


class FakeBroker:
    """A scripted broker on 127.0.0.1. ``requests`` records every (header, request) received;
    ``handler_errors`` every exception a handler raised (a test should assert it is empty)."""

    def __init__(self, handler: Handler, *, node_id: int = 0) -> None:
        self.handler = handler
        self.node_id = node_id
        self.requests: list[tuple[object, object]] = []
        self.handler_errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        broker = self

        class _Connection(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                broker._serve(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Connection, bind_and_activate=True)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests_for(self, api_key: int) -> list[tuple[object, object]]:
        with self._lock:
            return [(h, r) for h, r in self.requests if h.api_key == api_key]

    def drop_connections(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self.drop_connections()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeBroker":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _serve(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
        try:
            while True:
                prefix = _recv_exact(sock, 4)
                if prefix is None:
                    return
                frame = _recv_exact(sock, _SIZE.unpack(prefix)[0])
                if frame is None:
                    return
                try:
                    header, request = decode_request(frame)
                except UnsupportedVersion as exc:
                    header, request = exc.header, None
                with self._lock:
                    self.requests.append((header, request))
                try:
                    reply = self.handler(header, request)
                except BaseException as exc:  # recorded for the test to assert on, then hang up
                    self.handler_errors.append(exc)
                    return
                if reply is CLOSE:
                    return
                if reply is None:
                    continue
                sock.sendall(_encode_reply(header, reply))
        except OSError:
            return
        finally:
            with self._lock:
                self._sockets.discard(sock)
            try:
                sock.close()
            except OSError:
                pass


def _encode_reply(header, reply) -> bytes:
    if isinstance(reply, Raw):
        return reply.frame
    version = header.api_version
    if header.api_key == ApiKey.API_VERSIONS and reply.error_code == ErrorCode.UNSUPPORTED_VERSION:
        version = 0  # KIP-511: the error answer is a v0 body
    return with_size_prefix(encode_response(header.api_key, version, header.correlation_id, reply))


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# ======================================================================== in-memory cluster


@dataclass
class Fault:
    """Make the next ``times`` matching requests fail, after letting ``skip`` matching ones
    through. ``kind``: "error" answers ``code`` for every partition (or the whole request);
    "close" drops the connection without handling the request; "close_after" handles it (e.g.
    appends) and then drops the connection."""

    api_key: int
    kind: str = "error"
    code: int = ErrorCode.NONE
    times: int = 1
    node_id: int | None = None
    topic: str | None = None
    skip: int = 0


@dataclass
class _Batch:
    header: BatchHeader
    data: bytes


@dataclass
class _Partition:
    leader: int
    replicas: list[int]
    batches: list[_Batch] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    # producer id -> list of (epoch, first_seq, last_seq, base_offset) of its last 5 batches
    producers: dict[int, list[tuple[int, int, int, int]]] = field(default_factory=dict)
    open_txns: dict[int, int] = field(default_factory=dict)  # pid -> first offset of its open txn
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first, last=marker)

    @property
    def last_stable_offset(self) -> int:
        return min(self.open_txns.values(), default=self.log_end_offset)


class InMemoryKafka:
    """A little Kafka in memory, served by ``brokers`` ``FakeBroker``s (node ids 0..n-1)."""

    def __init__(self, brokers: int = 1, *, controller_id: int = 0,
                 api_versions=SUPPORTED_API_VERSIONS, fetch_wait_cap_ms: int = 200,
                 produce_delay_ms: float = 0) -> None:
        self.lock = threading.RLock()
        self.topics: dict[str, dict[int, _Partition]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.controller_id = controller_id
        self.api_versions = dict(api_versions)
        self.faults: list[Fault] = []
        self.next_producer_id = 1000
        self.fetch_wait_cap_ms = fetch_wait_cap_ms
        # Every Produce waits this long before it is handled (outside the lock), so a client
        # has several requests in flight on one connection: the pipelining tests use it.
        self.produce_delay_ms = produce_delay_ms
        self.brokers = [FakeBroker(self._handler_for(n), node_id=n) for n in range(brokers)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()

    def __enter__(self) -> "InMemoryKafka":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def handler_errors(self) -> list[BaseException]:
        return [e for b in self.brokers for e in b.handler_errors]

    # ---------------------------------------------------------------- test controls

    def create_topic(self, name: str, partitions: int = 1, *, leaders: list[int] | None = None,
                     config: dict | None = None) -> None:
        with self.lock:
            n = len(self.brokers)
            self.topics[name] = {
                p: _Partition(leader=(leaders[p] if leaders else p % n), replicas=[(leaders[p] if leaders else p % n)])
                for p in range(partitions)
            }
            self.configs[name] = dict(config or {})

    def set_leader(self, topic: str, partition: int, leader: int) -> None:
        with self.lock:
            self.topics[topic][partition].leader = leader
            self.topics[topic][partition].replicas = [leader]

    def inject(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def append_raw(self, topic: str, partition: int, batch: bytes) -> int:
        """Append a batch as the leader would (offset assigned), bypassing Produce checks;
        returns its base offset. Control batches end their producer's open transaction."""
        with self.lock:
            return self._append(self.topics[topic][partition], bytearray(batch))

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        with self.lock:
            part = self.topics[topic][partition]
            part.log_start_offset = before_offset
            part.batches = [b for b in part.batches if b.header.last_offset >= before_offset]

    def records(self, topic: str, partition: int) -> list:
        """Every data record in the log, decoded (for assertions)."""
        with self.lock:
            out = []
            for batch in self.topics[topic][partition].batches:
                if not batch.header.is_control:
                    out.extend(decode_batch(batch.data, 0, _LIMITS).records)
            return out

    def batch_headers(self, topic: str, partition: int) -> list[BatchHeader]:
        with self.lock:
            return [b.header for b in self.topics[topic][partition].batches]

    # ---------------------------------------------------------------- dispatch

    def _handler_for(self, node_id: int) -> Handler:
        def handle(header, request):
            if header.api_key == ApiKey.PRODUCE and self.produce_delay_ms:
                time.sleep(self.produce_delay_ms / 1000)
            fault = self._take_fault(header.api_key, node_id, request)
            if fault is not None and fault.kind == "close":
                return CLOSE
            if header.api_key == ApiKey.API_VERSIONS:
                return self._api_versions(header)
            if request is None:
                raise AssertionError(f"unsupported version {header.api_version} of api {header.api_key}")
            method = _HANDLERS.get(header.api_key)
            if method is None:
                raise AssertionError(f"InMemoryKafka does not implement api {header.api_key}")
            with self.lock:
                reply = method(self, node_id, header, request, fault if fault and fault.kind == "error" else None)
            if fault is not None and fault.kind == "close_after":
                return CLOSE
            return reply
        return handle

    def _take_fault(self, api_key: int, node_id: int, request) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.api_key != api_key or fault.times <= 0:
                    continue
                if fault.node_id is not None and fault.node_id != node_id:
                    continue
                if fault.topic is not None and fault.topic not in _request_topics(request):
                    continue
                if fault.skip > 0:
                    fault.skip -= 1
                    return None
                fault.times -= 1
                return fault
            return None

    def _api_versions(self, header):
        high = self.api_versions.get(ApiKey.API_VERSIONS, (0, 0))[1]
        if header.api_version > high:
            return api_versions_response({ApiKey.API_VERSIONS: self.api_versions[ApiKey.API_VERSIONS]},
                                         ErrorCode.UNSUPPORTED_VERSION)
        return api_versions_response(self.api_versions)

    # ---------------------------------------------------------------- APIs

    def _metadata(self, node_id, header, request, fault):
        names = sorted(self.topics) if request.topics is None else [t.name for t in request.topics]
        topics = []
        for name in names:
            parts = self.topics.get(name)
            if parts is None:
                topics.append(MetadataResponse.MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]))
                continue
            topics.append(MetadataResponse.MetadataResponseTopic(error_code=0, name=name, partitions=[
                MetadataResponse.MetadataResponsePartition(
                    error_code=0, partition_index=p, leader_id=part.leader, leader_epoch=0,
                    replica_nodes=list(part.replicas), isr_nodes=list(part.replicas))
                for p, part in sorted(parts.items())
            ]))
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port)
                   for b in self.brokers]
        return MetadataResponse(brokers=brokers, cluster_id="in-memory", controller_id=self.controller_id,
                                topics=topics)

    def _create_topics(self, node_id, header, request, fault):
        results = []
        for t in request.topics:
            code, message = ErrorCode.NONE, None
            if fault is not None:
                code = fault.code
            elif node_id != self.controller_id:
                code = ErrorCode.NOT_CONTROLLER
            elif t.name in self.topics:
                code, message = ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
            elif t.num_partitions == 0 or t.num_partitions < -1:
                code, message = ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            elif t.replication_factor > len(self.brokers) or t.replication_factor == 0:
                code, message = (ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {t.replication_factor} larger than available "
                                 f"brokers: {len(self.brokers)}.")
            elif not request.validate_only:
                self.create_topic(t.name, 1 if t.num_partitions == -1 else t.num_partitions,
                                  config={c.name: c.value for c in t.configs})
            results.append(CreateTopicsResponse.CreatableTopicResult(
                name=t.name, error_code=code, error_message=message))
        return CreateTopicsResponse(topics=results)

    def _delete_topics(self, node_id, header, request, fault):
        names = [t.name for t in request.topics] if header.api_version >= 6 else list(request.topic_names)
        results = []
        for name in names:
            code = ErrorCode.NONE
            if node_id != self.controller_id:
                code = ErrorCode.NOT_CONTROLLER
            elif name not in self.topics:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                del self.topics[name]
            results.append(DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=code))
        return DeleteTopicsResponse(responses=results)

    def _init_producer_id(self, node_id, header, request, fault):
        if fault is not None:
            return InitProducerIdResponse(error_code=fault.code, producer_id=-1, producer_epoch=-1)
        self.next_producer_id += 1
        return InitProducerIdResponse(error_code=0, producer_id=self.next_producer_id, producer_epoch=0)

    def _produce(self, node_id, header, request, fault):
        responses = []
        for topic in request.topic_data:
            answers = []
            for pd in topic.partition_data:
                code, base = self._produce_partition(node_id, topic.name, pd, fault)
                answers.append(ProduceResponse.PartitionProduceResponse(
                    index=pd.index, error_code=code, base_offset=base))
            responses.append(ProduceResponse.TopicProduceResponse(name=topic.name, partition_responses=answers))
        return None if request.acks == 0 else ProduceResponse(responses=responses)

    def _produce_partition(self, node_id, topic, pd, fault) -> tuple[int, int]:
        if fault is not None and (fault.topic is None or fault.topic == topic):
            return fault.code, -1
        part = self.topics.get(topic, {}).get(pd.index)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1
        if part.leader != node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        data = bytearray(pd.records)
        try:
            header = validate_batch(data, 0, _LIMITS)
        except RecordsError as exc:
            return exc.kafka_error_code, -1
        if header.producer_id >= 0:
            code, base = self._check_sequence(part, header)
            if code is not None:
                return code, base
        return ErrorCode.NONE, self._append(part, data)

    @staticmethod
    def _check_sequence(part: _Partition, header: BatchHeader) -> tuple[int | None, int]:
        """Reference section 4: duplicates answer the original offset; gaps are 45."""
        cached = part.producers.get(header.producer_id)
        if not cached:
            return None, -1
        for epoch, first, last, base in cached:
            if epoch == header.producer_epoch and (first, last) == (header.base_sequence, header.last_sequence):
                return ErrorCode.NONE, base
        epoch, _, last, _ = cached[-1]
        if header.producer_epoch < epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, -1
        if header.producer_epoch > epoch:
            return (None, -1) if header.base_sequence == 0 else (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
        if header.base_sequence != (last + 1) % (1 << 31):
            return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        return None, -1

    def _append(self, part: _Partition, data: bytearray) -> int:
        base = part.log_end_offset
        set_base_offset(data, 0, base)
        header = validate_batch(data, 0, _LIMITS)
        part.batches.append(_Batch(header, bytes(data)))
        part.log_end_offset = header.next_offset
        if header.producer_id >= 0 and not header.is_control:
            entries = part.producers.setdefault(header.producer_id, [])
            if entries and entries[-1][0] != header.producer_epoch:
                entries.clear()
            entries.append((header.producer_epoch, header.base_sequence, header.last_sequence, base))
            del entries[:-5]
            if header.is_transactional:
                part.open_txns.setdefault(header.producer_id, base)
        if header.is_control:
            control = decode_control_record(decode_batch(data, 0, _LIMITS).records[0])
            first = part.open_txns.pop(header.producer_id, None)
            if control.type == ControlType.ABORT and first is not None:
                part.aborted.append((header.producer_id, first, base))
        return base

    def _fetch(self, node_id, header, request, fault):
        wait_ms = min(request.max_wait_ms, self.fetch_wait_cap_ms)
        answer = self._fetch_answer(node_id, header, request, fault)
        if wait_ms > 0 and all(not p.records for t in answer.responses for p in t.partitions):
            self.lock.release()  # let producers append while this fetch long-polls
            try:
                time.sleep(wait_ms / 1000)
            finally:
                self.lock.acquire()
            answer = self._fetch_answer(node_id, header, request, fault)
        return answer

    def _fetch_answer(self, node_id, header, request, fault):
        read_committed = request.isolation_level == 1
        responses = []
        for topic in request.topics:
            answers = []
            for fp in topic.partitions:
                answers.append(self._fetch_partition(node_id, topic.topic, fp, read_committed, fault))
            responses.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, partitions=answers))
        return FetchResponse(responses=responses)

    def _fetch_partition(self, node_id, topic, fp, read_committed, fault):
        def answer(code, records=b"", aborted=None, part=None):
            return FetchResponse.PartitionData(
                partition_index=fp.partition, error_code=code,
                high_watermark=part.log_end_offset if part else -1,
                last_stable_offset=part.last_stable_offset if part else -1,
                log_start_offset=part.log_start_offset if part else -1,
                aborted_transactions=aborted, records=records)

        if fault is not None and (fault.topic is None or fault.topic == topic):
            return answer(fault.code)
        part = self.topics.get(topic, {}).get(fp.partition)
        if part is None:
            return answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if part.leader != node_id:
            return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, part=part)
        if not part.log_start_offset <= fp.fetch_offset <= part.log_end_offset:
            return answer(ErrorCode.OFFSET_OUT_OF_RANGE, part=part)
        upper = part.last_stable_offset if read_committed else part.log_end_offset
        chunks, total = [], 0
        for batch in part.batches:
            if batch.header.last_offset < fp.fetch_offset or batch.header.base_offset >= upper:
                continue
            if chunks and total + len(batch.data) > fp.partition_max_bytes:
                chunks.append(batch.data[: fp.partition_max_bytes - total])  # a cut tail, as Kafka may send
                break
            chunks.append(batch.data)
            total += len(batch.data)
        aborted = None
        if read_committed:
            aborted = [FetchResponse.AbortedTransaction(producer_id=pid, first_offset=first)
                       for pid, first, last in part.aborted
                       if last >= fp.fetch_offset and first < upper]
        return answer(ErrorCode.NONE, b"".join(chunks), aborted, part)

    def _list_offsets(self, node_id, header, request, fault):
        topics = []
        for topic in request.topics:
            answers = []
            for lp in topic.partitions:
                code, offset, ts = self._list_offset(node_id, topic.name, lp, request.isolation_level, fault)
                answers.append(ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=lp.partition_index, error_code=code, timestamp=ts, offset=offset))
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=answers))
        return ListOffsetsResponse(topics=topics)

    def _list_offset(self, node_id, topic, lp, isolation_level, fault) -> tuple[int, int, int]:
        if fault is not None:
            return fault.code, -1, -1
        part = self.topics.get(topic, {}).get(lp.partition_index)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
        if part.leader != node_id:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1
        if lp.timestamp == -2:
            return ErrorCode.NONE, part.log_start_offset, -1
        if lp.timestamp == -1:
            return ErrorCode.NONE, part.last_stable_offset if isolation_level else part.log_end_offset, -1
        for batch in part.batches:
            if batch.header.is_control or batch.header.max_timestamp < lp.timestamp:
                continue
            for record in decode_batch(batch.data, 0, _LIMITS).records:
                if record.timestamp >= lp.timestamp and record.offset >= part.log_start_offset:
                    return ErrorCode.NONE, record.offset, record.timestamp
        return ErrorCode.NONE, -1, -1

    def _describe_configs(self, node_id, header, request, fault):
        results = []
        for resource in request.resources:
            config = self.configs.get(resource.resource_name)
            if config is None:
                results.append(DescribeConfigsResponse.DescribeConfigsResult(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="no such topic",
                    resource_type=resource.resource_type, resource_name=resource.resource_name, configs=[]))
                continue
            results.append(DescribeConfigsResponse.DescribeConfigsResult(
                error_code=0, error_message=None, resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[DescribeConfigsResponse.DescribeConfigsResourceResult(
                    name=k, value=v, read_only=False, is_sensitive=False) for k, v in sorted(config.items())]))
        return DescribeConfigsResponse(results=results)


_HANDLERS = {
    ApiKey.METADATA: InMemoryKafka._metadata,
    ApiKey.CREATE_TOPICS: InMemoryKafka._create_topics,
    ApiKey.DELETE_TOPICS: InMemoryKafka._delete_topics,
    ApiKey.INIT_PRODUCER_ID: InMemoryKafka._init_producer_id,
    ApiKey.PRODUCE: InMemoryKafka._produce,
    ApiKey.FETCH: InMemoryKafka._fetch,
    ApiKey.LIST_OFFSETS: InMemoryKafka._list_offsets,
    ApiKey.DESCRIBE_CONFIGS: InMemoryKafka._describe_configs,
}


def _request_topics(request) -> set[str]:
    if request is None:
        return set()
    for attr, name_attr in (("topic_data", "name"), ("topics", "topic"), ("topics", "name")):
        items = getattr(request, attr, None)
        if items:
            names = {getattr(t, name_attr, None) for t in items}
            names.discard(None)
            if names:
                return names
    return set()
