"""``Broker``: one pylog broker process, from start-up to a clean stop.

Start-up, in order (each step needs the one before):

1. Open the logs (``LogManager``: crash recovery unless the last shutdown was clean).
2. Bind the listener (not yet serving), so a listener on port 0 knows its port.
3. ZooKeeper: create the chroot if missing, open the session, create Kafka's persistent paths,
   read or choose the cluster id, register ``/brokers/ids/N`` with the advertised listeners
   (waiting out the ephemeral node of a previous process of this broker that was killed).
4. Read the cluster metadata once in full, open the partitions this broker holds (producer state
   and leader epochs loaded), delete the logs of topics deleted while it was down, and stand for
   controller if there is none.
5. Serve: the network server, the ZooKeeper metadata sync and the scheduler (retention, flush,
   checkpoints, producer expiry) run in one TaskGroup until ``stop`` is set.

Stop (SIGTERM/SIGINT): long polls are woken, the listener closes, requests already read are
answered (``shutdown.drain.timeout.ms``), the background tasks are cancelled, producer states
are snapshotted, the logs closed cleanly (the clean-shutdown marker is written last), and the
ZooKeeper session closed (its ephemeral nodes vanish at once, so a new controller is elected
without waiting for the session timeout).

Time (``now_ms``), randomness (``rng``) and sleeping (``sleep``) are injected.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from random import Random
from typing import Awaitable, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from broker.cluster.errors import ClusterError, ZooKeeperUnavailableError
from broker.cluster.layout import BrokerRegistration, EndPoint
from broker.cluster.zk import KafkaZkClient
from broker.log import LogManager, wall_clock_ms
from broker.records import BatchLimits
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.purgatory import Purgatory
from broker.server.config import BrokerConfig, Listener
from broker.server.context import BrokerContext
from broker.server.controller import StandInController
from broker.server.dispatch import Dispatcher
from broker.server.metadata import ClusterSnapshot, MetadataCache
from broker.server.network import KafkaServer, NetworkLimits
from broker.server.producer_ids import ProducerIdManager
from broker.server.scheduler import Scheduler
from broker.server.zk_sync import MetadataSync

__all__ = ["Broker", "ensure_chroot"]

logger = logging.getLogger("pylog.broker")


class Broker:
    def __init__(self, config: BrokerConfig, now_ms: Callable[[], int] = wall_clock_ms,
                 rng: Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.config = config
        self._now_ms = now_ms
        self._rng = rng if rng is not None else Random()
        self._sleep = sleep
        self.log_manager: LogManager | None = None
        self.server: KafkaServer | None = None
        self.zk: KafkaZkClient | None = None
        self.sync: MetadataSync | None = None
        self.replicas: ReplicaManager | None = None
        self.context: BrokerContext | None = None
        self.ready = asyncio.Event()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.port

    async def run(self, stop: asyncio.Event) -> None:
        """Start, serve until ``stop`` is set, then stop cleanly (also after a failure)."""
        try:
            await self._start()
            await self._serve(stop)
        finally:
            await self._close()

    # ---------------------------------------------------------------------------- start-up

    async def _start(self) -> None:
        config = self.config
        limits = BatchLimits(batch_bytes_max=config.message_max_bytes)
        self.log_manager = LogManager(config.log_dirs, config.log, self._now_ms, limits)
        self.replicas = ReplicaManager(
            config.broker_id, self.log_manager, Purgatory(config.purgatory_waiters_max), self._now_ms,
            ReplicaSettings(config.producer_id_expiration_ms, config.producer_state_entries_max,
                            config.min_insync_replicas, limits),
        )
        self.server = KafkaServer(_Deferred(self), config.listeners[0].host, config.listeners[0].port,
                                  NetworkLimits(config.socket_request_max_bytes, config.max_connections,
                                                config.max_inflight_requests_per_connection,
                                                config.connections_max_idle_ms))
        await self.server.start(start_serving=False)
        self.config = config = replace(config, advertised_listeners=self._resolved_advertised())
        await self._join_cluster()
        await self.server.start_serving()
        logger.info("broker %d serving on %s (advertised %s)", config.broker_id,
                    config.listeners[0], ", ".join(map(str, config.advertised_listeners)))
        self.ready.set()

    def _resolved_advertised(self) -> tuple[Listener, ...]:
        """Port 0 (any free port) in an advertised listener becomes the port actually bound."""
        return tuple(replace(l, port=self.server.port) if l.port == 0 else l
                     for l in self.config.advertised_listeners)

    async def _join_cluster(self) -> None:
        config = self.config
        await asyncio.to_thread(ensure_chroot, config.zookeeper_connect,
                                config.zookeeper_connection_timeout_ms)
        self.zk = zk = KafkaZkClient(config.zookeeper_connect, config.zookeeper_session_timeout_ms,
                                     config.zookeeper_connection_timeout_ms)
        await asyncio.to_thread(zk.start)
        await asyncio.to_thread(zk.ensure_persistent_paths)
        cluster_id = await asyncio.to_thread(zk.get_or_create_cluster_id, self._rng)
        epoch = await asyncio.to_thread(zk.register_broker, self._registration())
        logger.info("registered broker %d (epoch %d) in cluster %s", config.broker_id, epoch, cluster_id)
        cache = MetadataCache(ClusterSnapshot(cluster_id=cluster_id))
        self.sync = MetadataSync(zk, cache, self._on_metadata)
        controller = StandInController(zk, config.broker_id, self._now_ms, self._rng,
                                       self.sync.request_refresh)
        producer_ids = ProducerIdManager(lambda: zk.allocate_producer_id_block(config.broker_id))
        self.context = BrokerContext(config, cache, self.replicas, controller, producer_ids, self._now_ms)
        await asyncio.to_thread(self.sync.start_watches, asyncio.get_running_loop())
        snapshot = await self.sync.initial_load()
        self.replicas.delete_stray_logs(set(snapshot.topics))

    def _registration(self) -> BrokerRegistration:
        endpoints = tuple(EndPoint(l.name, l.host, l.port, "PLAINTEXT")
                          for l in self.config.advertised_listeners)
        return BrokerRegistration(self.config.broker_id, endpoints, self._now_ms())

    async def _on_metadata(self, snapshot: ClusterSnapshot) -> None:
        self.replicas.apply(snapshot.topics)
        if self.config.broker_id not in snapshot.brokers:
            await self._register_again()
        await self.context.controller.on_metadata(snapshot)

    async def _register_again(self) -> None:
        """Our ``/brokers/ids/N`` is gone while we run: the ZooKeeper session expired (kazoo
        reconnects with a new one and its watches come back) or someone deleted the node.
        Without it no client would find this broker, so register again (Kafka re-registers in
        its session-expiry handler)."""
        logger.warning("broker %d is not registered in ZooKeeper; registering again", self.config.broker_id)
        try:
            await asyncio.to_thread(self.zk.register_broker, self._registration(), 0)
        except (ClusterError, KazooException) as exc:
            logger.error("registering broker %d again failed: %s", self.config.broker_id, exc)
        self.sync.request_refresh(brokers=True, controller=True)

    # ----------------------------------------------------------------------------- serving

    async def _serve(self, stop: asyncio.Event) -> None:
        scheduler = self._scheduler()
        async with asyncio.TaskGroup() as group:
            background = [group.create_task(self.sync.run(), name="metadata-sync"),
                          group.create_task(scheduler.run(), name="scheduler")]
            stopping = group.create_task(stop.wait(), name="stop")
            await asyncio.wait([stopping, *background], return_when=asyncio.FIRST_COMPLETED)
            logger.info("broker %d stopping", self.config.broker_id)
            await self._stop_serving()
            for task in (*background, stopping):
                task.cancel()

    def _scheduler(self) -> Scheduler:
        config, replicas = self.config, self.replicas
        scheduler = Scheduler(self._now_ms, self._sleep)
        scheduler.every("log-retention", config.log_retention_check_interval_ms, replicas.run_retention)
        scheduler.every("log-flush", config.log_flush_scheduler_interval_ms, replicas.flush_due)
        scheduler.every("checkpoints", config.log_flush_offset_checkpoint_interval_ms, replicas.checkpoint)
        scheduler.every("producer-expiration", config.producer_id_expiration_check_interval_ms,
                        replicas.expire_producers)
        return scheduler

    async def _stop_serving(self) -> None:
        """Wake long polls, stop accepting, answer what was read."""
        if self.context is not None:
            self.context.stopping = True
        if self.replicas is not None:
            self.replicas.purgatory.close()
        if self.server is not None:
            await self.server.close(self.config.shutdown_drain_timeout_ms / 1000)

    async def _close(self) -> None:
        """Release everything that was opened, in reverse order; safe after a failed start."""
        await self._stop_serving()
        if self.sync is not None:
            self.sync.close()
        if self.replicas is not None:
            self.replicas.close()
        elif self.log_manager is not None:
            self.log_manager.close()
        if self.zk is not None:
            await asyncio.to_thread(self.zk.close)
        logger.info("broker %d stopped", self.config.broker_id)


class _Deferred:
    """The network handler before the context exists: the server binds first (port 0), the
    dispatcher is built once the broker has joined the cluster; serving starts after that."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._dispatcher: Dispatcher | None = None

    async def handle(self, frame: bytes):
        if self._dispatcher is None:
            assert self._broker.context is not None, "serving starts after the context exists"
            self._dispatcher = Dispatcher(self._broker.context)
        return await self._dispatcher.handle(frame)


def ensure_chroot(connect: str, timeout_ms: int) -> None:
    """Create the chroot of ``host:port/chroot`` if missing, as Kafka does at start-up (kazoo
    refuses to work under a chroot that does not exist). Blocking."""
    hosts, slash, chroot = connect.partition("/")
    if not slash:
        return
    client = KazooClient(hosts=hosts, timeout=timeout_ms / 1000)
    try:
        client.start(timeout=timeout_ms / 1000)
        client.ensure_path("/" + chroot)
    except KazooTimeoutError:
        raise ZooKeeperUnavailableError(
            f"could not connect to ZooKeeper at {hosts} within {timeout_ms} ms") from None
    finally:
        client.stop()
        client.close()
