"""The four measurements of ``bench/consumer_groups.py``, each against one system (its bootstrap
or its ``GroupSystems``), each returning a dict of numbers or raising ``ToolFailed``.

- ``rebalance``: 3 members in a stable group (pylog's client, range, 12 partitions), then a 4th
  joins: from the 4th's JoinGroup (its coordinator already found and connected) to the last of
  the 4 members having its new assignment (its ``on_assign`` callback), over the workers'
  shared monotonic clock.
- ``commits``: one ``_groups_worker.py commits`` process (pylog's client, ``commit_async``).
- ``takeover``: ``groups`` x ``partitions`` distinct committed offsets, all in one
  ``__consumer_offsets`` partition (group ids chosen by Kafka's hash), then a clean restart of
  the one broker: from its first ApiVersions answer to the first OffsetFetch answered without
  an error (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR) and with the offsets written, split
  at the first answer that is not NOT_COORDINATOR (before: the broker does not lead the offsets
  partition yet; after: it loads it).
- ``consume``: one ``_groups_worker.py consume`` process, ``assign`` or ``subscribe``.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from _groups_systems import GroupSystems, commit_offsets, connect, cpu_seconds, fetch_offsets
from _sbs_tools import ToolFailed
from broker.client.coordinator import find_coordinator
from broker.client.errors import KafkaError
from broker.client.group_admin import GroupAdmin
from broker.coordinator.group.core import partition_for

__all__ = ["rebalance", "commits", "takeover", "consume", "takeover_groups"]

_WORKER = Path(__file__).resolve().parent / "_groups_worker.py"
_REPO = Path(__file__).resolve().parents[1]
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default of both systems
_STABLE_TIMEOUT_S = 60.0
_TAKEOVER_TIMEOUT_S = 120.0
_FETCH_RETRY_S = 0.01
_NOT_COORDINATOR = 16


class _Workers:
    """Worker processes whose JSON lines land in one queue as ``(name, dict)``."""

    def __init__(self) -> None:
        self.events: queue.Queue = queue.Queue()
        self.processes: list[subprocess.Popen] = []

    def start(self, name: str, args: list[str]) -> None:
        popen = subprocess.Popen([sys.executable, str(_WORKER), *args], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=_REPO)
        self.processes.append(popen)
        threading.Thread(target=self._read, args=(name, popen), daemon=True).start()

    def _read(self, name: str, popen: subprocess.Popen) -> None:
        for line in popen.stdout:
            if line.startswith(b"{"):
                self.events.put((name, json.loads(line)))
        self.events.put((name, {"exited": popen.wait(), "stderr": popen.stderr.read().decode(errors="replace")}))

    def next(self, deadline: float) -> tuple[str, dict]:
        try:
            name, event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ToolFailed("the group members did not report in time") from None
        if "exited" in event:
            raise ToolFailed(f"member {name} exited {event['exited']}: {event['stderr'][-400:]}")
        return name, event

    def stop(self) -> None:
        for popen in self.processes:
            try:
                popen.stdin.close()  # a member leaves the group and exits when its stdin closes
            except OSError:
                pass
        for popen in self.processes:
            try:
                popen.wait(30)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


def rebalance(bootstrap: str, topic: str, partitions: int, group: str) -> dict:
    workers = _Workers()
    member = ["member", "--bootstrap", bootstrap, "--group", group, "--topic", topic]
    try:
        for i in range(3):
            workers.start(f"m{i}", [*member, "--name", f"m{i}"])
        latest: dict[str, dict] = {}
        deadline = time.monotonic() + _STABLE_TIMEOUT_S
        while not _balanced(latest, 3, partitions):
            name, event = workers.next(deadline)
            latest[name] = event
        stable_generation = max(e["generation"] for e in latest.values())
        workers.start("m3", [*member, "--name", "m3", "--announce-join"])
        join_sent = None
        deadline = time.monotonic() + _STABLE_TIMEOUT_S
        while join_sent is None or not _balanced(latest, 4, partitions, after=stable_generation):
            name, event = workers.next(deadline)
            if "join_sent" in event:
                join_sent = event["join_sent"]
            else:
                latest[name] = event
        done = max(e["t"] for e in latest.values())
        return {"rebalance_ms": 1000 * (done - join_sent), "generation": latest["m3"]["generation"],
                "stable_generation": stable_generation}
    finally:
        workers.stop()


def _balanced(latest: dict[str, dict], members: int, partitions: int, after: int = -1) -> bool:
    """Every member reported an assignment of one generation (newer than ``after``), together
    covering every partition once, evenly."""
    if len(latest) < members:
        return False
    generations = {e["generation"] for e in latest.values()}
    if len(generations) != 1 or generations.pop() <= after:
        return False
    owned = sorted(p for e in latest.values() for p in e["assigned"])
    return owned == list(range(partitions)) and all(len(e["assigned"]) == partitions // members
                                                    for e in latest.values())


def commits(bootstrap: str, topic: str, group: str, commits_max: int, warm_up: int, duration_s: float,
            timeout_s: float, broker_pid: int | None = None) -> dict:
    """The worker's numbers, plus the broker's CPU time per commit over the whole run (warm-up
    and the worker's start included: an upper bound)."""
    cpu_before = cpu_seconds(broker_pid)
    result = _run_worker(["commits", "--bootstrap", bootstrap, "--group", group, "--topic", topic,
                          "--commits", str(commits_max), "--warm-up", str(warm_up), "--duration-s", str(duration_s)],
                         timeout_s)
    result["broker_cpu_us_per_commit"] = 1e6 * (cpu_seconds(broker_pid) - cpu_before) / (result["commits"] + warm_up)
    if result["errors"] or result["committed_wrong"]:
        raise ToolFailed(f"{result['errors']} commits failed ({result['first_error']}); "
                         f"committed() disagrees: {result['committed_wrong']}")
    return result


def consume(bootstrap: str, topic: str, group: str, mode: str, records: int, timeout_s: float) -> dict:
    result = _run_worker(["consume", "--bootstrap", bootstrap, "--group", group, "--topic", topic,
                          "--mode", mode, "--records", str(records)], timeout_s)
    if result["timed_out"]:
        raise ToolFailed(f"{mode}: {result['records']} of {records} records consumed")
    return result


def _run_worker(args: list[str], timeout_s: float) -> dict:
    try:
        done = subprocess.run([sys.executable, str(_WORKER), *args], capture_output=True, timeout=timeout_s,
                              cwd=_REPO, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ToolFailed(f"{args[0]} worker did not finish in {timeout_s:.0f} s") from None
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise ToolFailed(f"{args[0]} worker exited {done.returncode}: {done.stderr.decode(errors='replace')[-600:]}")
    return json.loads(lines[-1])


def takeover_groups(count: int, offsets_partition: int = 0) -> list[str]:
    """``count`` group ids that all hash to one ``__consumer_offsets`` partition."""
    groups, n = [], 0
    while len(groups) < count:
        name = f"takeover-{n}"
        if partition_for(name, OFFSETS_PARTITIONS) == offsets_partition:
            groups.append(name)
        n += 1
    return groups


def _offset(group_index: int, partition: int) -> int:
    return 1_000 + group_index + partition


def write_offsets(bootstrap: str, topic: str, groups: list[str], partitions: int) -> float:
    """Commit every (group, partition) once; seconds taken. The coordinator is looked up first
    (both create ``__consumer_offsets`` on the first FindCoordinator)."""
    with GroupAdmin(bootstrap) as admin:
        find_coordinator(admin.cluster, groups[0], timeout_ms=1000 * _TAKEOVER_TIMEOUT_S)
    conn = connect(bootstrap)
    deadline = time.monotonic() + _TAKEOVER_TIMEOUT_S
    # The offsets partition of a new offsets topic is loaded after FindCoordinator answered
    # (Kafka answers COORDINATOR_LOAD_IN_PROGRESS meanwhile): wait until it serves.
    while (code := fetch_offsets(conn, groups[0], topic, [0])[0]) != 0:
        if time.monotonic() > deadline:
            raise ToolFailed(f"the coordinator of {groups[0]} still answers error {code}")
        time.sleep(_FETCH_RETRY_S)
    started = time.monotonic()
    try:
        commit_offsets(conn, [(g, topic, {p: _offset(i, p) for p in range(partitions)})
                              for i, g in enumerate(groups)])
    finally:
        conn.close()
    return time.monotonic() - started


def takeover(systems: GroupSystems, system: str, topic: str, groups: list[str], partitions: int) -> dict:
    """Restart the broker holding the offsets; time the reload (see the module doc)."""
    bootstrap = systems.bootstrap(system)
    probe, index = groups[-1], len(groups) - 1
    expected = {p: _offset(index, p) for p in range(partitions)}
    restart = systems.restart(system)
    pid = systems.broker_pid(system)
    cpu_at_ready = cpu_seconds(pid)
    seen: Counter = Counter()
    deadline = restart.ready + _TAKEOVER_TIMEOUT_S
    conn = None
    coordinating = None  # the first answer that is not NOT_COORDINATOR: the partition is led here
    while time.monotonic() < deadline:
        try:
            conn = conn or connect(bootstrap)
            code, offsets = fetch_offsets(conn, probe, topic, list(range(partitions)))
        except (OSError, KafkaError) as exc:  # not listening yet, or a connection lost
            seen[type(exc).__name__] += 1
            conn = None
            time.sleep(_FETCH_RETRY_S)
            continue
        if code != _NOT_COORDINATOR and coordinating is None:
            coordinating = time.monotonic()
        if code == 0 and offsets == expected:
            answered = time.monotonic()
            cpu_s = cpu_seconds(pid) - cpu_at_ready
            conn.close()
            return {"from_ready_s": answered - restart.ready, "from_spawn_s": answered - restart.spawned,
                    "spawn_to_ready_s": restart.ready - restart.spawned, "broker_cpu_s": cpu_s,
                    "ready_to_coordinator_s": coordinating - restart.ready, "loading_s": answered - coordinating,
                    "answers_before": dict(seen)}
        seen[f"error {code}" if code else "offsets not all there"] += 1
        time.sleep(_FETCH_RETRY_S)
    raise ToolFailed(f"{system}: no good OffsetFetch {_TAKEOVER_TIMEOUT_S:.0f} s after the restart "
                     f"(answers: {dict(seen)})")
