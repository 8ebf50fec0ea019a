"""Test-only fault injection for the exactly-once sink (``spark_log.transactions``): kill the
driver at a named point of its commit, or kill / fail a task mid-write. Read from environment
variables that only the fault tests set (``tests/spark/test_spark_exactly_once_faults.py``);
unset, each hook is one ``os.environ`` lookup."""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["TEST_KILL_ENV", "TEST_KILL_PGID_ENV", "TEST_TASK_FAULT_ENV", "test_kill_point", "test_task_fault"]

log = logging.getLogger(__name__)

# "<point>[:<batch>]" makes the driver SIGKILL its whole process group at that point of commit
# (points: before-intent, after-intent, after-first-commit). Read from the environment of the
# process running the driver-side commit; never set it outside the fault tests.
TEST_KILL_ENV = "PYLOG_SPARK_TEST_KILL_AT"
TEST_KILL_PGID_ENV = "PYLOG_SPARK_TEST_KILL_PGID"  # the process group to kill (test-only)
# "<kill|raise>:<batch>:<partition>:<marker file>" makes the first task attempt of that batch and
# partition that finds no marker file create it and then die (SIGKILL of its Python worker) or
# raise, after its rows are sent and before it prepares: a worker lost mid-write.
TEST_TASK_FAULT_ENV = "PYLOG_SPARK_TEST_TASK_FAULT"


def test_kill_point(point: str, batch_id: int) -> None:
    """``TEST_KILL_ENV``: SIGKILL this process group, so the Spark driver (the JVM and its Python
    processes, started in their own session by the test) dies exactly here."""
    wanted = os.environ.get(TEST_KILL_ENV)
    if not wanted:
        return
    name, _, batch = wanted.partition(":")
    if name == point and (not batch or int(batch) == batch_id):
        log.warning("test hook %s: killing the driver's process group at %s of batch %d",
                    TEST_KILL_ENV, point, batch_id)
        # Spark runs the commit in a Python process outside the driver's process group: the
        # test names that group (its driver's session); this process goes down with it.
        group = os.environ.get(TEST_KILL_PGID_ENV)
        if group:
            os.killpg(int(group), signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)


def test_task_fault(batch_id: int, partition_id: int, producer) -> None:
    """``TEST_TASK_FAULT_ENV``: the first attempt of the named task dies or raises mid-write."""
    wanted = os.environ.get(TEST_TASK_FAULT_ENV)
    if not wanted:
        return
    kind, batch, partition, marker = wanted.split(":", 3)
    if int(batch) != batch_id or int(partition) != partition_id:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # an earlier attempt took the fault
    os.close(fd)
    producer.flush()  # the transaction is open at the coordinator and on the partitions
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"test hook {TEST_TASK_FAULT_ENV}: injected task failure")
