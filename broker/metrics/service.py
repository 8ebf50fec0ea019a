"""``MetricsService``: the asyncio shell of observability (see ``broker.metrics``).

Three loops in one task group, none of them on a request's path:

- **refresh**, every ``metrics.snapshot.interval.ms``: build the state snapshot on the loop
  (``state.broker_state``, plain data), then render the Prometheus exposition and the status JSON
  on a worker thread (the slow part), and swap the rendered bytes in.
- **end offsets**, every ``metrics.lag.interval.ms``: the lag of a group needs the high watermark
  of every partition it committed; for partitions led by other brokers, one ListOffsets
  (latest, read_uncommitted) per leader, over a connection kept open.
- **http**: a child process (``broker.metrics.http_process``) serves the last rendered bytes,
  which the refresh writes to files in a private directory (replaced atomically): a scrape costs
  the broker nothing, not even an accept on its event loop.

The request counters (``RequestMetrics``) are updated by the dispatcher itself, per request.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from prometheus_client import CollectorRegistry, generate_latest

from broker.metrics.collector import SnapshotCollector
from broker.metrics.config import MetricsConfig
from broker.metrics.requests import RequestMetrics
from broker.metrics.state import LAG_ROWS_MAX, broker_state
from broker.wire import ApiKey, ListOffsetsRequest

__all__ = ["MetricsService"]

logger = logging.getLogger(__name__)

_LATEST = -1  # ListOffsets timestamp: the high watermark for read_uncommitted
_LIST_OFFSETS_VERSION = 7
CHILD_START_TIMEOUT_S = 60.0  # a cold interpreter on a loaded machine
CHILD_STOP_TIMEOUT_S = 5.0


class MetricsService:
    def __init__(self, config: MetricsConfig, sources: Callable[[], dict], now_ms: Callable[[], int],
                 connect: Callable[[str, int], object] | None = None) -> None:
        """``sources()`` returns ``broker_state``'s keyword arguments except ``end_offsets``;
        ``connect(host, port)`` makes an inter-broker connection (for remote end offsets)."""
        self.config = config
        self._sources = sources
        self._now_ms = now_ms
        self._connect = connect
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = RequestMetrics(self.registry)
        self.collector = SnapshotCollector()
        self.registry.register(self.collector)
        self.remote_end_offsets: dict[tuple[str, int], int] = {}
        self._connections: dict[int, object] = {}
        self.refreshed = asyncio.Event()  # set after each refresh (tests wait on it)
        self._dir: Path | None = None
        self._child: asyncio.subprocess.Process | None = None
        self.port: int | None = None

    async def start(self) -> None:
        """Start the HTTP child and wait until it has bound the port (before the broker serves
        Kafka: a port in use fails the broker's start)."""
        self._dir = Path(tempfile.mkdtemp(prefix="pylog-metrics-"))
        _write(self._dir, b"", b"{}")
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        self._child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "broker.metrics.http_process", "--host", self.config.host,
            "--port", str(self.config.port), "--dir", str(self._dir), "--parent-pid", str(os.getpid()),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env)
        try:
            line = await asyncio.wait_for(self._child.stdout.readline(), CHILD_START_TIMEOUT_S)
        except asyncio.TimeoutError:
            line = b""
        if not line.startswith(b"LISTENING "):
            error = (await self._child.stderr.read()).decode(errors="replace").strip() if line == b"" else line
            await self.close()
            raise OSError(f"the metrics endpoint did not start: {error or 'no answer'}")
        self.port = int(line.split()[1])
        logger.info("metrics and status page on http://%s:%d/ (pid %d)", self.config.host, self.port,
                    self._child.pid)

    async def run(self) -> None:
        """The refresh loops, until cancelled (``start`` first)."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._every(self.config.snapshot_interval_ms, self.refresh), name="metrics-refresh")
                if self._connect is not None:
                    group.create_task(self._every(self.config.lag_interval_ms, self.fetch_end_offsets),
                                      name="metrics-end-offsets")
        finally:
            await self.close()

    async def close(self) -> None:
        child, self._child = self._child, None
        if child is not None and child.returncode is None:
            child.terminate()
            try:
                await asyncio.wait_for(child.wait(), CHILD_STOP_TIMEOUT_S)
            except asyncio.TimeoutError:
                child.kill()
                await child.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    async def _every(self, interval_ms: int, job) -> None:
        while True:
            try:
                await job()
            except Exception:  # noqa: BLE001 - observability must not stop the broker
                logger.exception("metrics: %s failed", getattr(job, "__name__", job))
            await asyncio.sleep(interval_ms / 1000)

    async def refresh(self) -> None:
        sources = self._sources()
        sources.pop("listener", None)
        state = broker_state(**sources, now_ms=self._now_ms(), end_offsets=self.remote_end_offsets)
        self.collector.state = state
        directory = self._dir
        if directory is not None:
            await asyncio.to_thread(_render_to, directory, self.registry, state)
        self.refreshed.set()

    async def fetch_end_offsets(self) -> None:
        sources = self._sources()
        snapshot, broker_id, core = sources["snapshot"], sources["broker_id"], sources.get("group_core")
        if core is None:
            return
        wanted: dict[int, set[tuple[str, int]]] = {}
        budget = LAG_ROWS_MAX
        for shard in list(getattr(core, "_shards", {}).values()):
            for offsets in list(shard.offsets.values()):
                if len(offsets) > budget:
                    continue
                budget -= len(offsets)
                for topic, index in offsets:
                    leader = _leader(snapshot, topic, index)
                    if leader >= 0 and leader != broker_id:
                        wanted.setdefault(leader, set()).add((topic, index))
        ends: dict[tuple[str, int], int] = {}
        for leader, keys in wanted.items():
            ends.update(await self._list_offsets(snapshot, sources["listener"], leader, keys))
        self.remote_end_offsets = ends

    async def _list_offsets(self, snapshot, listener: str, leader: int, keys: set) -> dict:
        connection = self._connections.get(leader)
        if connection is None:
            endpoint = snapshot.endpoint(leader, listener)
            if endpoint is None:
                return {}
            connection = self._connections[leader] = self._connect(endpoint.host, endpoint.port)
        topics: dict[str, list] = {}
        for topic, index in sorted(keys):
            topics.setdefault(topic, []).append(
                ListOffsetsRequest.ListOffsetsPartition(partition_index=index, timestamp=_LATEST))
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
        try:
            response = await connection.request(ApiKey.LIST_OFFSETS, _LIST_OFFSETS_VERSION, request)
        except Exception as exc:  # noqa: BLE001 - InterBrokerError and its kin: try again later
            logger.debug("metrics: end offsets from broker %d: %s", leader, exc)
            self._connections.pop(leader, None)
            return {}
        return {(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions
                if p.error_code == 0}


def _leader(snapshot, topic: str, index: int) -> int:
    meta = snapshot.topics.get(topic)
    view = meta.partitions.get(index) if meta is not None else None
    return view.state.leader if view is not None and view.state is not None else -1


def _render_to(directory: Path, registry: CollectorRegistry, state: dict) -> None:
    """Render the exposition and the status JSON and replace the child's files (worker thread)."""
    status = {k: v for k, v in state.items() if k not in ("logs", "local", "cleaner")}
    _write(directory, generate_latest(registry), json.dumps(status, separators=(",", ":")).encode())


def _write(directory: Path, exposition: bytes, status: bytes) -> None:
    for name, data in (("metrics", exposition), ("status.json", status)):
        temporary = directory / f".{name}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, directory / name)
