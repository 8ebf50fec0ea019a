"""Raw-fd file helpers: exact reads and writes at explicit positions, directory fsync.

Segment data never goes through Python's buffered file objects: appends are ``pwritev`` calls at
the position the segment tracks (never the fd's own offset, so a truncation cannot leave the next
write beyond the end of the file and create a hole), reads are one ``pread`` of the whole range.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterator, Sequence

from broker.records import HEADER_SIZE, BatchHeader, read_header

__all__ = [
    "replace_file_durably",
    "open_rw",
    "sync_data",
    "pread_exact",
    "pwrite_all",
    "pwritev_all",
    "fsync_dir",
    "FileWindow",
    "iter_file_headers",
]

try:
    _IOV_MAX = os.sysconf("SC_IOV_MAX")
except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
    _IOV_MAX = 16
_IOV_MAX = max(16, min(_IOV_MAX, 1024))
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def open_rw(path: Path) -> int:
    """Open (creating if missing) for reading and writing; the caller owns the fd."""
    return os.open(path, _OPEN_FLAGS, 0o644)


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Read ``size`` bytes at ``position``; fewer only when the file ends first."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]  # a short read before EOF: keep reading (rare; signals, huge sizes)
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def pwrite_all(fd: int, data: bytes | bytearray, position: int) -> None:
    """Write all of ``data`` at ``position``."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        if written <= 0:
            raise OSError(errno.EIO, "pwrite wrote nothing")
        view = view[written:]
        position += written


def pwritev_all(fd: int, buffers: Sequence[bytes | bytearray | memoryview], position: int) -> int:
    """Write byte buffers (format "B") back to back at ``position``; return the bytes written.

    One ``pwritev`` in the common case; handles partial writes and the IOV_MAX bound.
    """
    start = position
    if len(buffers) <= _IOV_MAX:
        written = os.pwritev(fd, buffers, position)
        if written == sum(map(len, buffers)):
            return written
        position += written
        buffers = _skip(buffers, written)
    pending = [memoryview(b).cast("B") for b in buffers if len(b)]
    index = 0
    while index < len(pending):
        written = os.pwritev(fd, pending[index : index + _IOV_MAX], position)
        if written <= 0:
            raise OSError(errno.EIO, "pwritev wrote nothing")
        position += written
        while index < len(pending) and written >= len(pending[index]):
            written -= len(pending[index])
            index += 1
        if written:
            pending[index] = pending[index][written:]
    return position - start


def _skip(buffers: Sequence[bytes | bytearray | memoryview], count: int) -> list[memoryview]:
    """The buffers without their first ``count`` bytes."""
    out: list[memoryview] = []
    for buffer in buffers:
        view = memoryview(buffer).cast("B")
        if count >= len(view):
            count -= len(view)
            continue
        out.append(view[count:])
        count = 0
    return out


def sync_data(fd: int) -> None:
    """Make a file's data and size durable: ``fdatasync`` where the OS has it (it skips the
    timestamps an ``fsync`` also journals; recovery never reads them), else ``fsync``."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def replace_file_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably: write a ``.tmp`` file, fsync it,
    rename it over ``path``, fsync the directory (checkpoints and the cleaner's status files)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = open_rw(tmp)
    try:
        os.ftruncate(fd, 0)
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """Make renames, creations and deletions in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileWindow:
    """A read cursor over ``[0, end)`` of a file through one reusable window of bytes.

    ``view(position, size)`` returns a memoryview of the requested range, reading a new window of
    at least ``window_bytes`` starting at ``position`` when the range is not already buffered.
    Forward scans (recovery, header walks) therefore cost one ``pread`` per window, not per batch.
    """

    def __init__(self, fd: int, end: int, window_bytes: int) -> None:
        self._fd = fd
        self._end = end
        self._window_bytes = window_bytes
        self._start = 0
        self._buf = b""

    def view(self, position: int, size: int) -> memoryview | None:
        """The bytes ``[position, position + size)``, or None when they pass the end."""
        if position < 0 or position + size > self._end:
            return None
        offset = position - self._start
        if offset < 0 or offset + size > len(self._buf):
            want = min(max(size, self._window_bytes), self._end - position)
            self._buf = pread_exact(self._fd, want, position)
            self._start = position
            offset = 0
            if len(self._buf) < size:
                return None  # the file is shorter than the caller believed
        return memoryview(self._buf)[offset : offset + size]


def iter_file_headers(
    fd: int, start: int, end: int, window_bytes: int = 8192
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each whole v2 batch in the file range ``[start, end)``.

    Structural checks only (length at least a header, batch inside the range, magic 2,
    non-negative lastOffsetDelta); no CRC. Stops silently at the first batch that fails them, so a
    caller that needs to know compares where the scan stopped with ``end``.
    """
    window = FileWindow(fd, end, window_bytes)
    position = start
    while True:
        view = window.view(position, HEADER_SIZE)
        if view is None:
            return
        header = read_header(view)
        size = header.size
        if size < HEADER_SIZE or position + size > end:
            return
        if header.magic != 2 or header.last_offset_delta < 0:
            return
        yield position, header
        position += size
