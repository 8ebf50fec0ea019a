"""``Broker``: one pylog broker process, from start-up to a clean stop.

Start-up, in order (each step needs the one before):

1. Open the logs (``LogManager``: crash recovery unless the last shutdown was clean).
2. Bind the listener (not yet serving), so a listener on port 0 knows its port.
3. ZooKeeper: create the chroot if missing, open the session, create Kafka's persistent paths,
   read or choose the cluster id; after an unclean shutdown, leave every ISR this broker is in
   (not as the last member; ``broker.replica.fencing``); register ``/brokers/ids/N`` with the
   advertised listeners (waiting out the ephemeral node of a previous process of this broker
   that was killed).
4. Read the cluster metadata once in full, open the partitions this broker holds (producer state,
   leader epochs and checkpointed high watermarks loaded; followers start fetching), delete the
   logs of topics deleted while it was down.
5. Serve: the network server, the ZooKeeper metadata sync, the controller (which stands for
   election at once), the follower fetchers, the ISR writer, the group coordinator (which loads
   the ``__consumer_offsets`` partitions this broker comes to lead), the transaction coordinator
   (likewise for ``__transaction_state``, with its marker sender) and the scheduler (retention,
   flush, checkpoints, producer expiry, ISR shrink checks) run in one TaskGroup until ``stop``
   is set.

Stop (SIGTERM/SIGINT): first a controlled shutdown (``controlled.shutdown.enable``): the
controller is asked (ControlledShutdown, or directly when this broker is the controller) to move
this broker's leaderships to other in-sync replicas, up to ``controlled.shutdown.max.retries``
times, while the broker keeps serving so that clients follow the moves. Then the group
coordinator unloads its partitions (parked JoinGroups and SyncGroups are answered
NOT_COORDINATOR), long polls are woken, the listener closes, requests already read are
answered (``shutdown.drain.timeout.ms``), a controller lets its last requests out, the
background tasks are cancelled, producer states are snapshotted and high watermarks
checkpointed, the logs closed cleanly (the clean-shutdown marker is written last), and the
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
from broker.controller import ControllerSettings
from broker.coordinator.group.core import GroupCoordinatorCore
from broker.coordinator.txn.core import TxnCoordinatorCore
from broker.auth.authorizer import Authorizer
from broker.auth.zk_store import AclSync, AclZkStore
from broker.log import LogManager, wall_clock_ms
from broker.log.cleaner.cleaning_pass import CleanerSettings
from broker.metrics.service import MetricsService
from broker.records import BatchLimits
from broker.replica.fencing import fence_after_unclean_shutdown
from broker.replica.fetcher import FetcherSettings
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.purgatory import Purgatory
from broker.server.config import BrokerConfig, ConfigError, Listener
from broker.server.config_changes import ConfigChangeService
from broker.server.dynamic_config import DynamicBrokerConfigs
from broker.server.context import BrokerContext
from broker.security import tls
from broker.security.sasl_client import SaslClient
from broker.server.authenticator import SaslAuthenticator
from broker.server.config import ConfigError
from broker.server.credentials import CredentialStore
from broker.server.quota import QuotaSettings
from broker.server.quota_store import QuotaStore
from broker.server.controller import ControllerService
from broker.server.dispatch import Dispatcher
from broker.server.group_coordinator import GroupCoordinatorService, GroupServiceSettings
from broker.server.handlers import write_txn_markers
from broker.server.inter_broker import InterBrokerConnection, InterBrokerError, InterBrokerSecurity, configure_security
from broker.server.isr_writer import IsrWriter
from broker.server.log_cleaner import LogCleanerService
from broker.server.metadata import ClusterSnapshot, MetadataCache
from broker.server.network import KafkaServer, NetworkLimits
from broker.server.producer_ids import ProducerIdManager
from broker.server.replica_fetcher import ReplicaFetcherManager
from broker.server.replication_quota import (FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE,
                                             ReplicationQuotas, ReplicationQuotaSettings)
from broker.server.scheduler import Scheduler
from broker.server.txn_coordinator import TxnCoordinatorService, TxnServiceSettings
from broker.server.txn_markers import MarkerSender
from broker.server.txn_verify import RemoteTxnVerifier
from broker.server.zk_sync import MetadataSync
from broker.wire import ApiKey, ControlledShutdownRequest, ErrorCode

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
        self.server: KafkaServer | None = None  # the first listener's
        self.servers: dict[str, KafkaServer] = {}  # every listener's, by name
        self.zk: KafkaZkClient | None = None
        self.sync: MetadataSync | None = None
        self.replicas: ReplicaManager | None = None
        self.context: BrokerContext | None = None
        self.controller: ControllerService | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.isr_writer: IsrWriter | None = None
        self.groups: GroupCoordinatorService | None = None
        self.txn: TxnCoordinatorService | None = None
        self.acl_sync: AclSync | None = None  # when authorizer.class.name is set (broker/auth)
        self.configs: ConfigChangeService | None = None  # dynamic configs (issue 18)
        self.metrics: MetricsService | None = None  # metrics.port != 0 (broker/metrics)
        self.isr_changes = {"shrinks": 0, "expands": 0}
        self.authenticators: dict[str, SaslAuthenticator] = {}  # SASL listeners' gates (their counts: metrics)
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
                            config.min_insync_replicas, limits, config.replica_lag_time_max_ms),
        )
        self.cleaner = _log_cleaner(config, self.replicas, limits, self._now_ms, self._rng)
        configure_security(_inter_broker_security(config))
        self.servers = self._make_servers()
        self.server = self.servers[config.listeners[0].name]
        for server in self.servers.values():
            await server.start(start_serving=False)
        self.config = config = replace(config, advertised_listeners=self._resolved_advertised())
        await self._join_cluster()
        if self.metrics is not None:  # bound before serving: a port in use fails the start
            await self.metrics.start()
        for server in self.servers.values():
            await server.start_serving()
        logger.info("broker %d serving on %s (advertised %s)", config.broker_id,
                    config.listeners[0], ", ".join(map(str, config.advertised_listeners)))
        self.ready.set()

    def _resolved_advertised(self) -> tuple[Listener, ...]:
        """Port 0 (any free port) in an advertised listener becomes the port actually bound."""
        return tuple(replace(l, port=self.servers[l.name].port) if l.port == 0 else l
                     for l in self.config.advertised_listeners)

    def _make_servers(self) -> dict[str, KafkaServer]:
        """One server per listener: TLS on SSL/SASL_SSL, the SASL gate on SASL_* (issue 17)."""
        config = self.config
        security = config.security
        limits = NetworkLimits(config.socket_request_max_bytes, config.max_connections,
                               config.max_inflight_requests_per_connection, config.connections_max_idle_ms,
                               security.authentication_timeout_ms)
        servers = {}
        for listener in config.listeners:
            spec = security.for_listener(listener.name)
            handler = _Deferred(self)
            if spec.uses_sasl:
                handler = self.authenticators[listener.name] = SaslAuthenticator(
                    handler, spec, _Credentials(self), self._now_ms, security.connections_max_reauth_ms,
                    security.sasl_server_max_receive_size_bytes)
            servers[listener.name] = KafkaServer(
                handler, listener.host, listener.port, limits, listener_name=listener.name,
                ssl_context=tls.server_context(spec.ssl) if spec.uses_tls else None,
                principal_of=_certificate_principal if spec.uses_tls else None,
                authentication_required=spec.uses_sasl)
        return servers

    async def _join_cluster(self) -> None:
        config = self.config
        await asyncio.to_thread(ensure_chroot, config.zookeeper_connect,
                                config.zookeeper_connection_timeout_ms)
        self.zk = zk = KafkaZkClient(config.zookeeper_connect, config.zookeeper_session_timeout_ms,
                                     config.zookeeper_connection_timeout_ms)
        await asyncio.to_thread(zk.start)
        await asyncio.to_thread(zk.ensure_persistent_paths)
        cluster_id = await asyncio.to_thread(zk.get_or_create_cluster_id, self._rng)
        if not all(self.log_manager.had_clean_shutdown.values()):
            await asyncio.to_thread(fence_after_unclean_shutdown, zk, config.broker_id)
        epoch = await asyncio.to_thread(zk.register_broker, self._registration())
        logger.info("registered broker %d (epoch %d) in cluster %s", config.broker_id, epoch, cluster_id)
        cache = MetadataCache(ClusterSnapshot(cluster_id=cluster_id))
        self.sync = MetadataSync(zk, cache, self._on_metadata)
        listener = config.security.inter_broker_listener_name
        self.replication_quotas = ReplicationQuotas(config.broker_id, ReplicationQuotaSettings(
            config.replication_quota_window_num, config.replication_quota_window_size_seconds * 1000))
        self.fetchers = ReplicaFetcherManager(
            config.broker_id, cache, listener,
            FetcherSettings(config.replica_fetch_wait_max_ms, config.replica_fetch_min_bytes,
                            config.replica_fetch_max_bytes, config.replica_fetch_response_max_bytes,
                            config.replica_fetch_backoff_ms),
            config.replica_socket_timeout_ms, self._now_ms, self.replication_quotas.follower)
        self.fetchers.get_partition = self.replicas.get
        self.replicas.fetchers = self.fetchers
        self.isr_writer = IsrWriter(zk, self._isr_change_done, self.replicas.refresh_leader_state)
        self.replicas.isr_writer = self.isr_writer.submit
        self.controller = ControllerService(
            zk, config.broker_id,
            ControllerSettings(config.unclean_leader_election_enable, config.auto_leader_rebalance_enable,
                               config.leader_imbalance_per_broker_percentage),
            self._now_ms, self._rng, self.sync.request_refresh, listener,
            config.controller_socket_timeout_ms, config.leader_imbalance_check_interval_seconds * 1000)
        producer_ids = ProducerIdManager(lambda: zk.allocate_producer_id_block(config.broker_id))
        self.groups = GroupCoordinatorService(
            GroupCoordinatorCore(config.group_settings, self._rng), self.replicas,
            GroupServiceSettings(config.offsets_commit_timeout_ms, config.offsets_load_buffer_size_bytes),
            self._now_ms)
        self.replicas.add_leadership_listener(self.groups.on_leadership_change)
        self.txn = self._txn_coordinator(cache, listener, producer_ids)
        self.replicas.add_leadership_listener(self.txn.on_leadership_change)
        self.context = BrokerContext(config, cache, self.replicas, self.controller, producer_ids,
                                     self._now_ms, listener_name=listener, broker_epoch=epoch,
                                     request_metadata_refresh=self.sync.request_refresh,
                                     groups=self.groups, txn=self.txn,
                                     txn_verifier=self.txn if config.transaction_partition_verification_enable
                                     else _NoVerification())
        if config.metrics.enabled:
            self.metrics = self._metrics_service(listener)
        self.configs = ConfigChangeService(zk, config.broker_id, config.properties, self._on_broker_config,
                                           lambda topics: self.sync.request_refresh(topics=topics))
        self.context.config_store = self.configs
        self.context.replication_quotas = self.replication_quotas
        await self._start_quotas(zk, config)
        loop = asyncio.get_running_loop()
        levels = await self.configs.load()
        if levels.cluster_default or levels.per_broker:
            await self._on_broker_config(levels)
        await asyncio.to_thread(self.configs.start_watches, loop)
        if config.authorizer.enabled:
            await self._start_authorizer(zk)
        await asyncio.to_thread(self.sync.start_watches, loop)
        await asyncio.to_thread(self.controller.start_watches, loop)
        self.context.credentials = CredentialStore(zk._zk)  # the broker's own session (a read per login)
        snapshot = await self.sync.initial_load()
        self.replicas.delete_stray_logs(set(snapshot.topics))

    async def _start_quotas(self, zk, config) -> None:
        """Client quotas (issue 18): read every entity now, then each one a notification names."""
        store = QuotaStore(zk, QuotaSettings(config.quota_window_num, config.quota_window_size_seconds * 1000))
        await store.load()
        for entity_type in ("users", "clients"):
            self.configs.add_listener(entity_type, store.on_change(entity_type))
        self.context.quotas = store.quotas
        self.context.quota_store = store

    def _isr_change_done(self, change, new_version: int | None) -> None:
        """The ISR writer's outcome, counted (Kafka's IsrShrinksPerSec/IsrExpandsPerSec) on its
        way to the replica manager."""
        partition = self.replicas.get(change.topic, change.partition)
        before = len(partition.isr) if partition is not None else None
        self.replicas.complete_isr_change(change, new_version)
        if partition is not None and len(partition.isr) != before:
            self.isr_changes["shrinks" if len(partition.isr) < before else "expands"] += 1

    def _metrics_service(self, listener: str) -> MetricsService:
        config = self.config
        timeout_s = config.controller_socket_timeout_ms / 1000

        def sources() -> dict:
            return dict(broker_id=config.broker_id, snapshot=self.context.metadata.snapshot,
                        partitions=self.replicas.partitions(),
                        is_controller=self.controller.active, default_min_isr=config.min_insync_replicas,
                        cleaner_stats=self.cleaner.statistics() if config.log_cleaner_enable else None,
                        group_core=self.groups.core, txn_core=self.txn.core, isr_changes=self.isr_changes,
                        authentication={name: gate.counts for name, gate in self.authenticators.items()},
                        listener=listener)

        return MetricsService(config.metrics, sources, self._now_ms, lambda host, port: InterBrokerConnection(
            host, port, f"broker-{config.broker_id}-metrics", timeout_s))

    async def _on_broker_config(self, levels: DynamicBrokerConfigs) -> None:
        """Dynamic broker configs changed (``/config/brokers/<default>`` or ``<id>``): the log
        defaults and ``min.insync.replicas`` apply at once; a set ZooKeeper holds that this
        broker cannot use (written by another tool) is logged and ignored."""
        try:
            new = levels.broker_config()
        except (ConfigError, ValueError) as exc:
            logger.error("ignoring the dynamic broker configs: %s", exc)
            return
        self.config = config = replace(self.config, log=new.log, min_insync_replicas=new.min_insync_replicas,
                                       message_max_bytes=new.message_max_bytes, properties=new.properties)
        self.context.config = config
        self.log_manager.update_broker_config(config.log)
        self.replicas.update_min_insync_replicas(config.min_insync_replicas)
        try:
            self.replication_quotas.update_rates(levels.throttle_rate(LEADER_THROTTLED_RATE),
                                                 levels.throttle_rate(FOLLOWER_THROTTLED_RATE))
        except ValueError as exc:  # written by another tool
            logger.error("ignoring the replication throttle rates: %s", exc)

    async def _start_authorizer(self, zk: KafkaZkClient) -> None:
        """Load the ACLs from ZooKeeper before the first request is served; from then on the
        dispatcher authorizes every request (broker/server/request_auth.py) and ``acl_sync``
        follows the change notifications."""
        settings = self.config.authorizer
        authorizer = Authorizer(settings.super_users, settings.allow_everyone_if_no_acl_found)
        kazoo = zk._zk  # the broker's own ZooKeeper session
        store = AclZkStore(kazoo, self._now_ms)
        self.acl_sync = AclSync(store, authorizer, kazoo)
        await self.acl_sync.start()
        context = self.context
        context.authorizer, context.acl_store, context.acl_sync = authorizer, store, self.acl_sync

    def _txn_coordinator(self, cache: MetadataCache, listener: str, producer_ids) -> TxnCoordinatorService:
        """The transaction coordinator with its marker sender (markers to this broker's own
        partitions through the WriteTxnMarkers handler in-process) and its remote verifier."""
        config = self.config
        timeout_s = config.controller_socket_timeout_ms / 1000
        markers = MarkerSender(
            config.broker_id, lambda: cache.snapshot, listener,
            lambda request: write_txn_markers.handle(self.context, None, request),
            lambda host, port: InterBrokerConnection(host, port, f"broker-{config.broker_id}-txn-markers",
                                                     timeout_s),
            request_refresh=lambda **kw: self.sync.request_refresh(**kw))
        verifier = RemoteTxnVerifier(config.broker_id, lambda: cache.snapshot, listener,
                                     config.internal_topics.transaction_state_log_num_partitions, timeout_s)
        return TxnCoordinatorService(
            TxnCoordinatorCore(config.txn_settings), self.replicas,
            TxnServiceSettings(num_partitions=config.internal_topics.transaction_state_log_num_partitions,
                               load_buffer_bytes=config.transaction_state_log_load_buffer_size_bytes),
            self._now_ms, producer_ids.next_id, markers, verifier)

    def _registration(self) -> BrokerRegistration:
        endpoints = tuple(EndPoint(l.name, l.host, l.port, self.config.security.for_listener(l.name).protocol)
                          for l in self.config.advertised_listeners)
        return BrokerRegistration(self.config.broker_id, endpoints, self._now_ms())

    async def _on_metadata(self, snapshot: ClusterSnapshot) -> None:
        self.replication_quotas.on_topic_configs({t: m.config for t, m in snapshot.topics.items() if m.config})
        self.replicas.apply(snapshot.topics, may_lead=False)  # leadership only from the controller
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
            epoch = await asyncio.to_thread(self.zk.register_broker, self._registration(), 0)
            self.context.broker_epoch = epoch
            logger.info("broker %d registered again (epoch %d)", self.config.broker_id, epoch)
        except (ClusterError, KazooException) as exc:
            logger.error("registering broker %d again failed: %s", self.config.broker_id, exc)
        self.sync.request_refresh(brokers=True, controller=True)

    # ----------------------------------------------------------------------------- serving

    async def _serve(self, stop: asyncio.Event) -> None:
        scheduler = self._scheduler()
        async with asyncio.TaskGroup() as group:
            background = [group.create_task(self.sync.run(), name="metadata-sync"),
                          group.create_task(self.configs.run(), name="config-changes"),
                          group.create_task(scheduler.run(), name="scheduler"),
                          group.create_task(self.controller.run(), name="controller"),
                          group.create_task(self.fetchers.run(), name="replica-fetchers"),
                          group.create_task(self.isr_writer.run(), name="isr-writer"),
                          group.create_task(self.groups.run(), name="group-coordinator"),
                          group.create_task(self.txn.run(), name="txn-coordinator")]
            if self.config.log_cleaner_enable:
                background.append(group.create_task(self.cleaner.run(), name="log-cleaner"))
            if self.acl_sync is not None:
                background.append(group.create_task(self.acl_sync.run(), name="acl-sync"))
            if self.metrics is not None:
                background.append(group.create_task(self.metrics.run(), name="metrics"))
            stopping = group.create_task(stop.wait(), name="stop")
            await asyncio.wait([stopping, *background], return_when=asyncio.FIRST_COMPLETED)
            logger.info("broker %d stopping", self.config.broker_id)
            if stopping.done():
                await self._controlled_shutdown()
                # A controller tells the new leaders (itself included) before it stops listening.
                await self.controller.channels.drain(self.config.shutdown_drain_timeout_ms / 1000)
            await self._stop_serving()
            await self.controller.stop(self.config.shutdown_drain_timeout_ms / 1000)
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
        scheduler.every("isr-expiration", max(1, config.replica_lag_time_max_ms // 2),
                        replicas.maybe_shrink_isr)
        scheduler.every("high-watermark-checkpoint", config.replica_high_watermark_checkpoint_interval_ms,
                        replicas.checkpoint_high_watermarks)
        return scheduler

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away (Kafka
        ``KafkaServer.controlledShutdown``); retry while some remain, then stop anyway."""
        config = self.config
        if not config.controlled_shutdown_enable or self.context is None:
            return
        attempts = config.controlled_shutdown_max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                error, remaining = await self._ask_for_controlled_shutdown()
            except InterBrokerError as exc:
                error, remaining = ErrorCode.NETWORK_EXCEPTION, [f"({exc})"]
            if error == ErrorCode.NONE and not remaining:
                logger.info("broker %d: controlled shutdown done", config.broker_id)
                return
            logger.info("broker %d: controlled shutdown attempt %d/%d: error %d, still leading %s",
                        config.broker_id, attempt, attempts, error, remaining[:5])
            if attempt < attempts:
                await self._sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
        logger.warning("broker %d: controlled shutdown incomplete; stopping anyway", config.broker_id)

    async def _ask_for_controlled_shutdown(self) -> tuple[int, list]:
        config, context = self.config, self.context
        controller_id = context.metadata.snapshot.controller_id
        if controller_id == config.broker_id and self.controller.active:
            return await self.controller.controlled_shutdown(config.broker_id, context.broker_epoch)
        endpoint = context.metadata.snapshot.endpoint(controller_id, context.listener_name)
        if endpoint is None:
            return ErrorCode.NOT_CONTROLLER, []
        connection = InterBrokerConnection(endpoint.host, endpoint.port, f"broker-{config.broker_id}",
                                           config.controller_socket_timeout_ms / 1000)
        try:
            response = await connection.request(
                ApiKey.CONTROLLED_SHUTDOWN, 3,
                ControlledShutdownRequest(broker_id=config.broker_id, broker_epoch=context.broker_epoch))
        finally:
            await connection.close()
        return response.error_code, [(p.topic_name, p.partition_index) for p in response.remaining_partitions]

    async def _stop_serving(self) -> None:
        """Wake long polls, stop accepting, answer what was read."""
        if self.context is not None:
            self.context.stopping = True
        if self.groups is not None:
            self.groups.close()
        if self.txn is not None:
            self.txn.close()
        if self.replicas is not None:
            self.replicas.purgatory.close()
        if self.servers:
            await asyncio.gather(*(server.close(self.config.shutdown_drain_timeout_ms / 1000)
                                   for server in self.servers.values()))

    async def _close(self) -> None:
        """Release everything that was opened, in reverse order; safe after a failed start."""
        await self._stop_serving()
        if self.metrics is not None:  # also when the start failed after binding it
            await self.metrics.close()
        if self.sync is not None:
            self.sync.close()
        if self.configs is not None:
            self.configs.close()
        if self.replicas is not None:
            self.replicas.close()
        elif self.log_manager is not None:
            self.log_manager.close()
        if self.zk is not None:
            await asyncio.to_thread(self.zk.close)
        logger.info("broker %d stopped", self.config.broker_id)


class _NoVerification:
    """``transaction.partition.verification.enable=false``: every transactional produce is
    accepted without asking the coordinator (Kafka's behaviour before KIP-890)."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     topic: str, partition: int) -> int:
        return ErrorCode.NONE


class _Credentials:
    """The SASL gate's credential store, which exists once the broker has joined ZooKeeper (no
    SASL request is served before: serving starts after that)."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def lookup(self, user: str, mechanism: str):
        context = self._broker.context
        if context is None or context.credentials is None:
            return None
        return await context.credentials.lookup(user, mechanism)


def _certificate_principal(transport) -> str | None:
    return tls.certificate_principal(transport.get_extra_info("peercert"))


def _inter_broker_security(config: BrokerConfig) -> InterBrokerSecurity:
    """TLS and SASL towards the other brokers' ``inter.broker.listener.name`` listener, with this
    broker's own keystore, truststore and JAAS ``username``/``password``."""
    security = config.security
    spec = security.for_listener(security.inter_broker_listener_name)
    context = tls.client_context(spec.ssl) if spec.uses_tls else None
    sasl = None
    if spec.uses_sasl:
        mechanism = security.inter_broker_mechanism
        jaas = spec.jaas.get(mechanism)
        if jaas is None or not jaas.username or jaas.password is None:
            raise ConfigError(f"listener {spec.name}: the inter-broker SASL mechanism {mechanism} needs "
                              f"username and password in listener.name.{spec.name.lower()}."
                              f"{mechanism.lower()}.sasl.jaas.config")
        sasl = lambda: SaslClient(mechanism, jaas.username, jaas.password)  # noqa: E731
    return InterBrokerSecurity(context, sasl)


class _Deferred:
    """The network handler before the context exists: the server binds first (port 0), the
    dispatcher is built once the broker has joined the cluster; serving starts after that."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._dispatcher: Dispatcher | None = None

    def handle(self, frame: bytes):
        """The dispatcher's coroutine itself (no wrapping coroutine per request)."""
        return self._made().handle(frame)

    def start(self, frame: bytes):
        """``Dispatcher.start``: the network layer starts a request inline (no task) with it."""
        return self._made().start(frame)

    def _made(self) -> Dispatcher:
        if self._dispatcher is None:
            assert self._broker.context is not None, "serving starts after the context exists"
            metrics = self._broker.metrics
            self._dispatcher = Dispatcher(self._broker.context,
                                          metrics.requests.observe if metrics is not None else None)
        return self._dispatcher


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


def _log_cleaner(config: BrokerConfig, replicas: ReplicaManager, limits: BatchLimits, now_ms, rng) -> LogCleanerService:
    """Kafka's ``log.cleaner.*`` buffers and rate are for all cleaner threads together."""
    threads = config.log_cleaner_threads
    settings = CleanerSettings(
        dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size_bytes // threads,
        io_buffer_bytes=max(64 * 1024, config.log_cleaner_io_buffer_size_bytes // threads),
        io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second / threads,
        limits=limits._replace(batch_bytes_max=(1 << 31) - 1))
    return LogCleanerService(replicas, settings, threads=threads, backoff_ms=config.log_cleaner_backoff_ms,
                             now_ms=now_ms, rng=rng)
