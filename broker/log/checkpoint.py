"""Offset checkpoint files: ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``.

Format (Kafka ``OffsetCheckpointFile`` / ``CheckpointFile``), UTF-8 text, ``\\n`` line ends::

    0                    version, always 0
    2                    number of entries that follow
    orders 0 1200        topic, partition, offset separated by single spaces
    orders 1 877

No checksum: the file is replaced atomically instead. ``write_checkpoint`` writes
``<name>.tmp``, fsyncs it, renames it over ``<name>`` and fsyncs the directory, so after a crash
the file is either the old or the new version, whole. A file that does not parse raises
``CheckpointError``; callers (the log manager) then fall back to 0 for every partition, which at
worst costs a longer recovery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from broker.log.errors import CheckpointError
from broker.log.fileio import replace_file_durably

__all__ = [
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "read_checkpoint",
    "write_checkpoint",
    "format_checkpoint",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_VERSION = 0

TopicPartition = tuple[str, int]


def format_checkpoint(entries: Mapping[TopicPartition, int]) -> bytes:
    """The exact bytes of a checkpoint holding ``entries`` (sorted for stable output)."""
    lines = [str(_VERSION), str(len(entries))]
    for (topic, partition), offset in sorted(entries.items()):
        lines.append(f"{topic} {partition} {offset}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> None:
    """Replace ``path`` atomically and durably with a checkpoint of ``entries``."""
    replace_file_durably(path, format_checkpoint(entries))


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Parse a checkpoint; a missing file is empty. Raises ``CheckpointError`` if malformed."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not UTF-8: {exc}") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(_VERSION):
        raise CheckpointError(f"{path}: expected version {_VERSION} and a count, got {lines[:2]!r}")
    try:
        expected = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: entry count {lines[1]!r} is not an integer") from None
    entries = [_parse_line(path, line) for line in lines[2:]]
    if len(entries) != expected:
        raise CheckpointError(f"{path}: expected {expected} entries, found {len(entries)}")
    return dict(entries)


def _parse_line(path: Path, line: str) -> tuple[TopicPartition, int]:
    parts = line.split(" ")
    try:
        topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        raise CheckpointError(f"{path}: malformed line {line!r}") from None
    if len(parts) != 3 or not topic or partition < 0:
        raise CheckpointError(f"{path}: malformed line {line!r}")
    return (topic, partition), offset
