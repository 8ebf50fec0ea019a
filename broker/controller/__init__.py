"""The controller's logic, pure and synchronous: elections, state machines, and the event
handlers that turn a change in ZooKeeper into partition-state writes and broker requests.

Nothing here imports asyncio, sockets or kazoo. ZooKeeper is reached through the ``ControllerZk``
protocol (``broker.cluster.zk.KafkaZkClient`` in a broker, an in-memory fake in
``broker.sim``); requests to brokers come back as values (``requests.py``) for the caller to
deliver. The asyncio adapter is ``broker.server.controller``.
"""

from broker.controller.core import ControllerCore, ControllerSettings, Send
from broker.controller.election import (
    Election,
    controlled_shutdown_leader,
    offline_partition_leader,
    preferred_replica_leader,
)
from broker.controller.requests import (
    LeaderAndIsr,
    PartitionLeadership,
    StopReplica,
    UpdateMetadata,
)
from broker.controller.states import (
    IllegalStateTransition,
    PartitionStateName,
    ReplicaStateName,
)

__all__ = [
    "ControllerCore", "ControllerSettings", "Send",
    "Election", "controlled_shutdown_leader", "offline_partition_leader", "preferred_replica_leader",
    "LeaderAndIsr", "PartitionLeadership", "StopReplica", "UpdateMetadata",
    "IllegalStateTransition", "PartitionStateName", "ReplicaStateName",
]
