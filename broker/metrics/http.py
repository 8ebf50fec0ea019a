"""A minimal read-only asyncio HTTP/1.1 server for /metrics and the status page; it runs in the
metrics child process (``broker.metrics.http_process``), never in the broker.

Why not prometheus_client's ``start_http_server``: it renders the exposition on every scrape on
a thread of the broker, so a storm of scrapers would take the GIL from the request path for as
long as they keep asking. Here every response body was rendered before the request came
(``routes`` returns bytes the broker refreshed at its own pace), and the serving is in another
process.

A burst of scrapes (a hundred scrapers on the same period arrive together) is paced: at most
``ANSWERING_MAX`` responses are written at a time (the others wait on a semaphore) and the accept
backlog is ``ACCEPT_BACKLOG`` (asyncio accepts up to that many connections per callback; the
kernel holds the rest), which bounds the serving process's bursts of CPU on a shared machine.

Only GET and HEAD exist (405 otherwise, with ``Allow``); unknown paths are 404; the query string
is ignored; request heads are limited to ``HEAD_BYTES_MAX`` and must arrive within
``HEAD_TIMEOUT_S``; at most ``CONNECTIONS_MAX`` connections are served at once (the rest are
closed unanswered); every response closes its connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

__all__ = ["MetricsHttpServer", "Page"]

logger = logging.getLogger(__name__)

HEAD_BYTES_MAX = 8 * 1024
HEAD_TIMEOUT_S = 5.0
CONNECTIONS_MAX = 512
ANSWERING_MAX = 2
ACCEPT_BACKLOG = 16
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}

# (content type, body); a route returns None for "not found"
Page = tuple[str, bytes]


class MetricsHttpServer:
    def __init__(self, host: str, port: int, routes: Callable[[str], Page | None]) -> None:
        self._host = host
        self._port = port
        self._routes = routes
        self._server: asyncio.Server | None = None
        self._open = 0
        self._answering: asyncio.Semaphore | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self._answering = asyncio.Semaphore(ANSWERING_MAX)
        self._server = await asyncio.start_server(self._serve, self._host, self._port, limit=HEAD_BYTES_MAX,
                                                  reuse_address=True, backlog=ACCEPT_BACKLOG)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open += 1
        try:
            if self._open <= CONNECTIONS_MAX:
                await self._answer(reader, writer)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError, ValueError):
            pass
        finally:
            self._open -= 1
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            return await self._send(writer, 400, "text/plain", b"request head too large\n")
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return await self._send(writer, 400, "text/plain", b"bad request line\n")
        method, target = parts[0], parts[1].decode("latin-1").split("?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            return await self._send(writer, 405, "text/plain", b"read-only: GET and HEAD only\n",
                                    extra=b"Allow: GET, HEAD\r\n")
        page = self._routes(target)
        if page is None:
            return await self._send(writer, 404, "text/plain", b"not found\n", head_only=method == b"HEAD")
        await self._send(writer, 200, page[0], page[1], head_only=method == b"HEAD")

    async def _send(self, writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes,
                    head_only: bool = False, extra: bytes = b"") -> None:
        """The write, ``ANSWERING_MAX`` at a time (reading a request head takes no slot, so an
        idle client cannot hold one); a reader that does not take the bytes within
        ``HEAD_TIMEOUT_S`` is dropped."""
        header = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                  f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                  "X-Content-Type-Options: nosniff\r\nConnection: close\r\n").encode() + extra + b"\r\n"
        async with self._answering:
            writer.write(header if head_only else header + body)
            await asyncio.wait_for(writer.drain(), HEAD_TIMEOUT_S)
