"""The leader epoch cache of one partition: which epoch's leader wrote from which offset (KIP-101).

It answers OffsetForLeaderEpoch (consumers detecting truncation, KIP-320; followers truncating
before they fetch, KIP-101/279) and the leader epoch of ListOffsets answers. An entry
``(epoch, start_offset)`` is assigned when a replica becomes leader with a new epoch (start =
its log end offset) and when a follower appends a batch of a new epoch.

File ``leader-epoch-checkpoint`` in the partition directory, Kafka's ``LeaderEpochCheckpointFile``
format (UTF-8 text, ``\\n`` line ends)::

    0                  version
    2                  number of entries
    0 0                epoch, start offset
    3 1200

No checksum: the file is replaced atomically (``<name>.tmp``, fsync, rename, directory fsync),
so after a crash it is the old or the new version. Entries whose start offset is above the log
end offset after recovery are dropped (their data was lost with the log's tail), as Kafka's
``truncateFromEnd`` does. A file that does not parse is ignored and rebuilt from the next
assignment: it only affects which epoch OffsetForLeaderEpoch names.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

from broker.log.fileio import replace_file_durably

__all__ = ["LeaderEpochCache", "LEADER_EPOCH_CHECKPOINT", "UNDEFINED_EPOCH", "UNDEFINED_OFFSET",
           "LEADER_EPOCH_ENTRIES_MAX"]

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
LEADER_EPOCH_ENTRIES_MAX = 10_000  # one per leader change; a bound, not a working size


class LeaderEpochCache:
    """Sorted ``(epoch, start_offset)`` entries; epochs and start offsets both increase."""

    def __init__(self, directory: Path | None, entries: list[tuple[int, int]] | None = None) -> None:
        self._directory = directory
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or []:
            self._epochs.append(epoch)
            self._starts.append(start)

    @classmethod
    def load(cls, directory: Path, log_end_offset: int) -> "LeaderEpochCache":
        cache = cls(directory, _read(directory / LEADER_EPOCH_CHECKPOINT))
        if cache.truncate_from_end(log_end_offset):
            cache._write()
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka ``LeaderEpochFileCache.assign``).
        A repeated or older epoch changes nothing; entries at or above ``start_offset`` of older
        epochs are replaced (they were never written under them). True when it changed."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        while self._starts and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        if len(self._epochs) > LEADER_EPOCH_ENTRIES_MAX:
            del self._epochs[0], self._starts[0]
        self._write()
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (UNDEFINED_EPOCH before the first entry)."""
        index = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[index] if index >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka ``LeaderEpochFileCache.endOffsetFor``): (the largest epoch
        <= requested, the start offset of the first epoch above requested), or the log end
        offset for the latest epoch, or (-1, -1) when requested is undefined or above latest."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = higher - 1
        epoch = self._epochs[floor] if floor >= 0 else requested_epoch
        return epoch, self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting above ``end_offset`` (their data is gone). An entry starting at
        exactly ``end_offset`` stays: a leader assigns its epoch there before its first append.
        True when it changed."""
        changed = False
        while self._starts and self._starts[-1] > end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        return changed

    def remove_from(self, offset: int) -> bool:
        """Drop every entry starting at or above ``offset`` (Kafka ``truncateFromEnd``), after a
        follower truncated its log to ``offset``: those epochs no longer hold any data here.
        True when it changed (and the file was rewritten)."""
        changed = False
        while self._starts and self._starts[-1] >= offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        if changed:
            self._write()
        return changed

    def _write(self) -> None:
        if self._directory is None:
            return
        lines = ["0", str(len(self._epochs))] + [f"{e} {s}" for e, s in zip(self._epochs, self._starts)]
        replace_file_durably(self._directory / LEADER_EPOCH_CHECKPOINT, ("\n".join(lines) + "\n").encode("utf-8"))


def _read(path: Path) -> list[tuple[int, int]]:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("ignoring %s: %s", path, exc)
        return []
    try:
        if lines and lines[-1] == "":
            lines.pop()
        if lines[0].strip() != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad version or count")
        entries = [tuple(int(part) for part in line.split(" ")) for line in lines[2:]]
        if any(len(e) != 2 for e in entries):
            raise ValueError("malformed entry")
    except (ValueError, IndexError) as exc:
        logger.warning("ignoring %s: %s", path, exc)
        return []
    ordered = all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(entries, entries[1:]))
    return entries if ordered else []
