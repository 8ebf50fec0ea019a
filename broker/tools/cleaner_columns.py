"""The log cleaner's figures on ``pylog topics describe``'s partition lines.

Kafka shows a log's dirty ratio and the uncleanable logs only as broker metrics; no request
returns them. ``pylog topics describe --broker-config server.properties ...`` reads them from
the log directories of the brokers whose configs it is given (on this machine), read-only,
with the cleaner's own planner (``broker.log.cleaner.status``). A compacted topic's partition
line then ends with::

    DirtyRatio: 1=0.42,2=0.40    the dirty ratio of each replica's copy found (each cleans its own)
    Uncleanable: 2               replicas whose broker's cleaner gave up on this log

The ratio is dirty bytes / (clean + dirty bytes) of the cleanable part of the log, the figure
the cleaner compares with ``min.cleanable.dirty.ratio``. Without ``--broker-config`` the lines
stay Kafka's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from broker.log.cleaner.status import dirty_section, read_uncleanable

__all__ = ["broker_log_dirs", "cleaner_columns"]

INT64_MAX = (1 << 63) - 1


def broker_log_dirs(config_paths: Sequence[str]) -> dict[int, list[Path]]:
    """``{broker.id: log dirs}`` from server.properties files; ValueError for a bad file."""
    from broker.server.config import load_properties

    dirs: dict[int, list[Path]] = {}
    for path in config_paths:
        try:
            props = load_properties(Path(path))
        except OSError as exc:
            raise ValueError(f"cannot read broker config {path}: {exc.strerror}") from None
        raw_id = props.get("broker.id", "")
        if not raw_id.strip().lstrip("-").isdigit():
            raise ValueError(f"{path}: no integer broker.id")
        listed = props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs"
        dirs[int(raw_id)] = [Path(p.strip()) for p in listed.split(",") if p.strip()]
    return dirs


def _long(configs: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(configs.get(name, default))
    except ValueError:
        return default


def cleaner_columns(topic: str, partition: int, replicas: Sequence[int], configs: Mapping[str, str],
                    dirs: Mapping[int, list[Path]], now_ms: int) -> str:
    """``\\tDirtyRatio: ...\\tUncleanable: ...`` for a compacted topic's partition; ``""`` when
    the topic is not compacted or ``dirs`` is empty; ``DirtyRatio: unknown`` when none of its
    replicas' copies is in ``dirs``."""
    if not dirs or "compact" not in configs.get("cleanup.policy", "delete"):
        return ""
    min_lag = _long(configs, "min.compaction.lag.ms", 0)
    max_lag = _long(configs, "max.compaction.lag.ms", INT64_MAX)
    ratios, uncleanable = [], []
    for broker in replicas:
        for log_dir in dirs.get(broker, ()):
            section = dirty_section(log_dir, topic, partition, now_ms=now_ms, min_compaction_lag_ms=min_lag,
                                    max_compaction_lag_ms=max_lag)
            if section is None:
                continue
            ratios.append(f"{broker}={section.dirty_ratio:.2f}")
            if (topic, partition) in read_uncleanable(log_dir):
                uncleanable.append(str(broker))
            break
    if not ratios:
        return "\tDirtyRatio: unknown"  # compacted, but no replica's directory was given
    return f"\tDirtyRatio: {','.join(ratios)}" + (f"\tUncleanable: {','.join(uncleanable)}" if uncleanable else "")
