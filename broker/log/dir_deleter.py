"""Removes renamed ``<topic>-<partition>.<id>-delete`` log directories off the event loop.

Removing a 1 GiB partition directory inline stalled a broker's event loop for ~0.24 s (more on
slow disks), delaying every client. Like Kafka, the log manager instead renames the directory
at once (cheap and atomic: the partition name is free again for a re-created log) and hands the
renamed path here; one worker thread removes it ``file.delete.delay.ms`` later (Kafka's
``log.segment.delete.delay.ms``, default 60000, gives readers with open handles time to finish).
A directory not yet removed when the broker stops keeps its ``-delete`` name and is scheduled
again at the next start.
"""

from __future__ import annotations

import heapq
import logging
import shutil
import threading
from pathlib import Path
from typing import Callable

__all__ = ["DirDeleter"]

logger = logging.getLogger(__name__)

STOP_JOIN_TIMEOUT_S = 5.0  # how long close waits for a removal in progress
# The clock is the log manager's injected ``now_ms`` (a test's clock may jump), so the worker
# looks again at least this often while something waits, instead of trusting one long sleep.
DUE_CHECK_INTERVAL_MS = 100


class DirDeleter:
    """A single daemon thread removing scheduled directories once their delay has passed."""

    def __init__(self, now_ms: Callable[[], int], name: str = "log-dir-deleter") -> None:
        self._now_ms = now_ms
        self._due: list[tuple[int, int, Path]] = []  # (due time in ms, sequence, path)
        self._sequence = 0
        self._cond = threading.Condition()
        self._stopped = False
        self._name = name
        self._thread: threading.Thread | None = None
        self._removing: Path | None = None

    def schedule(self, path: Path, delay_ms: int) -> None:
        """Remove ``path`` (recursively) ``delay_ms`` from now, in the worker thread."""
        with self._cond:
            if self._stopped:
                return  # stopping: the -delete name makes the next start remove it
            heapq.heappush(self._due, (self._now_ms() + delay_ms, self._sequence, path))
            self._sequence += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()

    def pending(self) -> list[Path]:
        """Directories scheduled and not yet removed (for statistics and tests)."""
        with self._cond:
            due = [path for _, _, path in sorted(self._due)]
            return due if self._removing is None else [self._removing, *due]

    def close(self) -> None:
        """Stop the worker; scheduled directories not yet due stay on disk for the next start."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(STOP_JOIN_TIMEOUT_S)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if not self._due:
                        self._cond.wait()
                        continue
                    wait_ms = self._due[0][0] - self._now_ms()
                    if wait_ms <= 0:
                        break
                    self._cond.wait(min(wait_ms, DUE_CHECK_INTERVAL_MS) / 1000)
                if self._stopped:
                    return
                _, _, path = heapq.heappop(self._due)
                self._removing = path  # pending() counts it until it is gone
            self._remove(path)
            with self._cond:
                self._removing = None

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            pass
        except OSError as exc:  # the next start tries again: the name still ends in -delete
            logger.error("cannot remove deleted log %s: %s", path, exc)
