"""The asyncio network layer: accept, frame, dispatch, and answer in request order.

Kafka's contract for one TCP connection is strict FIFO: responses leave in the order requests
arrived, whatever order they finish in (a long-poll Fetch may finish after a later Metadata).
Each connection is an ``asyncio.Protocol``: ``data_received`` cuts frames out of one buffer and
starts one task per request, queued in arrival order; a request that finishes at the head of the
queue hands over its response, and every finished one behind it, from its own task; they are
written at once when nothing else is in flight, else at the end of the event-loop iteration with
the others finished in it (one ``send``: ``_flush_output``). Reading pauses (``pause_reading``)
while ``inflight_requests_max`` requests are queued (a small OffsetCommit counts 1/8: ``_weight``),
the per-connection back-pressure; responses wait in the queue while the transport is over its
write high-water mark (``pause_writing``), so a slow reader ends up pausing its own reading too.

Why a protocol and not streams: at linger.ms=0 a client sends thousands of tiny requests a
second; streams paid ~40 us of event-loop machinery per request (a ``wait_for`` task, reader
futures, a semaphore, a writer hand-off, a ``drain``), this ~13 us (bench/broker_small_requests.py).
The idle timeout is one timer per connection, re-armed from the time of the last bytes received.

Bounds, all from the broker config:
- ``socket_request_bytes_max`` (Kafka ``socket.request.max.bytes``): a frame whose length prefix is
  negative or larger closes the connection with no answer, exactly as Kafka's NetworkReceive does.
  An HTTP ``GET `` reads as length 1195725856 and is caught here.
- ``connections_max``: further connections are accepted and closed at once.
- ``connections_max_idle_ms``: a connection with nothing in flight and no bytes for that long closes.

The handler is any object with ``async handle(frame: bytes) -> bytes | list | None``: ``bytes`` is
a response without its size prefix; a ``list`` is the chunks of ``wire.encode_response_chunks``
(size prefix included), handed to the transport in one ``writelines`` (one send for a small
response); None means no response (acks=0 produce). A handler that raises is a broken invariant:
the connection is closed and the error logged; the broker keeps serving everyone else. A handler
may also offer ``start(frame)`` (``Dispatcher.start``), called inline from ``data_received`` in
the connection's context when no earlier request of the connection still waits for its task to
begin (arrival order either way): one answered by a future (OffsetCommit's) needs no task.

The peer's address: each request task runs in its connection's ``contextvars`` context, where
``client_host()`` answers the peer's IP address (the group coordinator records it as a member's
``client_host``, as Kafka does), without widening the handler interface for the few APIs that
want it. ``connection_state()`` is likewise a per-connection dict for the few handlers that must
keep state across a connection's requests (``append_order``: Produce appends in request order).

The principal (issue 17): ``principal()`` is the calling connection's, as Kafka's
``KafkaPrincipal`` string, ``"User:ANONYMOUS"`` until authentication (SASL, a TLS client
certificate) calls ``set_principal``; the authorizer checks (principal, client_host()).

TLS and authentication (issue 17): a server may be given an ``ssl.SSLContext`` (the handshake
must finish within ``authentication_timeout_ms``, else the connection closes: slowloris), a
``principal_of(transport)`` that names a TLS client certificate's principal at connect time, and
``authentication_required``: then a connection whose ``connection_state()["authenticated"]`` is
not set within ``authentication_timeout_ms`` of connecting is closed (the SASL exchange,
``broker.server.authenticator``, sets it). ``connection_state()["listener"]`` names the listener
that accepted the connection (Metadata answers with that listener's endpoints). A handler that
raises ``AnswerAndClose(response)`` has that response written, then the connection closed
(Kafka's answer to a failed SASL authentication).

Shutdown (``close``): the listening socket closes, every connection stops reading, the requests
already read are answered (for at most ``drain_timeout_s``), then the connections close: a client
gets an answer to all it sent before that, or a closed connection, never a half-written response.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import struct
from dataclasses import dataclass
from typing import Protocol

__all__ = ["NetworkLimits", "RequestHandler", "KafkaServer", "CloseConnection", "client_host",
           "connection_state", "principal", "set_principal", "ANONYMOUS", "AnswerAndClose", "throttle_connection",
           "throttle_remaining_s"]

log = logging.getLogger("pylog.network")
_SIZE = struct.Struct(">i")
_CLIENT_HOST: contextvars.ContextVar[str] = contextvars.ContextVar("client_host", default="")
_CONNECTION_STATE: contextvars.ContextVar[dict | None] = contextvars.ContextVar("connection_state", default=None)


def client_host() -> str:
    """The IP address of the peer whose request is being handled ("" outside a connection)."""
    return _CLIENT_HOST.get()


def connection_state() -> dict:
    """A dict shared by every request of the calling connection (a fresh one, shared with
    nothing, outside a connection)."""
    state = _CONNECTION_STATE.get()
    return {} if state is None else state


ANONYMOUS = "User:ANONYMOUS"  # Kafka's KafkaPrincipal.ANONYMOUS: an unauthenticated connection
_PRINCIPAL_KEY = "principal"  # its slot in connection_state()


def principal() -> str:
    """The calling connection's principal, ``"<type>:<name>"`` (Kafka's KafkaPrincipal string);
    ``ANONYMOUS`` until ``set_principal`` (and outside a connection)."""
    state = _CONNECTION_STATE.get()
    return ANONYMOUS if state is None else state.get(_PRINCIPAL_KEY, ANONYMOUS)


def set_principal(name: str) -> None:
    """Authentication's result for the calling connection (``"User:alice"``): every later request
    of the connection runs as this principal. Outside a connection it does nothing."""
    assert ":" in name, f"a principal is '<type>:<name>', not {name!r}"
    state = _CONNECTION_STATE.get()
    if state is not None:
        state[_PRINCIPAL_KEY] = name


_MUTED_KEY = "muted_until"  # loop time until which the connection reads no request (quotas)


def throttle_connection(throttle_ms: int) -> None:
    """A quota was violated: the calling connection reads no further request for
    ``throttle_ms`` (Kafka mutes the channel after sending the throttled response)."""
    state = _CONNECTION_STATE.get()
    if state is not None:
        state[_MUTED_KEY] = asyncio.get_running_loop().time() + throttle_ms / 1000


def throttle_remaining_s() -> float:
    """How long the calling connection is still throttled (0 if not)."""
    state = _CONNECTION_STATE.get()
    until = None if state is None else state.get(_MUTED_KEY)
    return 0.0 if until is None else max(until - asyncio.get_running_loop().time(), 0.0)


class CloseConnection(Exception):
    """Raised by a handler to close the connection after the responses before this request,
    without answering it: Kafka's answer to an unparseable request, an unknown api key, and an
    acks=0 produce that failed (the only way to tell such a client). Logged as info, not as a
    bug."""


class AnswerAndClose(Exception):
    """Raised by a handler: write ``response`` (as a handler would return it), then close the
    connection (a failed SASL handshake or authentication, as Kafka answers them)."""

    def __init__(self, response, reason: str) -> None:
        super().__init__(reason)
        self.response = response


class RequestHandler(Protocol):
    """``handle(frame)``: the response (frame chunks) or None (no answer). A handler may also
    have ``start(frame)`` (``Dispatcher.start``): called inline where the request's start order
    allows (see ``_Connection._start``); it returns either an awaitable of the same answer or
    ``(future, finish)``: the response is ``finish(future.result())``, with no task of its own."""

    async def handle(self, frame: bytes) -> bytes | list | None: ...


@dataclass(frozen=True)
class NetworkLimits:
    socket_request_bytes_max: int = 100 * 1024 * 1024
    connections_max: int = 1000
    inflight_requests_max: int = 16
    connections_max_idle_ms: int = 600_000
    authentication_timeout_ms: int = 10_000  # TLS handshake and SASL exchange (slowloris)


_OFFSET_COMMIT = 8  # api key
LIGHT_REQUEST_BYTES_MAX = 4096  # a one-partition commit with up to offset.metadata.max.bytes (4096)
LIGHT_REQUESTS_PER_SLOT = 8


def _weight(frame_head: bytes, size: int) -> int:
    """A request's share of the in-flight bound, in 1/``LIGHT_REQUESTS_PER_SLOT`` of a request.
    The bound caps what one connection holds (frames, their work, unwritten answers: up to
    ``inflight_requests_max`` x ``socket.request.max.bytes``). An OffsetCommit of at most
    ``LIGHT_REQUEST_BYTES_MAX`` holds that frame and an answer no larger, so 8 hold less than
    one Produce may; as 1/8 each, a client's 100 pipelined commits are read in one pass and
    appended as one batch, not 16 at a time (docs/performance.md, issue 14)."""
    if size <= LIGHT_REQUEST_BYTES_MAX and frame_head[0] == 0 and frame_head[1] == _OFFSET_COMMIT:
        return 1
    return LIGHT_REQUESTS_PER_SLOT


@dataclass
class NetworkStatistics:
    connections: int = 0
    connections_peak: int = 0
    connections_refused: int = 0
    frames_rejected: int = 0
    requests: int = 0


class KafkaServer:
    """Owns the listening socket and every connection (structured: each request task belongs to
    its connection, which cancels and the server awaits what is left at ``close``)."""

    def __init__(self, handler: RequestHandler, host: str, port: int, limits: NetworkLimits, *,
                 listener_name: str = "PLAINTEXT", ssl_context=None, principal_of=None,
                 authentication_required: bool = False):
        self._handler = handler
        self._host = host
        self._port = port
        self._limits = limits
        self.listener_name = listener_name
        self._ssl = ssl_context
        self._principal_of = principal_of  # transport -> "User:..." | None (TLS client certificates)
        self._authentication_required = authentication_required
        self._server: asyncio.base_events.Server | None = None
        self._connections: set["_Connection"] = set()
        self.stats = NetworkStatistics()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self, start_serving: bool = True) -> None:
        """Bind the listening socket; accept connections now, or from ``start_serving()`` on
        (so a broker can learn its bound port before it is ready to answer)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self._host or None, self._port, reuse_address=True,
            start_serving=start_serving, ssl=self._ssl,
            ssl_handshake_timeout=self._limits.authentication_timeout_ms / 1000 if self._ssl else None,
        )

    async def start_serving(self) -> None:
        assert self._server is not None, "start() first"
        await self._server.start_serving()

    async def close(self, drain_timeout_s: float = 0.0) -> None:
        """Stop accepting, stop reading, answer what was read (up to ``drain_timeout_s``),
        then close every connection."""
        if self._server is not None:
            self._server.close()
        connections = list(self._connections)
        for connection in connections:
            connection.stop_reading()
        closed = [connection.closed for connection in connections]
        if closed and drain_timeout_s > 0:
            await asyncio.wait(closed, timeout=drain_timeout_s)
        for connection in connections:
            connection.abort()
        for connection in connections:
            await connection.wait_finished()
        if self._server is not None:
            await self._server.wait_closed()

    def statistics(self) -> NetworkStatistics:
        return NetworkStatistics(**vars(self.stats))

    def _register(self, connection: "_Connection") -> bool:
        if len(self._connections) >= self._limits.connections_max:
            self.stats.connections_refused += 1
            return False
        self._connections.add(connection)
        self.stats.connections = len(self._connections)
        self.stats.connections_peak = max(self.stats.connections_peak, self.stats.connections)
        return True

    def _unregister(self, connection: "_Connection") -> None:
        self._connections.discard(connection)
        self.stats.connections = len(self._connections)


_FAILED = object()  # a handler raised: the connection closes after the responses before it


class _Final:
    """A response after which the connection closes (``AnswerAndClose``)."""

    __slots__ = ("response",)

    def __init__(self, response) -> None:
        self.response = response


class _Request:
    """One request of a connection, from its frame to its response being written."""

    __slots__ = ("task", "response", "done", "weight")

    def __init__(self, weight: int) -> None:
        self.task: asyncio.Task | None = None
        self.response: object = None
        self.done = False
        self.weight = weight  # its share of the in-flight bound (``_weight``)


class _Connection(asyncio.Protocol):
    """One client connection: frames in, responses out in request order (see the module doc).

    ``_pending`` holds the requests in arrival order, at most ``inflight_requests_max`` of them
    by weight (``_held``; a request counts until its response is handed to the transport).
    ``closed`` resolves when the transport is gone."""

    def __init__(self, server: KafkaServer) -> None:
        self._server = server
        self._limits = server._limits
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._pending: collections.deque[_Request] = collections.deque()
        self._held = 0  # sum of the pending requests' weights
        self._bound = server._limits.inflight_requests_max * LIGHT_REQUESTS_PER_SLOT
        self._reading_paused = False  # by us, for back-pressure
        self._writing_paused = False  # by the transport, over its high-water mark
        self._stopped = False  # no more requests: answer the pending ones, then close
        self._closing = False
        self._peer = None
        self._context: contextvars.Context | None = None  # the request tasks' (client_host)
        self._idle_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self._mute_timer: asyncio.TimerHandle | None = None
        self._state: dict = {}
        self._last_received = 0.0
        self._output: list = []  # responses finished in this event-loop iteration, in order
        self._flush_handle: asyncio.Handle | None = None
        self._start = getattr(server._handler, "start", None)
        self._unstarted = 0  # request tasks created whose handler has not started yet
        self.closed = self._loop.create_future()

    # ------------------------------------------------------------------ transport events

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        if not self._server._register(self):
            self._closing = True
            transport.close()
            return
        self._peer = transport.get_extra_info("peername")
        self._context = contextvars.copy_context()
        if self._peer:
            self._context.run(_CLIENT_HOST.set, str(self._peer[0]))
        state = {"listener": self._server.listener_name}
        if self._server._principal_of is not None:
            name = self._server._principal_of(transport)
            if name is not None:
                state["principal"] = name
        self._context.run(_CONNECTION_STATE.set, state)
        self._state = state
        self._last_received = self._loop.time()
        self._arm_idle_timer(self._limits.connections_max_idle_ms / 1000)
        if self._server._authentication_required:
            self._auth_timer = self._loop.call_later(self._limits.authentication_timeout_ms / 1000,
                                                     self._check_authenticated)

    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return
        self._last_received = self._loop.time()
        buffer = self._buffer
        buffer += data
        self._take_frames()

    def eof_received(self) -> bool:
        self.stop_reading()  # answer what was read, then close (the peer may only half-close)
        return True

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._write_finished()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for timer in (self._idle_timer, self._auth_timer, self._mute_timer):
            if timer is not None:
                timer.cancel()
        self._cancel_pending()
        if self._transport is not None and self in self._server._connections:
            self._server._unregister(self)
        if not self.closed.done():
            self.closed.set_result(None)

    # -------------------------------------------------------------------------- requests

    def _take_frames(self) -> None:
        """Start a task for every whole frame in the buffer, up to the in-flight bound."""
        if _MUTED_KEY in self._state and self._muted():
            return
        buffer, limits = self._buffer, self._limits
        position, end = 0, len(buffer)
        while end - position >= 4 and self._held < self._bound:
            (size,) = _SIZE.unpack_from(buffer, position)
            if size < 0 or size > limits.socket_request_bytes_max:
                self._server.stats.frames_rejected += 1
                log.warning("closing %s: frame length %d outside [0, %d] (socket.request.max.bytes)",
                            self._peer, size, limits.socket_request_bytes_max)
                del buffer[:]
                self.stop_reading()
                return
            if end - position - 4 < size:
                break
            with memoryview(buffer) as view:  # one copy (slicing the bytearray would make two)
                frame = bytes(view[position + 4 : position + 4 + size])
            position += 4 + size
            self._server.stats.requests += 1
            request = _Request(_weight(frame, size) if size >= 2 else LIGHT_REQUESTS_PER_SLOT)
            self._held += request.weight
            self._pending.append(request)
            if self._start is None or self._unstarted:
                self._unstarted += 1  # a later request may start inline only after this one did
                request.task = self._loop.create_task(self._serve(request, frame), context=self._context)
            else:
                self._start_inline(request, frame)
        if position:
            del buffer[:position]
        if self._held >= self._bound:
            if not self._reading_paused:
                self._reading_paused = True
                self._transport.pause_reading()
        elif self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()

    def _muted(self) -> bool:
        """Throttled by a quota: stop reading until the throttle ends, then take frames again."""
        delay = self._state[_MUTED_KEY] - self._loop.time()
        if delay <= 0:
            del self._state[_MUTED_KEY]
            return False
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()
        if self._mute_timer is None:
            self._mute_timer = self._loop.call_later(delay, self._unmute)
        return True

    def _unmute(self) -> None:
        self._mute_timer = None
        if not self._closing and not self._stopped:
            self._take_frames()

    async def _serve(self, request: "_Request", frame: bytes | None, answer=None) -> None:
        """Await one request's handler: ``handle(frame)``, called here, in the task's first step
        (a ``handle`` may read connection state an earlier request sets: SASL's phase), or what
        ``start`` returned. If it is the oldest one pending, write its response (and any
        finished after it) from here, not from a done-callback one loop iteration later."""
        self._unstarted -= 1
        try:
            request.response = await (self._server._handler.handle(frame) if answer is None else answer)
        except BaseException as exc:  # noqa: BLE001 - cancellation is re-raised by _failed
            request.response = self._failed(exc)
        self._finished(request)

    def _start_inline(self, request: "_Request", frame: bytes) -> None:
        """Start a request's handler now, in the connection's context, with no task of its own
        when it answers with a future (OffsetCommit's: a task per request was the largest share
        of the broker's CPU per pipelined commit, issue 14). Once one is left to a task, the ones
        after it wait for a task too (``_unstarted``): an inline start never overtakes one."""
        try:
            if _CONNECTION_STATE.get(None) is self._state:  # in the context (a task, a callback)
                answer = self._start(frame)
            else:
                answer = self._context.run(self._start, frame)
        except BaseException as exc:  # noqa: BLE001 - cancellation is re-raised by _failed
            request.response = self._failed(exc)
            request.task = self._loop.create_future()  # something for the connection's waits
            request.task.set_result(None)
            self._loop.call_soon(self._finished, request)  # not from inside _take_frames' loop
            return
        if type(answer) is tuple:
            future, finish = answer
            request.task = future  # cancelled with the connection, as a task would cancel it
            future.add_done_callback(lambda done: self._resolved(request, finish, done),
                                     context=self._context)
        else:
            self._unstarted += 1
            request.task = self._loop.create_task(self._serve(request, None, answer), context=self._context)

    def _resolved(self, request: "_Request", finish, future: asyncio.Future) -> None:
        if future.cancelled():
            return  # the connection is gone (connection_lost, abort, close)
        try:
            request.response = finish(future.result())
        except BaseException as exc:  # noqa: BLE001 - cancellation is re-raised by _failed
            request.response = self._failed(exc)
        self._finished(request)

    def _failed(self, exc: BaseException):
        """What a handler's exception makes of its response slot (see the module doc)."""
        if isinstance(exc, CloseConnection):
            log.info("closing %s: %s", self._peer, exc)
            return _FAILED
        if isinstance(exc, AnswerAndClose):
            log.info("closing %s after answering: %s", self._peer, exc)
            return _Final(exc.response)
        if not isinstance(exc, Exception):
            raise exc
        log.error("handler failed for a request from %s; closing the connection", self._peer,
                  exc_info=exc)
        return _FAILED

    def _finished(self, request: "_Request") -> None:
        request.done = True
        if self._pending and self._pending[0] is request:
            self._write_finished()

    def _write_finished(self) -> None:
        """Hand the responses of the finished requests at the head of the queue, in order, to
        the connection's output: written at the end of this event-loop iteration (see
        ``_flush_output``)."""
        pending, output = self._pending, self._output
        while pending and not self._writing_paused and not self._closing and pending[0].done:
            request = pending.popleft()
            self._held -= request.weight
            response = request.response
            if response is _FAILED:
                self._close_after_written()
                return
            if type(response) is _Final:
                response = response.response
                if isinstance(response, list):
                    output.extend(response)
                elif response is not None:
                    output.append(_SIZE.pack(len(response)))
                    output.append(response)
                self._close_after_written()
                return
            if response is None:
                continue
            if type(response) is list:
                output.extend(response)
            else:
                output.append(_SIZE.pack(len(response)))
                output.append(response)
        if output:
            if not pending:  # nothing else in flight: no later answer to wait for
                self._flush_output()
            elif self._flush_handle is None:
                self._flush_handle = self._loop.call_soon(self._flush_output)
        if self._closing:
            return
        if self._stopped:
            if not pending:
                self._close_after_written()
        elif self._buffer or self._reading_paused:
            self._take_frames()  # frames read before the pause, or room to read again

    # --------------------------------------------------------------------- closing, idle

    def stop_reading(self) -> None:
        """Read no further requests; the ones already read are still answered, then the
        connection closes."""
        if self._stopped or self._closing:
            return
        self._stopped = True
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()
        if not self._pending:
            self._close_after_written()

    def _flush_output(self) -> None:
        """Write the responses handed over since the last write with one ``writelines`` (one
        ``send``): the answers finished in one loop iteration share the system call and the
        reader's wakeup (a send per answer was ~1/4 of the broker's CPU per OffsetCommit, issue
        14); a connection whose last request was answered is written at once (no added latency)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        output = self._output
        if output and self._transport is not None and not self._transport.is_closing():
            self._output = []
            self._transport.writelines(output)

    def _close_after_written(self) -> None:
        """Close once the transport has sent what it holds; drop the requests still queued."""
        self._flush_output()  # what was answered before the close goes first
        self._closing = True
        self._cancel_pending()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Shutdown after the drain time: drop everything now."""
        self._closing = True
        self._cancel_pending()
        if self._transport is not None:
            self._transport.abort()

    def _cancel_pending(self) -> None:
        for request in self._pending:
            if request.task is not None:
                request.task.cancel()

    async def wait_finished(self) -> None:
        """Until the transport is gone and every request task has ended."""
        await self.closed
        if self._pending:
            await asyncio.gather(*(r.task for r in self._pending if r.task is not None), return_exceptions=True)

    def _check_authenticated(self) -> None:
        """``authentication_timeout_ms`` after connecting: a connection that has not finished
        authenticating is closed (a slowloris holds a slot and a task otherwise)."""
        self._auth_timer = None
        if not self._closing and not self._state.get("authenticated"):
            log.info("closing %s: not authenticated within %d ms", self._peer,
                     self._limits.authentication_timeout_ms)
            self._close_after_written()

    def _arm_idle_timer(self, delay_s: float) -> None:
        self._idle_timer = self._loop.call_later(delay_s, self._check_idle)

    def _check_idle(self) -> None:
        """``connections_max_idle_ms``: close a connection with nothing in flight that received
        nothing for that long; otherwise look again when it could next be idle that long."""
        if self._closing:
            return
        idle_s = self._limits.connections_max_idle_ms / 1000
        quiet_s = self._loop.time() - self._last_received
        if quiet_s >= idle_s and not self._pending:
            log.debug("closing %s: idle for %.0f s", self._peer, quiet_s)
            self._close_after_written()
            return
        self._arm_idle_timer(max(idle_s - quiet_s, 0.001) if quiet_s < idle_s else idle_s)
