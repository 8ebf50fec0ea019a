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

from spark_log import recover
from spark_log.recover import BATCH_PREFIX_ROOT
from spark_log.transactions import (DEFAULT_COMMIT_LOG_TOPIC, TEST_KILL_ENV, TEST_TASK_FAULT_ENV, TxnSettings,
                                    default_prefix, read_commit_log)

from eos_support import (check_exactly_once, lso_at_hw, open_transactions, produce_keyed, read_committed,
                         txn_overrides)
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


def test_batch_job_driver_killed_in_commit_is_rolled_forward(txn_cluster, tmp_path):
    """df.write exactly-once, driver SIGKILLed after its intent and its first EndTxn: the rest of
    the job's transactions stay open (the LSO holds read_committed readers before them); the
    recovery a user runs (the next batch job's writer runs the same) commits them: all 400 once."""
    bootstrap = txn_cluster.bootstrap
    sink = create_topic(bootstrap, unique("bout"), 2)
    rc = run_driver(bootstrap, "-", sink, str(tmp_path / "unused"), {TEST_KILL_ENV: "after-first-commit:0"},
                    "--batch", "400")
    assert rc == -signal.SIGKILL, f"the hook did not kill the driver (exit {rc})"
    assert open_transactions(bootstrap, BATCH_PREFIX_ROOT), "the job's other transactions were left open"
    assert len(read_committed(bootstrap, sink, settle=False)) < 400
    assert recover.main(["--bootstrap-servers", bootstrap]) == 0
    check_exactly_once(bootstrap, sink, 400, ordered=False)
    assert open_transactions(bootstrap, BATCH_PREFIX_ROOT) == []
    assert lso_at_hw(bootstrap, sink)
    left = read_commit_log(TxnSettings("x", 60_000, DEFAULT_COMMIT_LOG_TOPIC, bootstrap))
    assert not [k for k, r in left.items() if r and r.get("job") == "batch"], "the intent outlived its roll-forward"


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
