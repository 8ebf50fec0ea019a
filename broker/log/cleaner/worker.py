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
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import recvfds, sendfds
from pathlib import Path
from typing import NamedTuple

__all__ = ["CleanedFiles", "CleanerWorker", "CleanerWorkerError", "PassRequest", "WORKER_NICENESS"]

logger = logging.getLogger(__name__)

# Added to the worker's nice value (19: the lowest priority): the broker's network loop and request
# handling come first on a busy machine; on an idle one the cleaner still gets all the CPU it wants.
# Measured against 0 and 10 in docs/performance.md. The price: on a CPU saturated for long,
# compaction falls behind (CFS still gives a nice-19 task about 1.5% of a contended core).
WORKER_NICENESS = 19
_FDS_PER_MESSAGE = 200  # under the kernel's SCM_MAX_FD (253) file descriptors per message
_EXIT_WAIT_S = 5  # for an idle worker to see its socket closed and exit
_REPO_ROOT = Path(__file__).resolve().parents[3]


class CleanerWorkerError(RuntimeError):
    """The worker process died or broke the protocol during a pass."""


class PassRequest(NamedTuple):
    """What the worker needs of a pass (picklable); ``segments`` are the pass's segments in
    order, ``files`` their (base offset, path, size) in the same order as the descriptors sent."""

    directory: Path
    config: object  # LogConfig
    settings: object  # CleanerSettings
    first_dirty_offset: int
    first_uncleanable_offset: int
    summaries: list  # plan.SegmentSummary of the pass's segments
    files: list[tuple[int, Path, int]]
    now_ms: int
    producer_last_offsets: Mapping[int, int]
    aborted: Sequence


class CleanedFiles(NamedTuple):
    """A cleaned segment the worker wrote (flushed, closed), as ``swap_in`` handles it."""

    base_offset: int
    file_paths: tuple[Path, Path, Path]
    size: int

    def flush(self) -> None:
        """The worker flushed it before saying it was done."""

    def close(self) -> None:
        """Nothing is open in this process."""

    def delete(self) -> None:
        for path in self.file_paths:
            path.unlink(missing_ok=True)


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
                [sys.executable, "-m", "broker.log.cleaner.worker", str(theirs.fileno())],
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
                    _discard_cleaned(request.directory, group[0].base_offset)

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


def _discard_cleaned(directory: Path, base_offset: int) -> None:
    from broker.log.cleaner.segment_cleaner import CLEANED_FILE_SUFFIX
    from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name

    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # the log first, as LogSegment.delete
        (directory / (segment_file_name(base_offset) + suffix + CLEANED_FILE_SUFFIX)).unlink(missing_ok=True)


# -------------------------------------------------------------------------------- the worker side

def _serve_pass(request: PassRequest, fds: list[int], conn: Connection) -> None:
    from broker.log.cleaner.cleaning_pass import group_bases, plan_groups
    from broker.log.cleaner.offset_map import capacity_for
    from broker.log.cleaner.retention import RetentionPass
    from broker.log.cleaner.segment_cleaner import SegmentFile, Throttler, build_offset_map, clean_group

    settings, config = request.settings, request.config
    files = {base: SegmentFile.from_fd(base, path, size, fd) for (base, path, size), fd in zip(request.files, fds)}
    throttler = Throttler(settings.io_max_bytes_per_second)
    first_dirty, first_uncleanable = request.first_dirty_offset, request.first_uncleanable_offset
    dirty = [files[s.base_offset] for s in request.summaries
             if s.next_offset > first_dirty and s.base_offset < first_uncleanable]
    offset_map = build_offset_map(
        dirty, first_dirty=first_dirty, first_uncleanable=first_uncleanable,
        capacity=capacity_for(settings.dedupe_buffer_bytes), keys=settings.hash_keys, aborted=request.aborted,
        limits=settings.limits, chunk_bytes=settings.io_buffer_bytes, throttler=throttler)
    groups = group_bases(plan_groups(request.summaries, offset_map.end_offset, config))
    conn.send(("mapped", (offset_map.end_offset, groups)))
    retention = RetentionPass(offset_map, now_ms=request.now_ms, delete_retention_ms=config.delete_retention_ms,
                              producer_last_offsets=request.producer_last_offsets, aborted=request.aborted)
    for group in groups:
        if conn.recv() != "clean":
            return
        cleaned = clean_group([files[base] for base in group], retention, directory=request.directory,
                              config=config, now_ms=lambda: request.now_ms, keys=settings.hash_keys,
                              limits=settings.limits, chunk_bytes=settings.io_buffer_bytes, throttler=throttler)
        if cleaned is None:
            conn.send(("group", None))
            continue
        result = CleanedFiles(cleaned.base_offset, cleaned.file_paths, cleaned.size)
        cleaned.close()
        conn.send(("group", result))


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


if __name__ == "__main__":  # run as the module itself, so what it pickles names broker.log.cleaner.worker
    from broker.log.cleaner.worker import main as _main

    _main(int(sys.argv[1]))
