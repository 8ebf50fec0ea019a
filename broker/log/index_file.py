"""The file life cycle shared by the offset index and the time index.

Both are flat arrays of fixed-size big-endian entries with no header, not preallocated, at most
``segment.index.bytes`` long. New entries wait in memory (up to ``PENDING_BYTES_MAX``) and are
written at a flush, a roll, a truncation or close: one small pwrite per indexed batch cost ~3% of a
1 MiB append (the page and inode updates of a second file); Kafka avoids the same cost with an mmap.
Subclasses own the in-memory columns and the ordering rules; this class owns the fd and the bytes.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.log.fileio import open_rw, pread_exact, pwrite_all, sync_data

__all__ = ["IndexFile", "PENDING_BYTES_MAX"]

PENDING_BYTES_MAX = 4096


class IndexFile:
    """One index file and its entry counts; owns one fd. ``entry_size`` is set by the subclass."""

    entry_size: int

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._max_entries = max_index_bytes // self.entry_size
        self._fd = open_rw(path)
        self._count = 0  # entries, written or pending
        self._written = 0  # entries in the file
        self._pending = bytearray()  # entries not yet written, in file order

    @property
    def entries(self) -> int:
        return self._count

    @property
    def is_full(self) -> bool:
        return self._count >= self._max_entries

    def set_max_index_bytes(self, max_index_bytes: int) -> None:
        self._max_entries = max_index_bytes // self.entry_size

    def _check_size(self) -> int | None:
        """The file's size if it holds whole entries within the limit (and adopt it), else None."""
        size = os.fstat(self._fd).st_size
        if size % self.entry_size or size // self.entry_size > self._max_entries:
            return None
        self._count = self._written = size // self.entry_size
        self._pending.clear()
        return size

    def _read_last_entry(self, size: int) -> bytes:
        return pread_exact(self._fd, self.entry_size, size - self.entry_size)

    def _read_all(self) -> bytes | None:
        """Every entry's bytes (pending ones written first), or None if the file came up short."""
        self.write_pending()
        raw = pread_exact(self._fd, self._count * self.entry_size, 0)
        return raw if len(raw) == self._count * self.entry_size else None

    def _clear_file(self) -> None:
        os.ftruncate(self._fd, 0)
        self._count = self._written = 0
        self._pending.clear()

    def _add_entry(self, packed: bytes) -> None:
        self._pending += packed
        self._count += 1
        if len(self._pending) >= PENDING_BYTES_MAX:
            self.write_pending()

    def _keep_entries(self, keep: int) -> None:
        self.write_pending()
        os.ftruncate(self._fd, keep * self.entry_size)
        self._count = self._written = keep

    def write_pending(self) -> None:
        """Write the entries held in memory to the file (no fsync)."""
        if self._pending:
            pwrite_all(self._fd, self._pending, self._written * self.entry_size)
            self._written = self._count
            self._pending.clear()

    def flush(self) -> None:
        self.write_pending()
        sync_data(self._fd)

    def close(self) -> None:
        """Write pending entries (as the OS would have) and close the fd."""
        fd = self._fd
        try:
            if fd >= 0:
                self.write_pending()
        finally:
            self._fd = -1
            if fd >= 0:
                os.close(fd)

    def delete(self) -> None:
        self._pending.clear()
        self.close()
        self.path.unlink(missing_ok=True)
