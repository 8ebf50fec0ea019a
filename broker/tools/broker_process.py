"""One pylog broker as a background process, for ``pylog cluster up`` / ``down`` / ``status``.

Files, all paths chosen by the caller (``broker.tools.cluster`` puts them under the cluster
directory):

- ``config_path``: the broker's ``server.properties``, rendered from a template by
  ``render_properties``. The process is ``python -m broker.server --config <config_path>``.
- ``pid_path``: the process id, one decimal line. Written after the spawn, removed by ``stop``.
- ``log_path``: the process's stdout and stderr (its log), appended to across restarts.

A pid file can outlive its process (a crash, a reboot) and the pid can be reused by an unrelated
program. Before a pid counts as this broker, ``/proc/<pid>/cmdline`` must name the
``broker.server`` module *and* this broker's config path, and the process must not be a zombie;
so ``stop`` never signals a stranger, and a stale file just means "not running".

The process runs in its own session (``start_new_session``): it outlives the command that
started it and a Ctrl-C in that terminal does not reach it. ``SIGTERM`` is its clean shutdown.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import broker
from broker.wire import ApiKey, ApiVersionsRequest, WireError, decode_response, encode_request, with_size_prefix

__all__ = [
    "BrokerProcess",
    "answers_api_versions",
    "is_broker_process",
    "is_process_alive",
    "port_in_use",
    "render_properties",
    "stop_brokers",
]

BROKER_MODULE = "broker.server"
# The source tree holding the ``broker`` package: put on the child's PYTHONPATH so
# ``python -m broker.server`` works from any working directory, installed or not.
_SOURCE_ROOT = Path(broker.__file__).resolve().parent.parent
_SIZE = struct.Struct(">i")
_PROBE_RESPONSE_BYTES_MAX = 1 << 20  # an ApiVersions answer is a few hundred bytes
_PROPERTY_LINE = re.compile(r"^\s*([^#!=:\s]+)\s*[=:\s]")


def render_properties(template: str, values: Mapping[str, str], header: str = "") -> str:
    """``template`` (a ``.properties`` text) with each key of ``values`` set to its value.

    A key already in the template keeps its place and comment (its first ``key=value`` line is
    rewritten, later duplicates are commented out so they cannot win); the others are appended
    at the end in ``values`` order. Values are checked to fit on one line."""
    for key, value in values.items():
        if not key or any(c in key for c in "=:#! \t\r\n") or any(c in value for c in "\r\n"):
            raise ValueError(f"property {key!r}={value!r} cannot be written to a properties file")
    seen: set[str] = set()
    lines = []
    for line in template.splitlines():
        match = _PROPERTY_LINE.match(line)
        key = match.group(1) if match else None
        if key in values:
            lines.append(f"{key}={values[key]}" if key not in seen else f"# (overridden) {line}")
            seen.add(key)
        else:
            lines.append(line)
    missing = [key for key in values if key not in seen]
    if missing:
        lines += ["", "# Set by pylog cluster up (--set and the cluster's own values)."]
        lines += [f"{key}={values[key]}" for key in missing]
    return header + "\n".join(lines) + "\n"


def is_process_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie (an exited child nobody reaped yet)."""
    try:
        stat = Path("/proc", str(pid), "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return _exists_by_signal(pid)
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _exists_by_signal(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_broker_process(pid: int, config_path: Path) -> bool:
    """True if ``pid`` is a live ``python -m broker.server`` started with ``config_path``."""
    try:
        argv = Path("/proc", str(pid), "cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    except OSError:
        return _exists_by_signal(pid)  # no /proc (macOS): all we can tell is that it exists
    wanted = str(config_path.resolve()).encode()
    return BROKER_MODULE.encode() in argv and wanted in argv and is_process_alive(pid)


def port_in_use(host: str, port: int) -> bool:
    """True if a listening socket holds ``host:port``: binding it (with SO_REUSEADDR, as the
    broker binds) fails. A port in TIME_WAIT only is free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def answers_api_versions(host: str, port: int, timeout_s: float = 1.0, ssl_context=None) -> bool:
    """True if ``host:port`` answers an ApiVersions v0 request without error: the broker has
    joined the cluster and serves (it binds earlier, but listens only once it is ready).
    ``ssl_context``: a TLS listener (a SASL listener answers ApiVersions before authentication)."""
    request = with_size_prefix(encode_request(ApiKey.API_VERSIONS, 0, 1, "pylog-cluster", ApiVersionsRequest()))
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            sock = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context is not None else raw
            sock.sendall(request)
            (size,) = _SIZE.unpack(_recv_exactly(sock, 4))
            if not 0 < size <= _PROBE_RESPONSE_BYTES_MAX:
                return False
            frame = _recv_exactly(sock, size)
        correlation_id, response = decode_response(ApiKey.API_VERSIONS, 0, frame)
    except (OSError, WireError, EOFError):  # ssl.SSLError is an OSError
        return False
    return correlation_id == 1 and response.error_code == 0


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise EOFError(f"connection closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class BrokerProcess:
    """Broker ``broker_id`` listening on ``host:port``, run from ``config_path``."""

    broker_id: int
    host: str
    port: int
    config_path: Path
    pid_path: Path
    log_path: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def recorded_pid(self) -> int | None:
        """The pid file's content; None when there is no file or it is not a number."""
        try:
            return int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def running_pid(self) -> int | None:
        """The pid of this broker if it runs (the pid file's, checked against /proc), else None."""
        pid = self.recorded_pid()
        return pid if pid is not None and is_broker_process(pid, self.config_path) else None

    def has_stale_pid_file(self) -> bool:
        return self.pid_path.exists() and self.running_pid() is None

    def start(self, python: str = sys.executable) -> subprocess.Popen:
        """Spawn the broker in its own session, log appended to ``log_path``; returns at once
        (see ``answers_api_versions`` for readiness)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_SOURCE_ROOT), env.get("PYTHONPATH")) if p)
        command = [python, "-m", BROKER_MODULE, "--config", str(self.config_path.resolve())]
        with open(self.log_path, "ab") as log_file:
            popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                     stderr=subprocess.STDOUT, cwd=self.config_path.parent,
                                     env=env, start_new_session=True)
        self.pid_path.write_text(f"{popen.pid}\n")
        return popen

    def signal(self, signum: int) -> bool:
        """Send ``signum`` if this broker runs; False if it does not (or just exited)."""
        pid = self.running_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return False
        return True

    def wait_for_exit(self, pid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while is_broker_process(pid, self.config_path):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def log_last_line(self) -> str:
        """The last non-blank line of the log (a failed start ends with its reason)."""
        try:
            with open(self.log_path, "rb") as log_file:
                log_file.seek(max(0, log_file.seek(0, os.SEEK_END) - 8192))
                lines = log_file.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            return ""
        return next((line.strip() for line in reversed(lines) if line.strip()), "")


def stop_brokers(processes: list[BrokerProcess], timeout_s: float) -> dict[int, str]:
    """Stop every broker of ``processes`` together: SIGTERM to all, wait up to ``timeout_s``
    for all, SIGKILL the ones still running (and wait again). Pid files are removed. Returns,
    per broker id, ``"stopped"``, ``"killed"``, ``"not running"`` or ``"stale pid file"``."""
    outcomes: dict[int, str] = {}
    running: dict[int, tuple[BrokerProcess, int]] = {}
    for process in processes:
        pid = process.running_pid()
        if pid is None:
            outcomes[process.broker_id] = "stale pid file" if process.pid_path.exists() else "not running"
        elif process.signal(signal.SIGTERM):
            running[process.broker_id] = (process, pid)
        else:
            outcomes[process.broker_id] = "stopped"  # it exited between the check and the signal
    deadline = time.monotonic() + timeout_s
    for broker_id, (process, pid) in running.items():
        if process.wait_for_exit(pid, max(0.0, deadline - time.monotonic())):
            outcomes[broker_id] = "stopped"
        else:
            process.signal(signal.SIGKILL)
            process.wait_for_exit(pid, timeout_s)
            outcomes[broker_id] = "killed"
    for process in processes:
        process.pid_path.unlink(missing_ok=True)
    return outcomes
