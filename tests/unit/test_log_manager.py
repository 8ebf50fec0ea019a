"""LogManager: checkpoint files, clean-shutdown marker, recovery, placement, retention, deletion."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker.log import (
    CLEAN_SHUTDOWN_FILE,
    InvalidTopicError,
    LogConfig,
    LogManager,
    parse_log_dir_name,
    read_checkpoint,
    segment_file_name,
    write_checkpoint,
)
from broker.records import Record, encode_batch, iter_batches

T0 = 1_700_000_000_000
RP = "recovery-point-offset-checkpoint"
LSO = "log-start-offset-checkpoint"


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(count: int = 2, ts: int = T0, value: bytes = b"value") -> bytes:
    return encode_batch([Record(i, ts, b"k", value) for i in range(count)])


def test_checkpoint_format_is_kafkas_text(tmp_path: Path) -> None:
    path = tmp_path / RP
    write_checkpoint(path, {("orders", 1): 877, ("orders", 0): 1200, ("a.b-c_d", 12): 0})
    assert path.read_text() == "0\n3\na.b-c_d 12 0\norders 0 1200\norders 1 877\n"
    assert read_checkpoint(path) == {("orders", 1): 877, ("orders", 0): 1200, ("a.b-c_d", 12): 0}
    assert not (tmp_path / (RP + ".tmp")).exists()
    write_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_checkpoint(tmp_path / "missing") == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 5\n", "0\nx\n", "0\n1\nt 0\n", "0\n1\nt x 5\n", "0\n1\nt -1 5\n",
     "0\n1\nt 0 5 9\n", "\xff\n"],
)
def test_malformed_checkpoints_are_refused(tmp_path: Path, text: str) -> None:
    from broker.log import CheckpointError

    (tmp_path / RP).write_bytes(text.encode("latin-1"))
    with pytest.raises(CheckpointError):
        read_checkpoint(tmp_path / RP)


def make_manager(
    dirs: list[Path], clock: Clock, config: LogConfig | None = None, **kw
) -> LogManager:
    return LogManager(dirs, config or LogConfig(segment_bytes=600), clock, **kw)


def test_checkpoints_written_and_read_back(tmp_path: Path) -> None:
    clock = Clock()
    manager = make_manager([tmp_path / "d1"], clock)
    orders0 = manager.get_or_create("orders", 0)
    orders1 = manager.get_or_create("orders", 1)
    for _ in range(5):
        orders0.append_as_leader(batch(3), 0)
    orders1.append_as_leader(batch(2), 0)
    orders0.flush(6)
    orders0.delete_records_before(4)
    manager.checkpoint()
    assert (tmp_path / "d1" / RP).read_text() == "0\n2\norders 0 6\norders 1 0\n"
    assert (tmp_path / "d1" / LSO).read_text() == "0\n2\norders 0 4\norders 1 0\n"
    manager.close()
    assert (tmp_path / "d1" / RP).read_text() == "0\n2\norders 0 15\norders 1 2\n"
    assert (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()

    manager = make_manager([tmp_path / "d1"], clock)
    assert manager.had_clean_shutdown[(tmp_path / "d1").absolute()]
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()  # removed on start
    log = manager.get("orders", 0)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (4, 15, 15)
    assert manager.get("orders", 1).log_end_offset == 2
    manager.close()


def corrupt_middle_batch(log_dir: Path) -> int:
    """Flip a CRC-covered byte of the second batch of the active segment; return its base."""
    active = sorted(log_dir.glob("*.log"))[-1]
    data = bytearray(active.read_bytes())
    batches = list(iter_batches(data))
    pos, header = batches[1]
    data[pos + header.size - 1] ^= 0x01
    active.write_bytes(bytes(data))
    return header.base_offset


def test_clean_shutdown_marker_skips_recovery_and_its_absence_runs_it(tmp_path: Path) -> None:
    clock = Clock()
    manager = make_manager([tmp_path / "d1"], clock, LogConfig())
    log = manager.get_or_create("t", 0)
    for _ in range(4):
        log.append_as_leader(batch(2), 0)
    manager.close()
    bad_base = corrupt_middle_batch(tmp_path / "d1" / "t-0")

    manager = make_manager([tmp_path / "d1"], clock, LogConfig())
    assert manager.get("t", 0).log_end_offset == 8  # clean: the damage was not looked for
    manager.close_handles()  # now crash: no close, no marker

    manager = make_manager([tmp_path / "d1"], clock, LogConfig())
    assert not manager.had_clean_shutdown[(tmp_path / "d1").absolute()]
    assert manager.get("t", 0).log_end_offset == bad_base == 2  # recovered from the checkpoint
    manager.close()


def test_unclean_open_recovers_torn_tail_and_garbage(tmp_path: Path) -> None:
    clock = Clock()
    manager = make_manager([tmp_path / "d1", tmp_path / "d2"], clock)
    logs = [manager.get_or_create("t", p) for p in range(2)]
    for log in logs:
        for _ in range(10):
            log.append_as_leader(batch(2, value=b"x" * 40), 0)
    manager.checkpoint()
    ends = [log.log_end_offset for log in logs]
    manager.close_handles()  # crash
    torn = sorted((logs[0].directory).glob("*.log"))[-1]
    os.truncate(torn, torn.stat().st_size - 5)
    with open(sorted(logs[1].directory.glob("*.log"))[-1], "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63" + os.urandom(300))

    manager = make_manager([tmp_path / "d1", tmp_path / "d2"], clock)
    assert manager.get("t", 0).log_end_offset == ends[0] - 2  # the torn batch is gone
    assert manager.get("t", 1).log_end_offset == ends[1]  # garbage gone, data intact
    # recovery points were capped and checkpointed right after loading
    for d in ("d1", "d2"):
        for (topic, partition), offset in read_checkpoint(tmp_path / d / RP).items():
            assert offset <= manager.get(topic, partition).log_end_offset
    manager.close()


def test_partitions_spread_over_log_dirs(tmp_path: Path) -> None:
    clock = Clock()
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = make_manager(dirs, clock)
    for p in range(6):
        manager.get_or_create("t", p)
    placed = [manager.log_dir_of("t", p).name for p in range(6)]
    assert placed == ["d1", "d2", "d1", "d2", "d1", "d2"]
    assert manager.delete("t", 0) and manager.delete("t", 2)
    assert manager.get_or_create("u", 0) is manager.get("u", 0)
    assert manager.log_dir_of("u", 0).name == "d1"  # d1 now holds fewer partitions
    assert (tmp_path / "d1" / "u-0").is_dir() and not (tmp_path / "d1" / "t-0").exists()
    manager.close()
    manager = make_manager(dirs, clock)
    assert sorted(manager.all_logs()) == [("t", 1), ("t", 3), ("t", 4), ("t", 5), ("u", 0)]
    assert read_checkpoint(tmp_path / "d1" / RP) == {("t", 4): 0, ("u", 0): 0}
    manager.close()


def test_retention_across_logs(tmp_path: Path) -> None:
    clock = Clock()
    manager = make_manager(
        [tmp_path / "d1", tmp_path / "d2"],
        clock,
        LogConfig(segment_bytes=300, retention_ms=60_000),
        topic_overrides={"keep": {"retention.ms": "-1"}},
    )
    logs = {name: manager.get_or_create(name, 0) for name in ("a", "b", "keep")}
    for i in range(12):
        for log in logs.values():
            log.append_as_leader(batch(2, ts=T0 + i * 10_000, value=b"v" * 60), 0)
    assert all(len(log.segments) >= 4 for log in logs.values())
    clock.now = T0 + 110_000 + 60_001  # batches with ts <= T0 + 50_000 are past retention
    deleted = manager.run_retention()
    assert deleted > 0
    for name in ("a", "b"):
        log = logs[name]
        assert log.log_start_offset == log.segments[0].base_offset > 0
        assert clock.now - log.segments[0].largest_timestamp <= 60_000 or len(log.segments) == 1
    assert logs["keep"].log_start_offset == 0
    starts = {**read_checkpoint(tmp_path / "d1" / LSO), **read_checkpoint(tmp_path / "d2" / LSO)}
    assert starts == {(n, 0): logs[n].log_start_offset for n in logs}
    manager.close()


def test_retention_by_bytes_keeps_the_newest(tmp_path: Path) -> None:
    clock = Clock()
    manager = make_manager([tmp_path / "d1"], clock,
                           LogConfig(segment_bytes=300, retention_bytes=700))
    log = manager.get_or_create("t", 0)
    for _ in range(20):
        log.append_as_leader(batch(2, value=b"v" * 60), 0)
    manager.run_retention()
    assert log.size_in_bytes <= 700 + log.active_segment.size
    assert log.size_in_bytes - log.segments[0].size < 700
    manager.close()


def test_flush_due_checkpoints_recovery_points(tmp_path: Path) -> None:
    clock = Clock()
    manager = make_manager([tmp_path / "d1"], clock, LogConfig(flush_ms=1000))
    log = manager.get_or_create("t", 0)
    log.append_as_leader(batch(3), 0)
    assert manager.flush_due() == 0
    clock.now += 1000
    assert manager.flush_due() == 1
    assert read_checkpoint(tmp_path / "d1" / RP) == {("t", 0): 3}
    manager.close()


def test_deleted_partition_leftovers_and_foreign_dirs(tmp_path: Path) -> None:
    clock = Clock()
    d1 = tmp_path / "d1"
    manager = make_manager([d1], clock)
    manager.get_or_create("t", 0).append_as_leader(batch(), 0)
    manager.close()
    (d1 / "t-1.0123abcd-delete").mkdir()  # a delete interrupted by a crash
    (d1 / "t-1.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    (d1 / "lost+found").mkdir()
    (d1 / "meta.properties").write_text("version=0\n")
    manager = make_manager([d1], clock, LogConfig(segment_bytes=600, file_delete_delay_ms=0))
    assert list(manager.all_logs()) == [("t", 0)]  # the -delete dir is not loaded
    wait_until(lambda: not (d1 / "t-1.0123abcd-delete").exists())  # removed in the background
    assert manager.pending_deletions() == []
    assert (d1 / "lost+found").is_dir()  # not ours, not a partition: left alone
    manager.close()


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_delete_renames_at_once_and_removes_after_file_delete_delay(tmp_path: Path) -> None:
    """The partition dir is renamed to <name>.<id>-delete inline; its files go only after
    file.delete.delay.ms, in a worker thread; the same partition can be re-created at once."""
    d1 = tmp_path / "d1"
    clock = Clock()
    config = LogConfig(segment_bytes=600, file_delete_delay_ms=30_000)
    manager = make_manager([d1], clock, config)
    manager.get_or_create("t", 0).append_as_leader(batch(), 0)
    assert manager.delete("t", 0)
    assert not (d1 / "t-0").exists() and manager.get("t", 0) is None
    [doomed] = manager.pending_deletions()
    assert doomed.parent == d1 and doomed.name.startswith("t-0.") and doomed.name.endswith("-delete")
    fresh = manager.get_or_create("t", 0)  # same name again, while the old one awaits removal
    assert fresh.log_end_offset == 0 and (d1 / "t-0").is_dir()
    fresh.append_as_leader(batch(3), 0)
    clock.now += 29_999
    assert any(doomed.iterdir()) and manager.pending_deletions() == [doomed]  # not yet due
    clock.now += 1
    wait_until(lambda: not doomed.exists())
    assert manager.pending_deletions() == [] and manager.get("t", 0) is fresh
    assert fresh.log_end_offset == 3 and (d1 / "t-0").is_dir()
    manager.close()
    reopened = make_manager([d1], clock, config)
    assert list(reopened.all_logs()) == [("t", 0)] and reopened.get("t", 0).log_end_offset == 3
    reopened.close()


def test_close_leaves_pending_delete_dirs_for_the_next_start(tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    manager = make_manager([d1], Clock(), LogConfig(segment_bytes=600))  # default delay: 60 s
    manager.get_or_create("t", 1)
    assert manager.delete("t", 1)
    [doomed] = manager.pending_deletions()
    manager.close()
    assert doomed.is_dir()  # not removed, still named -delete
    manager = make_manager([d1], Clock(), LogConfig(segment_bytes=600, file_delete_delay_ms=0))
    assert manager.all_logs() == {}
    wait_until(lambda: not doomed.exists())
    manager.close()


def test_file_delete_delay_config_names() -> None:
    assert LogConfig().file_delete_delay_ms == 60_000  # Kafka's default
    assert LogConfig.from_properties({"log.segment.delete.delay.ms": "5"}).file_delete_delay_ms == 5
    assert LogConfig().with_overrides({"file.delete.delay.ms": "7"}).file_delete_delay_ms == 7
    with pytest.raises(ValueError):
        LogConfig.from_properties({"log.segment.delete.delay.ms": "-1"})


def test_malformed_checkpoint_means_recovery_from_zero(tmp_path: Path) -> None:
    clock = Clock()
    d1 = tmp_path / "d1"
    manager = make_manager([d1], clock, LogConfig())
    log = manager.get_or_create("t", 0)
    for _ in range(3):
        log.append_as_leader(batch(), 0)
    manager.checkpoint()
    manager.close_handles()
    (d1 / RP).write_text("garbage")
    (d1 / LSO).write_text("0\n5\n")
    first = d1 / "t-0" / (segment_file_name(0) + ".log")
    data = bytearray(first.read_bytes())
    data[30] ^= 0xFF  # inside the first batch's CRC range
    first.write_bytes(bytes(data))
    manager = make_manager([d1], clock, LogConfig())
    assert manager.get("t", 0).log_end_offset == 0  # recovered from offset 0
    manager.close()


@pytest.mark.parametrize("topic", ["", ".", "..", "a" * 250, "bad/name", "spa ce", "ünï"])
def test_invalid_topic_names(tmp_path: Path, topic: str) -> None:
    manager = make_manager([tmp_path / "d1"], Clock())
    with pytest.raises(InvalidTopicError) as info:
        manager.get_or_create(topic, 0)
    assert info.value.kafka_error_code == 17
    with pytest.raises(InvalidTopicError):
        manager.get_or_create("ok", -1)
    manager.close()


@pytest.mark.parametrize(
    "name, expected",
    [("orders-0", ("orders", 0)), ("my-topic-12", ("my-topic", 12)), ("a.b_c-3", ("a.b_c", 3)),
     ("orders", None), ("orders-", None), ("-0", None), ("orders-01", None), ("orders-x", None),
     ("t-0.abc-delete", None), ("t-0.abc-future", None), ("lost+found", None)],
)
def test_parse_log_dir_name(name: str, expected) -> None:
    assert parse_log_dir_name(name) == expected


def test_topic_overrides_apply_to_new_and_existing_logs(tmp_path: Path) -> None:
    manager = make_manager([tmp_path / "d1"], Clock(), LogConfig())
    log = manager.get_or_create("t", 0, {"segment.bytes": "1000"})
    assert log.config.segment_bytes == 1000
    manager.get_or_create("t", 0, {"segment.bytes": "2000", "cleanup.policy": "delete"})
    assert log.config.segment_bytes == 2000
    assert manager.get_or_create("t", 1).config.segment_bytes == 2000  # remembered per topic
    assert manager.get_or_create("u", 0).config.segment_bytes == 1 << 30
    manager.close()


def test_offline_log_dir_does_not_stop_the_others(tmp_path: Path) -> None:
    clock = Clock()
    good, bad = tmp_path / "good", tmp_path / "bad"
    bad.write_text("a file where a directory should be")
    manager = make_manager([good, bad], clock)
    assert manager.offline_log_dirs == {bad.absolute()}
    assert manager.get_or_create("t", 0).directory.parent == good.absolute()
    manager.close()


def test_duplicate_partition_in_two_dirs_refuses_to_start(tmp_path: Path) -> None:
    from broker.log import LogError

    clock = Clock()
    manager = make_manager([tmp_path / "d1"], clock)
    manager.get_or_create("t", 0).append_as_leader(batch(), 0)
    manager.close()
    (tmp_path / "d2" / "t-0").mkdir(parents=True)
    with pytest.raises(LogError, match="duplicate log directories for t-0"):
        make_manager([tmp_path / "d1", tmp_path / "d2"], clock)


def test_statistics(tmp_path: Path) -> None:
    manager = make_manager([tmp_path / "d1"], Clock())
    log = manager.get_or_create("t", 0)
    log.append_as_leader(batch(3), 0)
    stats = manager.statistics()
    assert (stats.partitions, stats.unflushed_messages) == (1, 3)
    assert stats.size_in_bytes == log.size_in_bytes > 0
    log_stats = log.statistics()
    assert (log_stats.log_end_offset, log_stats.segments, log_stats.offline) == (3, 1, False)
    manager.close()


def test_storage_error_takes_a_log_offline(tmp_path: Path) -> None:
    from broker.log import KafkaStorageError

    manager = make_manager([tmp_path / "d1"], Clock())
    log = manager.get_or_create("t", 0)
    log.append_as_leader(batch(), 0)
    os.close(log.active_segment._log_fd)  # the disk "fails": the next write gets EBADF
    with pytest.raises(KafkaStorageError) as info:
        log.append_as_leader(batch(), 0)
    assert info.value.kafka_error_code == 56
    assert log.is_offline
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    manager.close()
    # a log that failed may hold a torn write: the next start must not skip recovery
    assert not (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).exists()


def test_log_dir_is_locked_while_in_use(tmp_path: Path) -> None:
    from broker.log import LogError

    manager = make_manager([tmp_path / "d1"], Clock())
    with pytest.raises(LogError, match="in use by another broker"):
        make_manager([tmp_path / "d2", tmp_path / "d1"], Clock())
    manager.get_or_create("t", 0).append_as_leader(batch(), 0)
    manager.close()
    manager.close()  # idempotent: must not overwrite the checkpoints with nothing
    assert read_checkpoint(tmp_path / "d1" / RP) == {("t", 0): 2}
    with pytest.raises(LogError):
        manager.get_or_create("t", 1)
    again = make_manager([tmp_path / "d1"], Clock())  # the lock was released
    assert again.get("t", 0).log_end_offset == 2
    again.close()
