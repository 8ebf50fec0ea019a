"""A throwaway local cluster for benchmarks: one ZooKeeper and N pylog brokers on loopback.

``bench/client_produce_consume.py`` and ``bench/e2e_latency.py`` use it when no
``--bootstrap-server`` is given, so a benchmark is one command. Everything lives under one
temporary directory that is removed on exit; processes are stopped (SIGTERM, then SIGKILL) by
their own pids. Not for production use: ``pylog cluster up`` is the operator's tool.

``broker_root`` (or the ``PYLOG_BROKER_ROOT`` environment variable) runs the brokers from another
source tree, e.g. a pinned release, so a client change is measured against a fixed broker.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.tools.zookeeper import DEFAULT_SETTINGS, ZooKeeperProcess, reserve_free_port

__all__ = ["LocalCluster"]

_REPO_ROOT = Path(__file__).resolve().parents[2]
_START_TIMEOUT_S = 60.0


def _answers_api_versions(port: int) -> bool:
    import socket
    import struct

    request = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            return len(sock.recv(8)) > 0
    except OSError:
        return False


class LocalCluster:
    """``with LocalCluster(brokers=1, overrides={...}) as cluster: cluster.bootstrap``."""

    def __init__(self, brokers: int = 1, overrides: dict[str, str] | None = None,
                 root: str | Path | None = None, broker_root: str | Path | None = None) -> None:
        broker_root = broker_root or os.environ.get("PYLOG_BROKER_ROOT")
        self.broker_root = Path(broker_root) if broker_root else _REPO_ROOT
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="pylog-perf-")) if root is None else Path(root)
        self.broker_count = brokers
        self.overrides = dict(overrides or {})
        self.zookeeper: ZooKeeperProcess | None = None
        self.processes: list[subprocess.Popen] = []
        self.ports: list[int] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    @property
    def broker_pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def start(self) -> "LocalCluster":
        settings = {**DEFAULT_SETTINGS, "tickTime": "500"}
        self.zookeeper = ZooKeeperProcess(self.root / "zk", reserve_free_port(), self.root / "zk-log",
                                          settings=settings)
        try:
            self.zookeeper.start(timeout_s=_START_TIMEOUT_S)
            for broker_id in range(1, self.broker_count + 1):
                self._start_broker(broker_id)
        except BaseException:
            self.stop()  # nothing half-started is left behind
            raise
        return self

    def _start_broker(self, broker_id: int) -> None:
        port = reserve_free_port()
        directory = self.root / f"broker-{broker_id}"
        directory.mkdir(parents=True)
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(directory / "data"),
            "zookeeper.connect": f"{self.zookeeper.connect_string}/pylog-perf",
            "zookeeper.session.timeout.ms": "6000",
            **self.overrides,
        }
        config = directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        with open(directory / "broker.log", "ab") as log_file:
            popen = subprocess.Popen([sys.executable, "-m", "broker.server", "--config", str(config)],
                                     stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                     cwd=self.broker_root, start_new_session=True)
        self.processes.append(popen)
        self.ports.append(port)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not _answers_api_versions(port):
            if popen.poll() is not None or time.monotonic() > deadline:
                tail = (directory / "broker.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"broker {broker_id} did not start:\n{tail}")
            time.sleep(0.05)

    def stop(self) -> None:
        for popen in self.processes:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        for popen in self.processes:
            try:
                popen.wait(20)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(10)
        self.processes.clear()
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
