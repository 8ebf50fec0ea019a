"""One blocking TCP connection to one broker: framing, correlation ids, version negotiation.

Wire contract (reference section 0): every request and response is ``int32 size`` + bytes; a
connection is strict FIFO, so responses come back in the order the requests went out. We keep
the in-flight requests in a deque and require each response's correlation id to match the
oldest one; anything else means the stream is out of step and the connection is closed
(kafka-python's ``CorrelationIdError`` does the same). Pipelining is the caller's choice: call
``send`` several times (up to ``inflight_requests_max``), then ``receive`` the answers in order.

Negotiation (reference 1.3, KIP-511): the first request on a new socket is ApiVersions v3. A
broker that does not know v3 answers with a v0 body, error UNSUPPORTED_VERSION and (from Kafka
2.4 on) its own ApiVersions range; we retry with ``min(sent - 1, broker max)``, or v0 if it did
not say (librdkafka ``rdkafka_broker.c``). Afterwards ``version_for(api_key)`` is the highest
version both sides support.

Failures close the socket and fail every in-flight request: a connection whose stream may be out
of step cannot be trusted with the next response. The next ``send`` reconnects (and negotiates
again), so a long-lived client survives a broker restart.

Security (``ClientConfig.security``, ``broker.client.security``): TLS is set up right after the
TCP connect (bounded by ``connect_timeout_ms``), SASL right after ApiVersions (SaslHandshake v1,
SaslAuthenticate; KIP-152). A failed login raises ``KafkaError`` with Kafka's code
(SASL_AUTHENTICATION_FAILED 58, UNSUPPORTED_SASL_MECHANISM 33). When the broker answers a session
lifetime (KIP-368, ``connections.max.reauth.ms``), the connection authenticates again (SaslHandshake
+ SaslAuthenticate, a fresh SCRAM exchange, same socket) on the first send with nothing in flight
after a random 85-95% of it (``reauthentication_delay_ms``, shared with broker-to-broker
connections). A connection kept pipelined, never empty, cannot renew in between (the answers
would interleave): the broker closes it at its first request past the lifetime, and the next
``send`` reconnects and logs in afresh, as after any failure. A TLS socket may hold a decrypted
response that the kernel socket no longer shows as readable: ``buffered`` says so, and the
callers that wait on ``selectable`` check it first.

Limits (``ClientConfig``): ``response_bytes_max`` is checked against the size prefix before
anything is allocated; ``request_timeout_ms`` bounds each request from send to response;
``connect_timeout_ms`` bounds TCP connect plus negotiation; ``inflight_requests_max`` bounds the
deque. Not thread-safe: one owner thread per connection.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
from collections import deque
from dataclasses import dataclass
from importlib import metadata as _pkg_metadata
from types import MappingProxyType
from typing import Callable

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.security.sasl_client import SaslAuthenticationError, reauthentication_delay_ms
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError, KafkaTimeoutError
from broker.wire import (API_SPECS, ApiKey, ErrorCode, MalformedMessage, decode_response, encode_request_chunks,
                         response_correlation_id)

__all__ = ["BrokerConnection", "CLIENT_API_VERSIONS", "API_VERSIONS_FIRST", "pick_version"]

_SIZE = struct.Struct(">i")
_GATHER_BYTES_MIN = 64 * 1024
_READ_AHEAD_BYTES = 64 * 1024  # one recv's reach past the response being read (_read_exact)
_GATHER_PARTS_MAX = 512  # well under IOV_MAX (1024 on Linux): sendmsg refuses more buffers
_INT32_MAX = 0x7FFFFFFF

# The first ApiVersions version we try (librdkafka also starts at 3, reference 1.3).
API_VERSIONS_FIRST = 3


def _client_versions() -> dict[int, tuple[int, int]]:
    """The versions this client can send: what the codec covers, raised where an older version
    lacks something the client relies on."""
    minimum = {
        ApiKey.PRODUCE: 3,  # RecordBatch v2 (magic 2) needs Produce v3+
        ApiKey.FETCH: 4,  # isolation level and RecordBatch v2 answers
        ApiKey.LIST_OFFSETS: 1,  # v0 answers a list of old-style offsets
        ApiKey.METADATA: 1,  # v0 cannot ask for "all topics" and has no controller id
    }
    # The codec parses InitProducerId v5-6 (KIP-890's TRANSACTION_ABORTABLE, KIP-939's 2PC);
    # the producer handles neither yet, so it does not offer them. The transactional producer
    # speaks transaction version 2 (KIP-890 part 2) where the broker finalizes it: EndTxn v5,
    # Produce v12 and TxnOffsetCommit v5 add their partitions implicitly
    # (broker/client/transactions.py caps Produce at 11 and TxnOffsetCommit at 4 otherwise).
    # AddPartitionsToTxn <= 3 (v4+ are the brokers' KIP-890 requests, broker/server/txn_verify.py).
    maximum = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5,
               ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.ADD_OFFSETS_TO_TXN: 4}
    return {
        int(key): (minimum.get(key, spec.valid.low), maximum.get(key, spec.valid.high))
        for key, spec in API_SPECS.items()
    }


CLIENT_API_VERSIONS = MappingProxyType(_client_versions())


def _software_version() -> str:
    try:
        return _pkg_metadata.version("pylog")
    except _pkg_metadata.PackageNotFoundError:  # running from a source tree without metadata
        return "0.0.0"


_SOFTWARE_NAME = "pylog-client"
_SOFTWARE_VERSION = _software_version()


def pick_version(client: tuple[int, int], broker: tuple[int, int] | None) -> int | None:
    """Highest version in both inclusive ranges, or None when they do not overlap."""
    if broker is None:
        return None
    low, high = max(client[0], broker[0]), min(client[1], broker[1])
    return high if low <= high else None


@dataclass(frozen=True, slots=True)
class _InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    deadline_ms: float


class BrokerConnection:
    """A blocking connection to ``host:port``. ``node_id`` is for messages only (-1 = bootstrap)."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str | None = None,
        config: ClientConfig | None = None,
        *,
        node_id: int = -1,
        clock: Clock = SYSTEM_CLOCK,
        connect: Callable[..., socket.socket] = socket.create_connection,
    ) -> None:
        self.host = host
        self.port = int(port)
        self.node_id = node_id
        self._config = config or ClientConfig()
        self._client_id = client_id if client_id is not None else self._config.client_id
        self._clock = clock
        self._connect = connect
        self._sock: socket.socket | None = None
        self._poll_in: select.poll | None = None  # the socket, for waiting until it is readable
        self._poll_out: select.poll | None = None  # ... writable
        self._inflight: deque[_InFlight] = deque()
        self._rbuf = bytearray()  # bytes read ahead of the next response (see _read_exact)
        self._rpos = 0
        self._next_correlation_id = 0
        self._broker_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version: int | None = None  # the ApiVersions version that worked
        # KIP-584 features the broker finalized ({name: max level}; v3+ answers carry them)
        self.finalized_features: dict[str, int] = {}
        self._security = self._config.security
        self._tls = False  # the current socket is an SSLSocket
        self._reauthenticate_at_ms: float | None = None  # KIP-368

    # ------------------------------------------------------------------ lifecycle

    def __repr__(self) -> str:
        state = "connected" if self._sock is not None else "closed"
        return f"BrokerConnection(node {self.node_id} at {self.address}, {state})"

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def in_flight_count(self) -> int:
        return len(self._inflight)

    @property
    def oldest_deadline_ms(self) -> float | None:
        """When the oldest in-flight request times out (None: nothing in flight)."""
        return self._inflight[0].deadline_ms if self._inflight else None

    @property
    def selectable(self) -> socket.socket | None:
        """The current socket (None when closed), for ``selectors``. A reconnect makes a new
        one: requests sent on an older socket are lost, whatever its file descriptor became."""
        return self._sock

    def fileno(self) -> int:
        """The socket's descriptor, for ``selectors`` (only while connected)."""
        assert self._sock is not None, "fileno() of a closed connection"
        return self._sock.fileno()

    @property
    def broker_api_versions(self) -> MappingProxyType:
        """The broker's advertised ``{api_key: (min, max)}`` from the last negotiation."""
        return MappingProxyType(self._broker_versions)

    def connect(self) -> None:
        """Open the socket and negotiate versions; a no-op when already connected."""
        if self._sock is not None:
            return
        deadline = self._clock.monotonic_ms() + self._config.connect_timeout_ms
        try:
            sock = self._connect((self.host, self.port), timeout=self._config.connect_timeout_ms / 1000)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.address}: {_os_reason(exc)}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._security is not None and self._security.ssl_context is not None:
            sock = self._start_tls(sock, deadline)
        sock.setblocking(False)  # once: see ``_send_frame`` and ``_read_exact``
        self._sock = sock
        self._poll_in = _poller(sock, select.POLLIN)
        self._poll_out = _poller(sock, select.POLLOUT)
        self._inflight.clear()
        self._rbuf, self._rpos = bytearray(), 0
        try:
            self._negotiate(deadline)
            if self._security is not None and self._security.mechanism is not None:
                self._authenticate(deadline)
        except BaseException:
            self.close()
            raise

    def _start_tls(self, sock: socket.socket, deadline_ms: float) -> socket.socket:
        """The TLS handshake, blocking, within what is left of the connect timeout."""
        sock.settimeout(max(deadline_ms - self._clock.monotonic_ms(), 1) / 1000)
        try:
            sock = self._security.ssl_context.wrap_socket(sock, server_hostname=self.host)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise KafkaConnectionError(f"TLS handshake with {self.address} failed: {exc}") from exc
        self._tls = True
        return sock

    def _authenticate(self, deadline_ms: float) -> None:
        """The SASL exchange (raises ``KafkaError`` with the broker's error code)."""
        version = min(self._broker_versions.get(ApiKey.SASL_AUTHENTICATE, (0, 0))[1], 2)

        def request(api_key: int, api_version: int, body: dict):
            timeout = max(deadline_ms - self._clock.monotonic_ms(), 1)
            self._send(api_key, api_version, body, True, timeout)
            return self.receive()

        started_ms = self._clock.monotonic_ms()
        try:
            lifetime_ms = self._security.sasl_client().exchange(request, version)
        except SaslAuthenticationError as exc:
            raise KafkaError(exc.error_code, f"{self.address}: SASL authentication failed: {exc}") from None
        delay_ms = reauthentication_delay_ms(lifetime_ms)
        self._reauthenticate_at_ms = None if delay_ms is None else started_ms + delay_ms

    @property
    def buffered(self) -> bool:
        """True when bytes of a response were already read off the socket (``_read_exact``
        reads ahead), or a TLS socket holds decrypted ones: ``receive`` can take them without
        the kernel socket being readable, so a selector would not wake for them."""
        return self._sock is not None and (len(self._rbuf) > self._rpos
                                           or (self._tls and self._sock.pending() > 0))

    def close(self) -> None:
        """Close the socket; requests still in flight are lost (their ``receive`` raises)."""
        sock, self._sock = self._sock, None
        self._tls = False
        self._reauthenticate_at_ms = None
        self._poll_in = self._poll_out = None
        self._inflight.clear()
        self._rbuf, self._rpos = bytearray(), 0
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass  # closing a broken socket has nothing left to report

    def __enter__(self) -> "BrokerConnection":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ versions

    def version_for(self, api_key: int, min_version: int = 0, max_version: int = 0x7FFF) -> int:
        """Highest version of ``api_key`` that this client, the broker, and the caller's bounds
        all allow; raises ``KafkaError(UNSUPPORTED_VERSION)`` if there is none."""
        self.connect()
        client = CLIENT_API_VERSIONS[api_key]
        client = (max(client[0], min_version), min(client[1], max_version))
        broker = self._broker_versions.get(api_key)
        version = pick_version(client, broker)
        if version is None:
            name = API_SPECS[api_key].name
            offered = f"{broker[0]}-{broker[1]}" if broker else "none"
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{name}: broker {self.address} offers versions {offered}, "
                f"this client needs {client[0]}-{client[1]}",
            )
        return version

    # ------------------------------------------------------------------ requests

    def send(
        self,
        api_key: int,
        request,
        api_version: int | None = None,
        *,
        expect_response: bool = True,
        timeout_ms: float | None = None,
    ) -> int:
        """Send one request (a wire message or a dict of its fields) and return its correlation
        id. With ``expect_response=False`` (Produce acks=0) nothing is queued for ``receive``."""
        self.connect()
        if (self._reauthenticate_at_ms is not None and not self._inflight
                and self._clock.monotonic_ms() >= self._reauthenticate_at_ms):
            try:
                self._authenticate(self._clock.monotonic_ms() + self._config.connect_timeout_ms)
            except BaseException:
                self.close()
                raise
        if api_version is None:
            api_version = self.version_for(api_key)
        return self._send(api_key, api_version, request, expect_response, timeout_ms)

    def receive(self):
        """The decoded response to the oldest in-flight request (strict FIFO)."""
        assert self._inflight, "receive() with no request in flight"
        head = self._inflight[0]
        try:
            frame = self._read_frame(head)
            correlation_id = response_correlation_id(frame)
            if correlation_id != head.correlation_id:
                raise KafkaProtocolError(
                    f"{self.address}: response correlation id {correlation_id} does not match the "
                    f"oldest in-flight request's {head.correlation_id} "
                    f"({API_SPECS[head.api_key].name} v{head.api_version})"
                )
            try:
                _, body = decode_response(head.api_key, head.api_version, frame)
            except MalformedMessage as exc:
                raise KafkaProtocolError(
                    f"{self.address}: {API_SPECS[head.api_key].name} v{head.api_version} "
                    f"response does not parse: {exc}"
                ) from exc
        except BaseException:
            self.close()
            raise
        self._inflight.popleft()
        return body

    def request(self, api_key: int, request, api_version: int | None = None, *,
                timeout_ms: float | None = None):
        """Send one request and wait for its response; nothing else may be in flight."""
        assert not self._inflight, "request() while pipelined requests are in flight"
        self.send(api_key, request, api_version, timeout_ms=timeout_ms)
        return self.receive()

    # ------------------------------------------------------------------ internals

    def _send(self, api_key: int, api_version: int, request, expect_response: bool,
              timeout_ms: float | None) -> int:
        assert len(self._inflight) < self._config.inflight_requests_max, (
            f"{len(self._inflight)} requests in flight, inflight_requests_max is "
            f"{self._config.inflight_requests_max}: receive() before sending more"
        )
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _INT32_MAX
        chunks = encode_request_chunks(api_key, api_version, correlation_id, self._client_id, request)
        timeout = self._config.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = self._clock.monotonic_ms() + timeout
        assert self._sock is not None
        try:
            self._send_frame(chunks, deadline)
        except socket.timeout as exc:
            self.close()
            raise KafkaTimeoutError(f"{self.address}: sending a request timed out") from exc
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"{self.address}: send failed: {_os_reason(exc)}") from exc
        if expect_response:
            self._inflight.append(_InFlight(correlation_id, api_key, api_version, deadline))
        return correlation_id

    def _send_frame(self, chunks: list, deadline_ms: float) -> None:
        """Size prefix and the request's chunks. Large chunks (record sets: the caller's own
        buffers) go with ``sendmsg`` (scatter-gather) as they are; the small ones around them are
        joined. Joining a 1 MiB Produce into one ``bytes`` copied it twice, into fresh pages each
        time (glibc hands big freed blocks back to the kernel), which cost the Spark sink ~0.6
        CPU-s per 5M rows on a busy machine (issue 5).

        The socket is non-blocking: a request that fits the socket buffer (nearly all) costs one
        ``send`` system call. A socket with a timeout would cost a ``poll`` before every call and
        an ``ioctl`` for each ``settimeout``, and every one of those releases and re-takes the
        GIL: in a process whose other threads are busy (a producer's I/O thread, a consumer),
        each re-take can wait for another thread, which is where the milliseconds of end-to-end
        latency went (measured: ~40 us of CPU and three GIL hand-offs per request)."""
        parts = _gather(chunks)
        sock = self._sock
        if self._tls:  # an SSLSocket has no sendmsg: one buffer
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            self._send_tls(memoryview(data), deadline_ms)
            return
        if len(parts) == 1:
            data = parts[0]
            try:
                sent = sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent < len(data):
                self._send_rest([memoryview(data)[sent:]], deadline_ms)
            return
        self._send_rest([memoryview(part) for part in parts], deadline_ms)

    def _send_rest(self, parts: list[memoryview], deadline_ms: float) -> None:
        """Send ``parts`` (scatter-gather), waiting for the socket to be writable whenever its
        buffer is full (``socket.timeout`` at ``deadline_ms``)."""
        while parts:
            try:
                sent = self._sock.sendmsg(parts)
            except (BlockingIOError, InterruptedError):
                self._wait(self._poll_out, deadline_ms)
                continue
            while parts and sent >= len(parts[0]):
                sent -= len(parts[0])
                parts.pop(0)
            if parts and sent:
                parts[0] = parts[0][sent:]

    def _send_tls(self, data: memoryview, deadline_ms: float) -> None:
        while data:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
                self._wait(self._poll_out, deadline_ms)
                continue
            except ssl.SSLWantReadError:
                self._wait(self._poll_in, deadline_ms)
                continue
            data = data[sent:]

    def _wait(self, poller: select.poll, deadline_ms: float) -> None:
        remaining = deadline_ms - self._clock.monotonic_ms()
        if remaining <= 0 or not poller.poll(max(int(remaining + 0.999), 1)):
            raise socket.timeout("timed out")

    def _read_frame(self, head: _InFlight) -> bytearray:
        size = _SIZE.unpack(self._read_exact(4, head))[0]
        limit = self._config.response_bytes_max
        if size < 4 or size > limit:
            raise KafkaProtocolError(
                f"{self.address}: response frame of {size} bytes is outside 4..{limit} "
                f"(response_bytes_max)"
            )
        return self._read_exact(size, head)

    def _read_exact(self, n: int, head: _InFlight) -> bytearray:
        """Exactly ``n`` bytes, from what was read ahead and then the socket. Each ``recv``
        asks for up to ``_READ_AHEAD_BYTES`` more than needed, so the answers of a pipeline
        (100 commit_async in flight; the broker writes the ones finished together in one
        send) cost one system call for many instead of two each (``buffered`` tells the
        callers' selectors that bytes are waiting here). A body larger than that is received
        straight into its own buffer (one copy of a 1 MiB Fetch answer, as before).
        Non-blocking reads; waits in ``poll`` only when nothing is there yet (see
        ``_send_frame`` for why not a socket timeout)."""
        buf, pos = self._rbuf, self._rpos
        have = len(buf) - pos
        if have >= n:
            out = buf[pos:pos + n]
            if have == n:
                self._rbuf, self._rpos = bytearray(), 0
            else:
                self._rpos = pos + n
            return out
        if n - have > _READ_AHEAD_BYTES:  # large: straight into its own buffer
            out = bytearray(n)
            out[:have] = memoryview(buf)[pos:]
            self._rbuf, self._rpos = bytearray(), 0
            view = memoryview(out)
            while have < n:
                have += self._recv_some(head, view[have:])
            return out
        del buf[:pos]
        self._rpos = 0
        while len(buf) < n:
            buf += self._recv_some(head)
        out = buf[:n]
        del buf[:n]
        return out

    def _recv_some(self, head: _InFlight, view: memoryview | None = None):
        """One ``recv`` that gets at least one byte: up to ``_READ_AHEAD_BYTES`` as bytes, or
        into ``view`` (its count). Waits in ``poll`` while the socket would block (the request's
        deadline: KafkaTimeoutError); an OS error or the broker's close is KafkaConnectionError."""
        assert self._sock is not None
        while True:
            try:
                got = self._sock.recv(_READ_AHEAD_BYTES) if view is None else self._sock.recv_into(view)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                try:
                    self._wait(self._poll_in, head.deadline_ms)
                except socket.timeout:
                    raise self._timed_out(head) from None
                continue
            except OSError as exc:
                raise KafkaConnectionError(f"{self.address}: receive failed: {_os_reason(exc)}") from exc
            if not got:
                raise KafkaConnectionError(f"{self.address}: connection closed by the broker with "
                                           f"{len(self._inflight)} request(s) in flight")
            return got

    def _timed_out(self, head: _InFlight) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"{self.address}: no response to {API_SPECS[head.api_key].name} v{head.api_version} "
            f"(correlation id {head.correlation_id}) within the request timeout"
        )

    def _negotiate(self, deadline_ms: float) -> None:
        """ApiVersions, falling back per KIP-511 on UNSUPPORTED_VERSION (at most 5 tries: each
        retry uses a strictly lower version)."""
        version = API_VERSIONS_FIRST
        for _ in range(API_VERSIONS_FIRST + 2):
            body = {}
            if version >= 3:
                body = {"client_software_name": _SOFTWARE_NAME,
                        "client_software_version": _SOFTWARE_VERSION}
            timeout = max(deadline_ms - self._clock.monotonic_ms(), 1)
            self._send(ApiKey.API_VERSIONS, version, body, True, timeout)
            response = self.receive()
            advertised = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys
            }
            code = response.error_code
            if code == ErrorCode.NONE:
                self._broker_versions = advertised
                self.api_versions_version = version
                self.finalized_features = {f.name: f.max_version_level
                                           for f in getattr(response, "finalized_features", None) or ()}
                return
            next_version = _fallback_version(version, code, advertised)
            if next_version is None:
                raise KafkaError(
                    code, f"ApiVersions v{version} to {self.address} failed"
                )
            version = next_version
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                         f"{self.address}: no ApiVersions version was accepted")


def _fallback_version(sent: int, code: int, advertised: dict[int, tuple[int, int]]) -> int | None:
    """The ApiVersions version to retry with after error ``code``, or None to give up."""
    if sent == 0:
        return None
    if code == ErrorCode.UNSUPPORTED_VERSION:
        if ApiKey.API_VERSIONS in advertised:
            retry = min(sent - 1, advertised[ApiKey.API_VERSIONS][1])
            return retry if retry >= 0 else None
        return 0
    if code == ErrorCode.INVALID_REQUEST and sent >= 3:
        return 0  # a broker that rejects our software name/version (librdkafka does the same)
    return None


def _poller(sock: socket.socket, events: int) -> select.poll:
    poller = select.poll()
    poller.register(sock, events)
    return poller


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _gather(chunks: list) -> list:
    """``chunks`` behind their size prefix as few buffers: runs of small chunks joined (a few
    bytes copied), chunks of ``_GATHER_BYTES_MIN`` or more kept as they are (not copied). One
    buffer when nothing is large; everything joined past ``_GATHER_PARTS_MAX`` buffers."""
    size = 0
    large = False
    for chunk in chunks:
        n = len(chunk)
        size += n
        large = large or n >= _GATHER_BYTES_MIN
    prefix = _SIZE.pack(size)
    if not large:
        return [b"".join([prefix, *chunks])]
    parts: list = []
    small: list = [prefix]
    for chunk in chunks:
        if len(chunk) >= _GATHER_BYTES_MIN:
            if small:
                parts.append(b"".join(small))
                small = []
            parts.append(chunk)
        else:
            small.append(chunk)
    if small:
        parts.append(b"".join(small))
    if len(parts) > _GATHER_PARTS_MAX:
        return [b"".join(parts)]
    return parts
