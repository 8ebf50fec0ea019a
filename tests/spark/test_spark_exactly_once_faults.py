"""Exactly-once under faults (issue 16): the driver SIGKILLed before the commit intent and between
the intent and the last commit, a Python worker SIGKILLed mid-write, a task failure with
spark.speculation on. Each run is a driver process (``eos_driver.py``) started in its own session
with a test hook in its environment, then restarted from its checkpoint without it; the oracle
reads the output under read_committed: every input record once, in order per key, nothing open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spark_log.transactions import TEST_KILL_ENV, TEST_TASK_FAULT_ENV, default_prefix

from eos_support import check_exactly_once, lso_at_hw, open_transactions, produce_keyed, txn_overrides
from spark_helpers import create_topic, unique

DRIVER = Path(__file__).resolve().parent / "eos_driver.py"
DRIVER_TIMEOUT_S = 240
RECORDS = 2400  # 2 source partitions, 600 per partition and batch: 2 batches


@pytest.fixture(scope="module")
def txn_cluster(cluster_factory):
    return cluster_factory.make(1, overrides=txn_overrides(1))


def run_driver(bootstrap, source, sink, checkpoint, env_extra=None, *extra) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (TEST_KILL_ENV, TEST_TASK_FAULT_ENV)}
    env.update(env_extra or {})
    proc = subprocess.Popen([sys.executable, str(DRIVER), bootstrap, source, sink, checkpoint, *extra],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=DRIVER_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode not in (0, -signal.SIGKILL):
        print(err.decode(errors="replace")[-3000:])
    return proc.returncode


def topics(bootstrap):
    source, sink = create_topic(bootstrap, unique("src"), 2), create_topic(bootstrap, unique("out"), 2)
    produce_keyed(bootstrap, source, RECORDS)
    return source, sink


@pytest.mark.parametrize("point", ["before-intent", "after-first-commit"])
def test_driver_killed_in_commit_then_restarted(txn_cluster, tmp_path, point):
    bootstrap = txn_cluster.bootstrap
    source, sink = topics(bootstrap)
    checkpoint = str(tmp_path / "ck")
    rc = run_driver(bootstrap, source, sink, checkpoint, {TEST_KILL_ENV: f"{point}:1"})
    assert rc == -signal.SIGKILL, f"the hook did not kill the driver (exit {rc})"
    prefix = default_prefix(checkpoint)
    assert open_transactions(bootstrap, prefix + "-b1-"), "batch 1's prepared transactions were left open"
    assert run_driver(bootstrap, source, sink, checkpoint) == 0
    check_exactly_once(bootstrap, sink, RECORDS)
    assert open_transactions(bootstrap, prefix) == []
    assert lso_at_hw(bootstrap, sink)


@pytest.mark.parametrize("fault,extra", [("kill", ()), ("raise", ("--speculation",))])
def test_task_lost_mid_write_is_retried_and_its_transaction_aborted(txn_cluster, tmp_path, fault, extra):
    bootstrap = txn_cluster.bootstrap
    source, sink = topics(bootstrap)
    checkpoint = str(tmp_path / "ck")
    hook = {TEST_TASK_FAULT_ENV: f"{fault}:1:0:{tmp_path / 'fault-taken'}"}
    assert run_driver(bootstrap, source, sink, checkpoint, hook, *extra) == 0
    assert (tmp_path / "fault-taken").exists(), "the fault hook never ran"
    check_exactly_once(bootstrap, sink, RECORDS)
    assert open_transactions(bootstrap, default_prefix(checkpoint)) == []
    assert lso_at_hw(bootstrap, sink)
