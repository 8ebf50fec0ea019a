"""The cleaner's work in a process of its own: the broker keeps only the plan and the swap.

Why a process. On two cores the producer's, the broker's and the cleaner's work share the CPU;
with the cleaner as a broker thread, produce to other partitions ran at 0.29-0.31x of its rate
without the cleaner (``docs/performance.md``). At equal priority a process measured no better
than the thread (the kernels already release the GIL); what a process buys is that the cleaner
can be made background work. A thread cannot be, safely: a starved low-priority thread holding
the GIL stalls the event loop behind it, and yielding more often only adds GIL hand-overs (each a
wait of up to the 5 ms switch interval for the loop). So the worker lowers its own priority
(``WORKER_NICENESS``): the broker's requests come first, the cleaner takes what is left
(``log.cleaner.io.max.bytes.per.second`` still caps its I/O).

Why here and not in ``broker/log/cleaner``: processes, sockets and descriptor passing are the
server's business (``docs/architecture.md``); this module is only that. What the worker does
with a pass's plan and files (build the map, write the cleaned groups) is
``broker.log.cleaner.worker_pass``, which knows nothing of the process it runs in.

Who does what (``broker/server/log_cleaner.py`` drives it, one worker per cleaner thread):

- the broker plans the pass (``begin_pass``: the log's thread), opens the segment files and sends
  the plan (``PassRequest``) and the file descriptors (SCM_RIGHTS over a Unix socket): the worker
  reads the very files the plan names, even if the log deletes or replaces them meanwhile;
- the worker builds the offset map and answers where it ends and how the segments group; then,
  for each group the broker asks for, writes ``<base>.log.cleaned`` (+ indexes), flushed, and
  says so; it never touches the log's other files;
- the broker swaps each cleaned group in (``swap.py``, crash-safe, under the log's event loop)
  before it asks for the next, so at most one cleaned group is on disk beside the log, as when
  the pass ran on a thread.

Errors in the worker come back as the exception itself (pickled) and are raised in the broker,
which marks the log uncleanable as before. A worker that dies (killed, out of memory) fails its
pass with ``CleanerWorkerError``; the next pass starts a new worker. The worker exits when the
broker closes its socket (or dies).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.reduction import recvfds, sendfds
from pathlib import Path

from broker.log.cleaner.worker_pass import PassRequest, discard_cleaned, map_pass

__all__ = ["CleanerWorker", "CleanerWorkerError", "WORKER_NICENESS"]

logger = logging.getLogger(__name__)

# Added to the worker's nice value (19: the lowest priority): the broker's network loop and request
# handling come first on a busy machine; on an idle one the cleaner still gets all the CPU it wants.
# Measured against 0 and 10 in docs/performance.md. The price: on a CPU saturated for long,
# compaction falls behind (CFS still gives a nice-19 task about 1.5% of a contended core).
WORKER_NICENESS = 19
WORKER_MODULE = "broker.server.cleaner_worker"  # run as ``python -m``; see the end of this file
_FDS_PER_MESSAGE = 200  # under the kernel's SCM_MAX_FD (253) file descriptors per message
_EXIT_WAIT_S = 5  # for an idle worker to see its socket closed and exit
_REPO_ROOT = Path(__file__).resolve().parents[2]


class CleanerWorkerError(RuntimeError):
    """The worker process died or broke the protocol during a pass."""


class CleanerWorker:
    """The broker's end of one worker process, started on first use."""

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH")) if p)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env, cwd=str(_REPO_ROOT))
        finally:
            theirs.close()
        self._sock = ours
        self._conn = Connection(os.dup(ours.fileno()))

    def close(self, kill: bool = False) -> None:
        """Stop the worker: an idle one exits when its socket closes; ``kill`` for one that may
        be mid-pass (its work is worth nothing once the broker stopped listening)."""
        conn, sock, process = self._conn, self._sock, self._process
        self._conn = self._sock = self._process = None
        if kill and process is not None:  # first: a thread blocked reading its socket sees it end
            process.kill()
        for end in (conn, sock):
            if end is not None:
                end.close()
        if process is not None:
            try:
                process.wait(timeout=_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    async def run_pass(self, cleaning) -> None:
        """Run ``cleaning`` (a ``CleaningPass`` from ``begin_pass``) in the worker: the map and
        the cleaned groups there, each swap here (on the calling event loop) as it comes."""
        if self._process is None or self._process.poll() is not None:
            self.close()
            self._start()
        done = False
        group: list = []
        try:
            request, fds = cleaning.request()
            self._send(request)
            for i in range(0, len(fds), _FDS_PER_MESSAGE):
                sendfds(self._sock, fds[i:i + _FDS_PER_MESSAGE])
            end_offset, group_bases = await self._receive()
            cleaning.adopt_map(end_offset, group_bases)
            for group in cleaning.groups:
                self._send("clean")
                cleaned = await self._receive()
                cleaning.swap(group, cleaned)
            done = True
        finally:
            if not done:  # an error here or there, or cancelled: the worker may be mid-pass
                self.close(kill=True)
                if group:  # what a killed worker left of the group it was writing
                    discard_cleaned(request.directory, group[0].base_offset)

    def _send(self, message) -> None:
        try:
            self._conn.send(message)
        except OSError as exc:
            raise CleanerWorkerError(f"cleaner process gone: {exc}") from exc

    async def _receive(self):
        try:
            kind, value = await asyncio.to_thread(self._conn.recv)
        except (EOFError, OSError) as exc:
            code = self._process.poll() if self._process is not None else None
            raise CleanerWorkerError(f"cleaner process died (exit code {code})") from exc
        if kind == "error":
            raise value
        return value


# -------------------------------------------------------------------------------- the worker side

def _serve_pass(request: PassRequest, fds: list[int], conn: Connection) -> None:
    """The protocol of one pass: the map's answer, then one group per "clean" the broker sends."""
    work = map_pass(request, fds)
    conn.send(("mapped", (work.end_offset, work.group_bases)))
    for bases in work.group_bases:
        if conn.recv() != "clean":
            return
        conn.send(("group", work.clean(bases)))


def _send_error(conn: Connection, exc: BaseException) -> None:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # an exception that does not survive pickling goes as its text
        exc = CleanerWorkerError(f"{type(exc).__name__}: {exc}")
    conn.send(("error", exc))


def main(fd: int) -> None:
    os.nice(WORKER_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C on a foreground broker: it closes the socket
    conn = Connection(fd)
    sock = socket.socket(fileno=os.dup(fd))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        fds: list[int] = []
        try:
            while len(fds) < len(request.files):
                fds += recvfds(sock, min(_FDS_PER_MESSAGE, len(request.files) - len(fds)))
            started = time.monotonic()
            _serve_pass(request, fds, conn)
            logger.debug("pass over %s took %.1f s", request.directory, time.monotonic() - started)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            return
        except BaseException as exc:  # the broker decides what a failed pass means
            _send_error(conn, exc)
        finally:
            for descriptor in fds:
                os.close(descriptor)


if __name__ == "__main__":  # run as the module itself, so what it pickles names broker.server.cleaner_worker
    from broker.server.cleaner_worker import main as _main

    _main(int(sys.argv[1]))
