"""Every partition log of a broker, spread over one or more log directories.

Layout of each log directory (Kafka's)::

    <log.dir>/
      <topic>-<partition>/                  one Log per partition (segments, indexes)
      <topic>-<partition>.<id>-delete/      a deleted partition not yet removed (see below)
      recovery-point-offset-checkpoint      per partition: offset below which data was fsynced
      log-start-offset-checkpoint           per partition: first offset readers may fetch
      .kafka_cleanshutdown                  present only between a clean close and the next start
      .lock                                 flock()ed while a broker uses the directory

At start each directory's checkpoints are read (a malformed file counts as empty: every partition
then recovers from offset 0) and the clean-shutdown marker decides whether logs need recovery; the
marker is removed once the directory is loaded, so a crash from then on is seen as unclean. At
``close`` every log is flushed, the checkpoints written, and only then the marker created. A
directory that fails with an I/O error while loading is taken offline; the others carry on.
New partitions go to the online directory holding the fewest partitions. Like Kafka, a manager
holds an exclusive ``flock`` on each directory's ``.lock`` so two brokers can never share one.
Deleting a partition renames its directory to ``<topic>-<partition>.<id>-delete`` at once and
leaves the removal of its files to a worker thread ``file.delete.delay.ms`` later
(``dir_deleter.py``): removing a big log inline stalled the event loop. Leftover ``-delete``
directories found at start are not loaded; they are scheduled for removal the same way.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from broker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from broker.log.config import LogConfig
from broker.log.dir_deleter import DirDeleter
from broker.log.errors import CheckpointError, InvalidTopicError, KafkaStorageError, LogError
from broker.log.fileio import fsync_dir, open_rw
from broker.log.log import Log
from broker.records import DEFAULT_LIMITS, BatchLimits

__all__ = [
    "LogManager",
    "ManagerStatistics",
    "CLEAN_SHUTDOWN_FILE",
    "parse_log_dir_name",
    "validate_topic",
    "wall_clock_ms",
]

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
TOPIC_NAME_MAX = 249
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION = re.compile(r"0|[1-9][0-9]{0,9}")

TopicPartition = tuple[str, int]


def wall_clock_ms() -> int:
    """The default clock: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def validate_topic(topic: str) -> None:
    """Kafka ``Topic.validate``: 1..249 chars of [a-zA-Z0-9._-], not "." or ".."."""
    if not topic or topic in (".", ".."):
        raise InvalidTopicError(f"topic name {topic!r} is illegal: empty, '.' or '..'")
    if len(topic) > TOPIC_NAME_MAX:
        raise InvalidTopicError(f"topic name is {len(topic)} chars, the limit is {TOPIC_NAME_MAX}")
    if not _TOPIC_CHARS.fullmatch(topic):
        raise InvalidTopicError(f"topic name {topic!r} may hold only ASCII letters, digits, . _ -")


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """``<topic>-<partition>`` -> (topic, partition); None if the name is not a partition log."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not _PARTITION.fullmatch(partition) or int(partition) > 2**31 - 1:
        return None
    try:
        validate_topic(topic)
    except InvalidTopicError:
        return None
    return topic, int(partition)


@dataclass(frozen=True)
class ManagerStatistics:
    log_dirs: int
    offline_log_dirs: int
    partitions: int
    size_in_bytes: int
    unflushed_messages: int


class LogManager:
    """Opens, creates, deletes, checkpoints and closes the partition logs of a broker."""

    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        config: LogConfig,
        now_ms: Callable[[], int] = wall_clock_ms,
        limits: BatchLimits = DEFAULT_LIMITS,
        topic_overrides: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._log_dirs = [Path(d).absolute() for d in log_dirs]
        if not self._log_dirs or len(set(self._log_dirs)) != len(self._log_dirs):
            raise ValueError(f"log dirs must be a non-empty list without duplicates: {log_dirs}")
        self._config = config
        self._now_ms = now_ms
        self._limits = limits
        self._topic_overrides = {t: dict(o) for t, o in (topic_overrides or {}).items()}
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._offline_dirs: set[Path] = set()
        self._lock_fds: list[int] = []
        self._closed = False
        self._deleter = DirDeleter(now_ms)
        self.had_clean_shutdown: dict[Path, bool] = {}
        try:
            for log_dir in self._log_dirs:
                self._load_dir(log_dir)
            if len(self._offline_dirs) == len(self._log_dirs):
                raise KafkaStorageError(f"every log directory is offline: {self._log_dirs}")
        except BaseException:
            for log in self._logs.values():
                log.close_handles()
            self._release_locks()
            self._deleter.close()
            raise

    # ------------------------------------------------------------------------------ loading

    def _load_dir(self, log_dir: Path) -> None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fds.append(_lock_dir(log_dir))
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            self.had_clean_shutdown[log_dir] = clean
            recovery_points = _read_or_empty(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = _read_or_empty(log_dir / LOG_START_OFFSET_CHECKPOINT)
            for name in sorted(os.listdir(log_dir)):
                path = log_dir / name
                if path.is_dir():
                    self._load_partition(log_dir, path, clean, recovery_points, start_offsets)
            if clean:
                marker.unlink()
                fsync_dir(log_dir)
            self._write_checkpoints(log_dir)
        except (OSError, KafkaStorageError) as exc:
            logger.error("log dir %s goes offline while loading: %s", log_dir, exc)
            self._take_dir_offline(log_dir)

    def _load_partition(
        self,
        log_dir: Path,
        path: Path,
        clean: bool,
        recovery_points: Mapping[TopicPartition, int],
        start_offsets: Mapping[TopicPartition, int],
    ) -> None:
        if path.name.endswith(DELETE_DIR_SUFFIX):
            logger.info("scheduling removal of deleted log %s", path)
            self._deleter.schedule(path, self._config.file_delete_delay_ms)
            return
        tp = parse_log_dir_name(path.name)
        if tp is None:
            logger.warning("ignoring %s: not a <topic>-<partition> log directory", path)
            return
        if tp in self._logs:
            # Kafka refuses to start too: only an operator can tell which copy is the right one.
            raise LogError(
                f"duplicate log directories for {tp[0]}-{tp[1]} in {self._dir_of[tp]} and "
                f"{log_dir}; delete one of them"
            )
        self._logs[tp] = Log.open(
            path, self._config_for(tp[0]), self._now_ms,
            recovery_point=recovery_points.get(tp, 0),
            limits=self._limits,
            clean_shutdown=clean,
            log_start_offset=start_offsets.get(tp, 0),
        )
        self._dir_of[tp] = log_dir

    def update_broker_config(self, config: LogConfig) -> None:
        """New broker-level log defaults (a dynamic broker config): every open log gets them,
        under its topic's overrides, without a restart."""
        self._config = config
        for (topic, _), log in list(self._logs.items()):
            try:
                log.update_config(self._config_for(topic))
            except ValueError as exc:  # overrides that do not fit the new defaults
                logger.error("topic %s keeps its log config: %s", topic, exc)

    def _config_for(self, topic: str) -> LogConfig:
        return self._config.with_overrides(self._topic_overrides.get(topic, {}))

    def _take_dir_offline(self, log_dir: Path) -> None:
        self._offline_dirs.add(log_dir)
        for tp in [tp for tp, d in self._dir_of.items() if d == log_dir]:
            self._logs.pop(tp).close_handles()
            del self._dir_of[tp]

    # ---------------------------------------------------------------------------- partitions

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, topic_overrides: Mapping[str, str] | None = None
    ) -> Log:
        """The partition's log, created on the least-used online log directory if missing.

        ``topic_overrides`` (topic config names) are remembered for the topic and applied to
        its log, existing or new.
        """
        if self._closed:
            raise LogError("the log manager is closed")
        validate_topic(topic)
        if not 0 <= partition <= 2**31 - 1:
            raise InvalidTopicError(f"partition {partition} must be in [0, 2^31-1]")
        if topic_overrides is not None:
            self._topic_overrides[topic] = dict(topic_overrides)
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            if topic_overrides is not None:
                log.update_config(self._config_for(topic))
            return log
        log_dir = self._pick_dir()
        log = Log.open(log_dir / f"{topic}-{partition}", self._config_for(topic), self._now_ms,
                       limits=self._limits, clean_shutdown=True)
        try:
            fsync_dir(log_dir)
        except OSError as exc:
            log.close_handles()
            raise KafkaStorageError(f"cannot create log {topic}-{partition}: {exc}") from exc
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        return log

    def _pick_dir(self) -> Path:
        online = [d for d in self._log_dirs if d not in self._offline_dirs]
        if not online:
            raise KafkaStorageError("no online log directory")
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])  # min keeps the first of equal counts

    def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition's log: rename its directory to ``<name>.<id>-delete`` at once (the
        partition's name is free again; a crash leaves the job to the next start) and have a
        worker thread remove it ``file.delete.delay.ms`` later. False if there was no such log."""
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        log_dir = self._dir_of.pop(tp)
        log.close_handles()
        try:
            doomed = self._delete_name(log.directory)
            os.rename(log.directory, doomed)
            fsync_dir(log_dir)
            self._write_checkpoints(log_dir)
        except OSError as exc:
            logger.error("log dir %s goes offline deleting %s: %s", log_dir, tp, exc)
            self._take_dir_offline(log_dir)
            raise KafkaStorageError(f"cannot delete log {topic}-{partition}: {exc}") from exc
        self._deleter.schedule(doomed, self._config.file_delete_delay_ms)
        return True

    def pending_deletions(self) -> list[Path]:
        """Renamed ``-delete`` directories whose removal has not finished yet."""
        return self._deleter.pending()

    def _delete_name(self, path: Path) -> Path:
        stamp = self._now_ms()
        for attempt in range(1000):
            doomed = path.with_name(f"{path.name}.{stamp:x}{attempt:03x}{DELETE_DIR_SUFFIX}")
            if not doomed.exists():
                return doomed
        raise KafkaStorageError(f"no free name to delete {path}")

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    @property
    def log_dirs(self) -> list[Path]:
        return list(self._log_dirs)

    @property
    def offline_log_dirs(self) -> set[Path]:
        return set(self._offline_dirs)

    # ----------------------------------------------------------------------- periodic tasks

    def run_retention(self) -> int:
        """Retention over every log; checkpoints the log start offsets. Segments deleted."""
        deleted = 0
        for tp, log in list(self._logs.items()):
            try:
                deleted += log.delete_old_segments()
            except KafkaStorageError as exc:
                logger.error("retention of %s failed: %s", tp, exc)
        if deleted:
            self.checkpoint()
        return deleted

    def flush_due(self) -> int:
        """Flush every log whose policy says so; checkpoints the recovery points. Logs flushed."""
        flushed = 0
        for tp, log in list(self._logs.items()):
            try:
                flushed += log.maybe_flush()
            except KafkaStorageError as exc:
                logger.error("flush of %s failed: %s", tp, exc)
        if flushed:
            self.checkpoint()
        return flushed

    def checkpoint(self) -> None:
        """Write both checkpoint files of every online log directory."""
        for log_dir in self._log_dirs:
            if log_dir not in self._offline_dirs:
                self._write_checkpoints(log_dir)

    def _write_checkpoints(self, log_dir: Path) -> None:
        """An offline log keeps its last values: they were true when it went offline."""
        logs = {tp: self._logs[tp] for tp, d in self._dir_of.items() if d == log_dir}
        write_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT,
                         {tp: log.recovery_point for tp, log in logs.items()})
        write_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT,
                         {tp: log.log_start_offset for tp, log in logs.items()})

    # ---------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush and close every log; mark each directory whose logs all closed cleanly.
        Releases the directory locks. A second call does nothing."""
        if self._closed:
            return
        self._closed = True
        self._deleter.close()
        try:
            self._close_dirs()
        finally:
            self._release_locks()

    def close_handles(self) -> None:
        """Close every file without flushing, checkpointing or marking a clean shutdown: what
        a crash leaves behind, so the next start recovers (for a broker stopping after a
        storage failure, and for tests)."""
        self._closed = True
        self._deleter.close()
        for log in self._logs.values():
            log.close_handles()
        self._logs.clear()
        self._dir_of.clear()
        self._release_locks()

    def _release_locks(self) -> None:
        for fd in self._lock_fds:
            os.close(fd)  # closing the fd drops its flock
        self._lock_fds.clear()

    def _close_dirs(self) -> None:
        for log_dir in self._log_dirs:
            if log_dir in self._offline_dirs:
                continue
            clean = True
            for tp in [tp for tp, d in self._dir_of.items() if d == log_dir]:
                log = self._logs[tp]
                clean = clean and not log.is_offline  # it may hold a torn write
                try:
                    log.close()
                except KafkaStorageError as exc:
                    logger.error("closing %s failed: %s", tp, exc)
                    clean = False
            try:
                self._write_checkpoints(log_dir)
                if clean:
                    _write_marker(log_dir / CLEAN_SHUTDOWN_FILE)
            except OSError as exc:
                logger.error("log dir %s: cannot finish a clean shutdown: %s", log_dir, exc)
        self._logs.clear()
        self._dir_of.clear()

    def statistics(self) -> ManagerStatistics:
        logs = list(self._logs.values())
        return ManagerStatistics(
            log_dirs=len(self._log_dirs),
            offline_log_dirs=len(self._offline_dirs),
            partitions=len(logs),
            size_in_bytes=sum(log.size_in_bytes for log in logs if not log.is_offline),
            unflushed_messages=sum(
                log.log_end_offset - log.recovery_point for log in logs if not log.is_offline
            ),
        )


def _read_or_empty(path: Path) -> dict[TopicPartition, int]:
    """A checkpoint, or empty with a warning when it is malformed (Kafka resets to 0 too)."""
    try:
        return read_checkpoint(path)
    except CheckpointError as exc:
        logger.warning("ignoring %s, every partition recovers from offset 0: %s", path, exc)
        return {}


def _lock_dir(log_dir: Path) -> int:
    """Take the exclusive lock of a log directory; refuse to share it (Kafka's ``.lock``)."""
    fd = open_rw(log_dir / LOCK_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogError(f"log dir {log_dir} is in use by another broker (lock on {LOCK_FILE})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_marker(path: Path) -> None:
    fd = open_rw(path)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
