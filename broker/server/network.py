"""The asyncio network layer: accept, frame, dispatch, and answer in request order.

Kafka's contract for one TCP connection is strict FIFO: responses leave in the order requests
arrived, whatever order they finish in (a long-poll Fetch may finish after a later Metadata).
Each connection therefore reads frames, starts one task per request (up to
``inflight_requests_max``; reading pauses while that many are pending, which is the per-connection
back-pressure), and a single writer awaits those tasks in arrival order.

Bounds, all from the broker config:
- ``socket_request_bytes_max`` (Kafka ``socket.request.max.bytes``): a frame whose length prefix is
  negative or larger closes the connection with no answer, exactly as Kafka's NetworkReceive does.
  An HTTP ``GET `` reads as length 1195725856 and is caught here.
- ``connections_max``: further connections are accepted and closed at once.
- ``connections_max_idle_ms``: a connection with nothing in flight and no bytes for that long closes.

The handler is any object with ``async handle(frame: bytes) -> bytes | list | None``: ``bytes`` is
a response without its size prefix; a ``list`` is the chunks of ``wire.encode_response_chunks``
(size prefix included), written with ``writelines`` so fetched records reach the socket without
being copied into one buffer; None means no response (acks=0 produce). A handler that raises is
a broken invariant: the connection is closed and the error logged; the broker keeps serving
everyone else.

Shutdown (``close``): the listening socket closes, every connection stops reading new requests,
the requests already read are answered (for at most ``drain_timeout_s``), then the connections
close. A client therefore gets an answer to everything it sent before the broker stopped
reading, or a closed connection it will retry on, never a half-written response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from dataclasses import dataclass
from typing import Protocol

__all__ = ["NetworkLimits", "RequestHandler", "KafkaServer", "CloseConnection"]

log = logging.getLogger("pylog.network")
_SIZE = struct.Struct(">i")


class CloseConnection(Exception):
    """Raised by a handler to close the connection after the responses before this request,
    without answering it: Kafka's answer to an unparseable request, an unknown api key, and an
    acks=0 produce that failed (the only way to tell such a client). Logged as info, not as a
    bug."""


class RequestHandler(Protocol):
    async def handle(self, frame: bytes) -> bytes | list | None: ...


@dataclass(frozen=True)
class NetworkLimits:
    socket_request_bytes_max: int = 100 * 1024 * 1024
    connections_max: int = 1000
    inflight_requests_max: int = 16
    connections_max_idle_ms: int = 600_000


@dataclass
class NetworkStatistics:
    connections: int = 0
    connections_peak: int = 0
    connections_refused: int = 0
    frames_rejected: int = 0
    requests: int = 0


class KafkaServer:
    """Owns the listening socket and every connection task (structured: nothing fire-and-forget)."""

    def __init__(self, handler: RequestHandler, host: str, port: int, limits: NetworkLimits):
        self._handler = handler
        self._host = host
        self._port = port
        self._limits = limits
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, "_Connection"] = {}
        self.stats = NetworkStatistics()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self, start_serving: bool = True) -> None:
        """Bind the listening socket; accept connections now, or from ``start_serving()`` on
        (so a broker can learn its bound port before it is ready to answer)."""
        self._server = await asyncio.start_server(
            self._on_connect, self._host or None, self._port, reuse_address=True, limit=64 * 1024,
            start_serving=start_serving,
        )

    async def start_serving(self) -> None:
        assert self._server is not None, "start() first"
        await self._server.start_serving()

    async def close(self, drain_timeout_s: float = 0.0) -> None:
        """Stop accepting, stop reading, answer what was read (up to ``drain_timeout_s``),
        then close every connection."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections.values()):
            connection.stop_reading()
        tasks = list(self._connections)
        if tasks and drain_timeout_s > 0:
            await asyncio.wait(tasks, timeout=drain_timeout_s)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def statistics(self) -> NetworkStatistics:
        return NetworkStatistics(**vars(self.stats))

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._connections) >= self._limits.connections_max:
            self.stats.connections_refused += 1
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        connection = _Connection(self, reader, writer)
        self._connections[task] = connection
        self.stats.connections = len(self._connections)
        self.stats.connections_peak = max(self.stats.connections_peak, self.stats.connections)
        try:
            await connection.run()
        except asyncio.CancelledError:
            # Only close() cancels connection tasks, and it awaits them; the stream machinery that
            # started this task has no one to report to.
            pass
        finally:
            self._connections.pop(task, None)
            self.stats.connections = len(self._connections)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


_FAILED = object()  # a handler raised: the connection closes after the responses before it


class _Connection:
    def __init__(self, server: KafkaServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._server = server
        self._reader = reader
        self._writer = writer
        limits = server._limits
        # A slot is taken before a request's task starts and given back once its response is
        # written, so at most inflight_requests_max requests of this connection exist at once.
        self._slots = asyncio.Semaphore(limits.inflight_requests_max)
        self._pending: asyncio.Queue[asyncio.Task | None] = asyncio.Queue(limits.inflight_requests_max + 1)
        self._peer = writer.get_extra_info("peername")
        self._reading: asyncio.Task | None = None
        self._stopped = False

    def stop_reading(self) -> None:
        """Read no further requests; the ones already read are still answered."""
        self._stopped = True
        if self._reading is not None:
            self._reading.cancel()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            reading = self._reading = group.create_task(self._read_requests(group))
            if self._stopped:
                reading.cancel()
            writing = group.create_task(self._write_responses())
            done, _ = await asyncio.wait({reading, writing}, return_when=asyncio.FIRST_COMPLETED)
            if writing in done:
                # The peer is gone or a handler failed: stop reading, drop what is in flight.
                reading.cancel()
                while not self._pending.empty():
                    task = self._pending.get_nowait()
                    if task is not None:
                        task.cancel()
            else:
                await self._pending.put(None)  # no more requests: the writer ends after the last

    async def _read_requests(self, group: asyncio.TaskGroup) -> None:
        limits = self._server._limits
        idle_s = limits.connections_max_idle_ms / 1000
        while True:
            try:
                prefix = await asyncio.wait_for(self._reader.readexactly(4), idle_s)
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError):
                return
            (size,) = _SIZE.unpack(prefix)
            if size < 0 or size > limits.socket_request_bytes_max:
                self._server.stats.frames_rejected += 1
                log.warning("closing %s: frame length %d outside [0, %d] (socket.request.max.bytes)",
                            self._peer, size, limits.socket_request_bytes_max)
                return
            try:
                frame = await self._reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            self._server.stats.requests += 1
            await self._slots.acquire()  # blocks while the connection is full: reading pauses
            self._pending.put_nowait(group.create_task(self._guarded(frame)))

    async def _guarded(self, frame: bytes) -> object:
        try:
            return await self._server._handler.handle(frame)
        except CloseConnection as close:
            log.info("closing %s: %s", self._peer, close)
            return _FAILED
        except Exception:
            log.exception("handler failed for a request from %s; closing the connection", self._peer)
            return _FAILED

    async def _write_responses(self) -> None:
        while (task := await self._pending.get()) is not None:
            response = await task
            self._slots.release()
            if response is _FAILED:
                return
            if response is None:
                continue
            if isinstance(response, list):
                self._writer.writelines(response)
            else:
                self._writer.write(_SIZE.pack(len(response)) + response)
            try:
                await self._writer.drain()
            except ConnectionError:
                return
