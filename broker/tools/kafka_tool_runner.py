"""Kafka's command-line tools in long-lived JVMs: ``run_kafka_tool``'s fast path.

A kafka-* script is a fresh JVM, and most of its time on a busy 2-core machine is start-up: the
peer tier ran ~100 tools, each paying ~0.6 s of CPU (with class data sharing) before it spoke to a
broker. ``KafkaToolRunner`` (conf/apache-kafka/KafkaToolRunner.java, compiled by ``make setup``
beside the jars) runs tool main classes one after another in one JVM, each with its own stdin,
stdout, stderr, exit status and shutdown hooks, as its script would (the Java file says how and
where the illusion ends: a tool that leaves threads behind retires its runner).

This module keeps a small pool of runners, one per concurrent caller, so threads that run tools at
once each get their own. A runner that is not compiled (no ``make setup`` since it was added, or a
copy of the jars elsewhere) is no error: ``run`` returns None and the caller starts a JVM per tool.
``KAFKA_PEER_TOOL_RUNNER=0`` asks for a JVM per tool always (to rule the runner out when a tool
behaves oddly). Runners leave when their stdin closes: at interpreter exit, or when the process
that owns the pipe dies.
"""

from __future__ import annotations

import atexit
import os
import select
import struct
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RUNNER_CLASS", "runner_directory", "run", "statistics"]

RUNNER_CLASS = "KafkaToolRunner"
_IDLE_RUNNERS_MAX = 2  # idle JVMs kept for reuse (~100 MB each); a third concurrent caller starts one
_EXIT_TIMEOUT_S = 60.0  # a runner that records its class archive at exit takes a few seconds
_ANSWER_HEADER = struct.Struct(">i")


def runner_directory(libs: Path) -> Path:
    """Where ``make setup`` compiles the runner: beside the jars, in the cache."""
    return libs.parent / "runner"


class _Runner:
    """One runner JVM: requests on its stdin, answers on a pipe it inherits (its one argument)."""

    def __init__(self, command: list[str], archive_recording: tuple[Path, Path] | None) -> None:
        answers_read, answers_write = os.pipe()
        self.log = tempfile.TemporaryFile()  # the JVM's own stdout/stderr: crash reports, leftovers
        self.key: tuple = ()
        try:
            self.process = subprocess.Popen(
                [*command, str(answers_write)], stdin=subprocess.PIPE, stdout=self.log,
                stderr=subprocess.STDOUT, pass_fds=(answers_write,))
        finally:
            os.close(answers_write)
        self.answers = answers_read
        self.archive_recording = archive_recording  # (recording, archive): renamed once it exits
        self.pending = b""

    def send(self, command: Sequence[str], input: bytes | None) -> None:
        """The request; BrokenPipeError if the runner is gone (then the tool has not started)."""
        request = [struct.pack(">i", len(command))]
        for part in command:
            encoded = part.encode()
            request += [struct.pack(">i", len(encoded)), encoded]
        request.append(struct.pack(">i", -1 if input is None else len(input)))
        request.append(input or b"")
        self.process.stdin.write(b"".join(request))
        self.process.stdin.flush()

    def receive(self, timeout_s: float) -> tuple[int, bytes, bytes, bool]:
        """(exit status, stdout, stderr, reusable); TimeoutError at the deadline, EOFError if the
        runner died."""
        deadline = time.monotonic() + timeout_s
        status = self._int(deadline)
        stdout = self._exactly(self._int(deadline), deadline)
        stderr = self._exactly(self._int(deadline), deadline)
        reusable = self._exactly(1, deadline) == b"\x01"
        return status, stdout, stderr, reusable

    def _int(self, deadline: float) -> int:
        return _ANSWER_HEADER.unpack(self._exactly(4, deadline))[0]

    def _exactly(self, count: int, deadline: float) -> bytes:
        while len(self.pending) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.answers], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                raise EOFError
            self.pending += chunk
        taken, self.pending = self.pending[:count], self.pending[count:]
        return taken

    def log_tail(self, limit: int = 4000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-limit:]

    def close(self, kill: bool = False) -> None:
        """Close its stdin (it leaves after the tool in hand) or kill it; reap it; keep the class
        archive it recorded, renamed into place whole."""
        try:
            if kill:
                self.process.kill()
            else:
                self.process.stdin.close()
            try:
                self.process.wait(_EXIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        finally:
            os.close(self.answers)
            self.log.close()
            if self.archive_recording is not None:
                recording, archive = self.archive_recording
                if recording.exists() and not kill:
                    recording.replace(archive)
                recording.unlink(missing_ok=True)


class _Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Runner] = []

    def take(self, key: tuple, start) -> _Runner:
        with self.lock:
            while self.idle:
                runner = self.idle.pop()
                if runner.key == key and runner.process.poll() is None:
                    return runner
                threading.Thread(target=runner.close, daemon=True).start()
        runner = start()
        runner.key = key
        return runner

    def give_back(self, runner: _Runner) -> None:
        with self.lock:
            if len(self.idle) < _IDLE_RUNNERS_MAX:
                self.idle.append(runner)
                return
        runner.close()

    def close_all(self) -> None:
        with self.lock:
            runners, self.idle = self.idle, []
        for runner in runners:
            runner.close()


_POOL = _Pool()
atexit.register(_POOL.close_all)
_counts = {"tool_runs": 0, "runners_started": 0, "runners_retired": 0, "runners_killed": 0}
_counts_lock = threading.Lock()
_last_retirement = ""  # the retired runner's own log: which tool left which threads


def _count(name: str) -> None:
    with _counts_lock:
        _counts[name] += 1


def statistics() -> dict[str, int | str]:
    """Tools run in runners, runners started, retired (a tool left threads running; the last
    retired runner's log names them) and killed (a tool past its deadline, or a runner that died)."""
    with _counts_lock:
        return dict(_counts, runners_idle=len(_POOL.idle), last_retirement=_last_retirement)


def run(java_command, classpath: str, libs: Path, main_class: str, args: Sequence[str], *,
        input: bytes | None, timeout_s: float, archive: Path | None, quiet_cds: Sequence[str]
        ) -> subprocess.CompletedProcess | None:
    """Run ``main_class`` with ``args`` in a pooled runner, as ``subprocess.run`` would report a
    JVM of its own (``subprocess.TimeoutExpired`` at the deadline; the runner is then killed).
    None when no runner can serve (not compiled, or turned off): start a JVM for the tool instead.

    ``java_command(main_class, args, jvm_options)`` builds a java command line (KafkaInstall's);
    ``archive`` is the runner's class data archive: mapped if it exists, else recorded at exit.
    """
    classes = runner_directory(libs)
    if os.environ.get("KAFKA_PEER_TOOL_RUNNER") == "0" or not (classes / f"{RUNNER_CLASS}.class").is_file():
        return None

    def start() -> _Runner:
        options, recording = [], None
        if archive is not None and archive.exists():
            options = [f"-XX:SharedArchiveFile={archive}", *quiet_cds]
        elif archive is not None:
            recording = archive.with_name(f"{archive.name}.{uuid.uuid4().hex}.tmp")
            options = [f"-XX:ArchiveClassesAtExit={recording}", *quiet_cds]
        # java.lang opened: the runner closes Admin clients a tool left open, found from their threads.
        command = java_command(RUNNER_CLASS, [], [*options, "--add-opens", "java.base/java.lang=ALL-UNNAMED"])
        command[command.index("-cp") + 1] = f"{classes}{os.pathsep}{classpath}"
        _count("runners_started")
        return _Runner(command, (recording, archive) if recording is not None else None)

    command = [main_class, *args]
    runner = _POOL.take((classpath, str(archive)), start)
    try:
        runner.send(command, input)
    except BrokenPipeError:  # an idle runner that died: the tool never started, so a fresh one runs it
        _count("runners_killed")
        runner.close(kill=True)
        runner = _POOL.take((classpath, str(archive)), start)
        runner.send(command, input)
    try:
        status, stdout, stderr, reusable = runner.receive(timeout_s)
    except TimeoutError:
        _count("runners_killed")
        runner.close(kill=True)
        raise subprocess.TimeoutExpired(command, timeout_s) from None
    except EOFError as error:
        _count("runners_killed")
        tail = runner.log_tail()
        runner.close(kill=True)
        raise OSError(f"the Kafka tool runner died running {main_class}: {tail}") from error
    except BaseException:
        runner.close(kill=True)
        raise
    _count("tool_runs")
    if reusable:
        _POOL.give_back(runner)
    else:
        global _last_retirement
        _count("runners_retired")
        _last_retirement = runner.log_tail(1000).strip()
        runner.close()
    return subprocess.CompletedProcess(command, status, stdout, stderr)
