"""Run a standalone ZooKeeper server as a background process, for ``pylog cluster up`` and tests.

Files, all under directories the caller chooses:

- ``<data_dir>/zoo.cfg``: written from ``conf/zookeeper.properties``-style settings, with
  ``dataDir`` and ``clientPort`` replaced by this process's.
- ``<data_dir>/zookeeper_server.pid``: the java process id (zkServer.sh keeps it there too). A
  later ``pylog cluster down`` stops the server from this file alone; before signalling, it
  checks that the pid still belongs to a ZooKeeper started with this zoo.cfg, so a stale file
  never kills an unrelated process that reused the pid.
- ``<log_dir>/zookeeper.out``: the server's stdout and stderr (its log, at INFO).

The server runs detached (its own session), so it outlives the command that started it and a
Ctrl-C in the terminal does not reach it. ``start`` returns only once a client can open a
session, which is later than the port accepting connections (the database loads in between).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

__all__ = [
    "ZooKeeperError",
    "ZooKeeperInstall",
    "ZooKeeperProcess",
    "DEFAULT_SETTINGS",
    "find_install",
    "find_free_port",
    "reserve_free_port",
    "load_properties",
    "render_zoo_cfg",
]

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
DEBIAN_JAR = Path("/usr/share/java/zookeeper.jar")
DEBIAN_CONF_DIR = Path("/etc/zookeeper/conf")  # holds log4j.properties
# Debian's jar lists slf4j-api only; without a binding (next to it) the server logs nothing at all.
DEBIAN_LOG_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
# Same values and meanings as conf/zookeeper.properties, for callers that pass no settings.
DEFAULT_SETTINGS = {
    "tickTime": "2000",
    "clientPortAddress": "127.0.0.1",
    "admin.enableServer": "false",
    "maxClientCnxns": "60",
}
_INSTALL_HINT = (
    "run `make setup` (it installs Debian's zookeeper and default-jre-headless packages), "
    "or set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper distribution"
)
_LOG_TAIL_LINES = 20
# kazoo logs every refused connection while the server boots; those are expected, so the
# readiness probe gets a logger of its own that goes nowhere.
_PROBE_LOG = logging.getLogger(__name__ + ".probe")
_PROBE_LOG.propagate = False
_PROBE_LOG.addHandler(logging.NullHandler())


class ZooKeeperError(OSError):
    """ZooKeeper could not be found, started or stopped; the message says what to do."""


@dataclass(frozen=True)
class ZooKeeperInstall:
    """How to launch the server: the java binary and the class path."""

    java: str
    classpath: tuple[str, ...]


def find_install(env: Mapping[str, str] | None = None, debian_jar: Path = DEBIAN_JAR,
                 debian_conf_dir: Path = DEBIAN_CONF_DIR) -> ZooKeeperInstall:
    """``$ZOOKEEPER_HOME`` (``lib/*.jar`` and ``conf/``) if set, else Debian's package."""
    env = os.environ if env is None else env
    java = _find_java(env)
    home = env.get("ZOOKEEPER_HOME")
    if home:
        jars = sorted(str(p) for p in Path(home, "lib").glob("*.jar")) + sorted(
            str(p) for p in Path(home).glob("zookeeper-*.jar"))
        if not any(Path(j).name.startswith("zookeeper") for j in jars):
            raise ZooKeeperError(f"ZOOKEEPER_HOME={home} holds no zookeeper jar in lib/; {_INSTALL_HINT}")
        return ZooKeeperInstall(java, (*jars, str(Path(home, "conf"))))
    if not debian_jar.is_file():
        raise ZooKeeperError(f"ZooKeeper is not installed (no ZOOKEEPER_HOME, no {debian_jar}); {_INSTALL_HINT}")
    log_jars = [str(debian_jar.parent / j) for j in DEBIAN_LOG_JARS if (debian_jar.parent / j).is_file()]
    return ZooKeeperInstall(java, (str(debian_jar), *log_jars, str(debian_conf_dir)))


def _find_java(env: Mapping[str, str]) -> str:
    java_home = env.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").is_file():
        return str(Path(java_home, "bin", "java"))
    java = shutil.which("java", path=env.get("PATH", os.defpath))
    if java is None:
        raise ZooKeeperError(f"no java found (JAVA_HOME unset and no java on PATH); {_INSTALL_HINT}")
    return java


def load_properties(path: str | Path) -> dict[str, str]:
    """``key=value`` lines of a Java properties file; ``#``/``!`` comments and blank lines
    skipped. Line continuations and escapes are refused rather than misread."""
    settings = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip() or line.endswith("\\"):
            raise ValueError(f"{path}:{number}: expected key=value, got {raw!r}")
        settings[key.strip()] = value.strip()
    return settings


def render_zoo_cfg(settings: Mapping[str, str], data_dir: str | Path, port: int) -> str:
    """zoo.cfg text: defaults, then ``settings``, then this process's dataDir and clientPort."""
    merged = {**DEFAULT_SETTINGS, **settings, "dataDir": str(data_dir), "clientPort": str(port)}
    for key, value in merged.items():
        if "\n" in key or "\n" in str(value) or "=" in key:
            raise ValueError(f"zookeeper setting {key!r}={value!r} cannot be written to zoo.cfg")
    return "".join(f"{key}={value}\n" for key, value in merged.items())


def find_free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it); for tests and ``cluster up``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def reserve_free_port(host: str = "127.0.0.1") -> int:
    """A free port kept from other processes until a server binds it (for a minute at most).

    ``find_free_port``'s port is free for anyone again once its probe closes, and a launcher
    binds it seconds later (a JVM starts slowly on a loaded machine): another test's probe, or a
    client's outgoing connection, can take it in between. Here the port ends in TIME_WAIT (an
    accepted connection that closed first), which Linux keeps for 60 s: bind(0) and connect()
    skip such a port, and a bind without SO_REUSEADDR fails, while a server binding with
    SO_REUSEADDR takes it at once (Java's ServerSocketChannel, ZooKeeper's and Kafka's
    listeners, and pylog's asyncio server all do).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, 0))
        listener.listen(1)
        address = listener.getsockname()
        with socket.create_connection(address) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the server side closes first: its end of the port holds TIME_WAIT
            client.recv(1)  # the FIN arrived, so the close above completed its half
        return address[1]


def _accepts_tcp(host: str, port: int, timeout_s: float = 0.25) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _opens_session(connect_string: str, timeout_s: float) -> bool:
    client = KazooClient(hosts=connect_string, timeout=max(timeout_s, 4.0), logger=_PROBE_LOG)
    try:
        client.start(timeout=timeout_s)
        return True
    except KazooTimeoutError:
        return False
    finally:
        client.stop()
        client.close()


class ZooKeeperProcess:
    """One standalone ZooKeeper server on ``127.0.0.1:port`` (see the module docstring)."""

    def __init__(self, data_dir: str | Path, port: int, log_dir: str | Path,
                 settings: Mapping[str, str] | None = None, install: ZooKeeperInstall | None = None,
                 heap_max_mb: int = 256) -> None:
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.port = port
        self.settings = dict(DEFAULT_SETTINGS if settings is None else settings)
        self.host = self.settings.get("clientPortAddress", "127.0.0.1")
        self.heap_max_mb = heap_max_mb
        self.config_path = self.data_dir / "zoo.cfg"
        self.pid_path = self.data_dir / "zookeeper_server.pid"
        self.log_path = self.log_dir / "zookeeper.out"
        self._install = install
        self._popen: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's pid: the child we started, else the pid file's (None if neither)."""
        if self._popen is not None:
            return self._popen.pid
        try:
            return int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def is_running(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        pid = self.pid
        return pid is not None and _is_zookeeper(pid, self.config_path)

    def start(self, timeout_s: float = 30.0) -> None:
        """Spawn the server and wait until a client can open a session, at most ``timeout_s``."""
        if self.is_running():
            raise ZooKeeperError(f"ZooKeeper already runs with pid {self.pid} ({self.pid_path})")
        if _accepts_tcp(self.host, self.port):
            raise ZooKeeperError(f"{self.host}:{self.port} is already in use; choose another port")
        install = self._install or find_install()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(render_zoo_cfg(self.settings, self.data_dir.resolve(), self.port))
        command = [
            install.java, f"-Xmx{self.heap_max_mb}m", f"-Dzookeeper.log.dir={self.log_dir.resolve()}",
            "-Dzookeeper.root.logger=INFO,CONSOLE", "-cp", os.pathsep.join(install.classpath),
            MAIN_CLASS, str(self.config_path.resolve()),
        ]
        with open(self.log_path, "ab") as log_file:
            self._popen = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                cwd=self.data_dir, start_new_session=True,
            )
        self.pid_path.write_text(f"{self._popen.pid}\n")
        try:
            self._wait_until_serving(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _wait_until_serving(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self._popen.poll()
            if code is not None:
                raise ZooKeeperError(
                    f"ZooKeeper exited with status {code} while starting; {self.log_path} ends:\n{self._log_tail()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ZooKeeperError(
                    f"ZooKeeper did not accept a client session on {self.connect_string} within "
                    f"{timeout_s} s; {self.log_path} ends:\n{self._log_tail()}"
                )
            if _opens_session(self.connect_string, min(1.0, remaining)):
                return

    def stop(self, timeout_s: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL if the server is still up after ``timeout_s``. True if it was
        running. Safe to call twice, or from another process through the pid file."""
        pid = self.pid
        was_running = self.is_running()
        if was_running and pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not self._wait_for_exit(timeout_s):
                os.kill(pid, signal.SIGKILL)
                self._wait_for_exit(timeout_s)
        if self._popen is not None:
            self._popen.wait(timeout=timeout_s)  # reap the child, or it stays a zombie
        self.pid_path.unlink(missing_ok=True)
        return was_running

    def _wait_for_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.is_running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(lines[-_LOG_TAIL_LINES:])


def _is_zookeeper(pid: int, config_path: Path) -> bool:
    """True if ``pid`` is a live (not zombie) ZooKeeper server started with ``config_path``."""
    proc = Path("/proc", str(pid))
    if not proc.exists():
        if Path("/proc/self").exists():
            return False
        try:  # no /proc (macOS): all we can tell is whether the pid exists
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return False
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z" and MAIN_CLASS.encode() in argv and str(config_path.resolve()).encode() in argv
