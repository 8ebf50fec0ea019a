"""What request handlers may use: the broker's services, passed as one object.

Handlers get a ``BrokerContext`` and the decoded request, and return the response (or None for
no response). Tests build a context from a ``LogManager`` in a temporary directory, a hand-made
``ClusterSnapshot`` and fakes for the controller and the producer-id source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Mapping, Sequence

from broker.replica.manager import ReplicaManager
from broker.server.config import BrokerConfig
from broker.server.metadata import MetadataCache
from broker.server.network import connection_state

__all__ = ["BrokerContext", "ControllerApi", "GroupCoordinatorApi", "ProducerIdSource", "TxnCoordinatorApi"]


class ControllerApi(Protocol):
    """What CreateTopics, DeleteTopics, ControlledShutdown and Metadata auto-creation need of
    the controller."""

    active: bool

    @property
    def rng(self): ...

    async def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]],
                           config: Mapping[str, str]) -> tuple[int, str | None]: ...

    async def delete_topic(self, name: str) -> tuple[int, str | None]: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list]: ...


class ProducerIdSource(Protocol):
    async def next_id(self) -> int: ...


class GroupCoordinatorApi(Protocol):
    """What the group handlers need: ``broker.server.group_coordinator.GroupCoordinatorService``."""

    async def handle(self, api_key: int, api_version: int, request, client_id: str | None,
                     client_host: str): ...


class TxnCoordinatorApi(Protocol):
    """What the transaction handlers need: ``broker.server.txn_coordinator.TxnCoordinatorService``."""

    async def handle(self, api_key: int, api_version: int, request): ...

    def coordinates(self, transactional_id: str) -> bool: ...


@dataclass
class BrokerContext:
    config: BrokerConfig
    metadata: MetadataCache
    replicas: ReplicaManager
    controller: ControllerApi
    producer_ids: ProducerIdSource
    now_ms: Callable[[], int]
    listener_name: str = "PLAINTEXT"  # the inter-broker listener (inter.broker.listener.name)
    stopping: bool = False  # set at shutdown: long polls answer at once
    broker_epoch: int = -1  # czxid of our /brokers/ids/N (KIP-380); -1 until registered
    request_metadata_refresh: Callable[..., None] = lambda **_: None  # MetadataSync.request_refresh
    groups: GroupCoordinatorApi | None = None  # None: the group APIs answer COORDINATOR_NOT_AVAILABLE
    txn: TxnCoordinatorApi | None = None  # None: the transaction APIs answer COORDINATOR_NOT_AVAILABLE
    # KIP-890 verification of transactional produce (broker.replica.transactions.TxnVerifier,
    # e.g. the TxnCoordinatorService); None: every transaction-opening produce gets INVALID_TXN_STATE
    txn_verifier: object | None = None
    # ACLs (issue 17): the broker.auth Authorizer when authorizer.class.name is set (the dispatcher
    # then runs every request through broker.server.request_auth), the AclZkStore that writes them
    # and the AclSync that alone updates the authorizer's ACLs (the handlers ask it to re-read)
    authorizer: object | None = None
    acl_store: object | None = None
    acl_sync: object | None = None
    # SCRAM credentials in ZooKeeper (broker.server.credentials.CredentialStore); None: no users
    credentials: object | None = None
    # dynamic configs (broker.server.config_changes.ConfigChangeService: read/write/levels);
    # None: AlterConfigs answers UNKNOWN_SERVER_ERROR, DescribeConfigs shows static levels only
    config_store: object | None = None
    # client quotas (broker.server.quota.ClientQuotas); None: no quotas
    quotas: object | None = None
    quota_store: object | None = None  # broker.server.quota_store.QuotaStore (DescribeClientQuotas)
    # replication throttles (broker.server.replication_quota.ReplicationQuotas); None: none
    replication_quotas: object | None = None

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def client_listener_name(self) -> str:
        """The listener the calling request arrived on (Metadata, FindCoordinator and
        DescribeCluster answer with that listener's endpoints, as Kafka does); the inter-broker
        listener outside a connection."""
        return connection_state().get("listener") or self.listener_name
