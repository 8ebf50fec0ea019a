"""``ZooKeeperProcess``: a real server started, found again through its pid file, and stopped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from kazoo.client import KazooClient

from broker.tools.zookeeper import (
    DEFAULT_SETTINGS,
    ZooKeeperError,
    ZooKeeperInstall,
    ZooKeeperProcess,
    find_free_port,
    find_install,
)

pytestmark = pytest.mark.integration


def test_session_server_is_running_and_serving(zookeeper):
    assert zookeeper.is_running()
    assert int(zookeeper.pid_path.read_text()) == zookeeper.pid
    client = KazooClient(hosts=zookeeper.connect_string)
    client.start(timeout=5)
    try:
        assert "zookeeper" in client.get_children("/")
    finally:
        client.stop()
        client.close()
    config = zookeeper.config_path.read_text().splitlines()
    assert f"clientPort={zookeeper.port}" in config and "clientPortAddress=127.0.0.1" in config


def test_another_process_finds_the_server_by_its_pid_file(zookeeper):
    """What ``pylog cluster status`` does: a fresh object, same directories."""
    other = ZooKeeperProcess(zookeeper.data_dir, zookeeper.port, zookeeper.log_dir)
    assert other.pid == zookeeper.pid
    assert other.is_running()


def test_start_stop_from_another_object(tmp_path):
    """``cluster up`` then ``cluster down`` in separate commands; stopping twice is harmless."""
    started = ZooKeeperProcess(tmp_path / "data", find_free_port(), tmp_path / "log")
    started.start(timeout_s=60)
    pid = started.pid
    stopper = ZooKeeperProcess(tmp_path / "data", started.port, tmp_path / "log")
    try:
        assert stopper.is_running()
        assert stopper.stop() is True
        assert not stopper.is_running()
        assert not stopper.pid_path.exists()
        assert not started.is_running()  # the parent reaps its child
        assert stopper.stop() is False
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        started.stop()
    assert "binding to port" in started.log_path.read_text()  # the server's log reached the file


def test_a_taken_port_is_refused_before_spawning(zookeeper, tmp_path):
    second = ZooKeeperProcess(tmp_path / "data", zookeeper.port, tmp_path / "log")
    with pytest.raises(ZooKeeperError, match=f"127.0.0.1:{zookeeper.port} is already in use"):
        second.start(timeout_s=10)
    assert second.pid is None and not second.is_running()


def test_a_server_that_dies_at_start_reports_its_log(tmp_path):
    java = find_install().java
    broken = ZooKeeperInstall(java, (str(tmp_path / "no-such.jar"),))
    process = ZooKeeperProcess(tmp_path / "data", find_free_port(), tmp_path / "log", install=broken)
    with pytest.raises(ZooKeeperError, match=r"exited with status \d+ while starting(.|\n)*ZooKeeperServerMain"):
        process.start(timeout_s=30)
    assert not process.is_running()
    assert not process.pid_path.exists()


def test_a_stale_pid_file_never_kills_an_unrelated_process(tmp_path):
    """After a reboot the pid in the file may belong to anything; it must not be signalled."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        process = ZooKeeperProcess(tmp_path / "data", find_free_port(), tmp_path / "log")
        process.data_dir.mkdir(parents=True)
        process.pid_path.write_text(f"{bystander.pid}\n")
        assert process.pid == bystander.pid
        assert not process.is_running()
        assert process.stop() is False
        assert bystander.poll() is None  # still alive
        assert not process.pid_path.exists()  # the stale file is cleaned up
    finally:
        bystander.kill()
        bystander.wait()


def test_settings_reach_the_server(tmp_path):
    process = ZooKeeperProcess(
        tmp_path / "data", find_free_port(), tmp_path / "log", settings={**DEFAULT_SETTINGS, "tickTime": "300"}
    )
    process.start(timeout_s=60)
    try:
        assert "tickTime=300" in process.config_path.read_text().splitlines()
        assert "tickTime 300 ms minSessionTimeout 600 ms" in process.log_path.read_text()
    finally:
        process.stop()
