"""The metrics HTTP server as a child process of the broker: scrapes never touch the broker.

Served on the broker's event loop, each scrape still cost the broker ~0.2 ms of CPU (accept,
transport, parse, write); a storm of a hundred scrapers a second on a loaded machine then showed
in produce p99 (bench/observability.py). Here the broker only writes the rendered bytes to files
in ``--dir`` (``metrics``, ``status.json``; replaced atomically at every refresh) and this
process, with its own interpreter and GIL, answers every request from them
(``MetricsHttpServer``: GET/HEAD only, 404 elsewhere).

Protocol with the parent: after binding, one line ``LISTENING <port>`` on stdout (or the process
exits non-zero with the error on stderr); it exits by itself once its parent is gone (checked
every ``PARENT_CHECK_S``), so a SIGKILLed broker leaves nothing behind.

    python -m broker.metrics.http_process --host H --port P --dir D --parent-pid PID
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from broker.metrics.http import MetricsHttpServer, Page
from broker.metrics.status_page import STATUS_PAGE

__all__ = ["FILES", "main"]

PARENT_CHECK_S = 0.5
# Added to this process's nice value at start: on a machine short of CPU, a scrape storm's
# answers wait for the broker's request path, never the other way round (issue 19: a storm of
# 100 scrapers must keep produce p99 within 10 %). Idle cores still serve scrapes at once.
HTTP_NICE_INCREMENT = 10
FILES = {"/metrics": ("metrics", "text/plain; version=0.0.4; charset=utf-8"),
         "/status.json": ("status.json", "application/json")}
_HTML = ("text/html; charset=utf-8", STATUS_PAGE.encode())


class FileRoutes:
    """Routes answered from the files the broker writes; a file is read again only when it was
    replaced (its inode and mtime change with every ``os.replace``)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._cache: dict[str, tuple[tuple, bytes]] = {}

    def __call__(self, path: str) -> Page | None:
        if path in ("/", "/index.html"):
            return _HTML
        entry = FILES.get(path)
        if entry is None:
            return None
        name, content_type = entry
        file = self._directory / name
        try:
            stat = file.stat()
            key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            cached = self._cache.get(name)
            if cached is None or cached[0] != key:
                cached = self._cache[name] = (key, file.read_bytes())
        except OSError:
            cached = self._cache.get(name, ((), b""))
        return content_type, cached[1]


async def _serve(host: str, port: int, directory: Path, parent_pid: int) -> None:
    server = MetricsHttpServer(host, port, FileRoutes(directory))
    await server.start()
    print(f"LISTENING {server.port}", flush=True)
    try:
        while os.getppid() == parent_pid:
            await asyncio.sleep(PARENT_CHECK_S)
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker.metrics.http_process")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        os.nice(HTTP_NICE_INCREMENT)
    except OSError:  # not allowed here: serve at the broker's priority
        pass
    try:
        asyncio.run(_serve(args.host, args.port, args.dir, args.parent_pid))
    except OSError as exc:
        print(f"metrics.port {args.port}: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
