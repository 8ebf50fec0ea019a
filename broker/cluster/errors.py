"""Typed errors of the cluster metadata layer.

Every error carries the Kafka error code the broker answers with (``kafka_error_code``), as the
errors of ``broker.records`` and ``broker.wire`` do, so a request handler maps an exception to a
response without a table of its own. Errors that never reach a client (a version conflict the
caller resolves by re-reading, a broker id clash that stops the process) carry
UNKNOWN_SERVER_ERROR (-1) and say so.
"""

from __future__ import annotations

__all__ = [
    "ClusterError",
    "InvalidTopicError",
    "TopicExistsError",
    "UnknownTopicOrPartitionError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError",
    "InvalidConfigurationError",
    "MalformedZnodeError",
    "BadVersionError",
    "PartitionStateExistsError",
    "BrokerIdAlreadyRegisteredError",
    "ControllerMovedError",
    "ProducerIdsExhaustedError",
    "ZooKeeperUnavailableError",
]


class ClusterError(Exception):
    """Base class: a metadata operation could not be done as asked."""

    kafka_error_code: int = -1  # UNKNOWN_SERVER_ERROR


class InvalidTopicError(ClusterError, ValueError):
    """A topic name breaks ``Topic.validate`` or collides with an existing topic."""

    kafka_error_code = 17  # INVALID_TOPIC_EXCEPTION


class TopicExistsError(ClusterError):
    """``/brokers/topics/{t}`` already exists (AdminZkClient's TopicExistsException)."""

    kafka_error_code = 36  # TOPIC_ALREADY_EXISTS


class UnknownTopicOrPartitionError(ClusterError):
    """The topic, or the partition's state znode, is not in ZooKeeper."""

    kafka_error_code = 3  # UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(ClusterError, ValueError):
    """A topic must have at least one partition."""

    kafka_error_code = 37  # INVALID_PARTITIONS


class InvalidReplicationFactorError(ClusterError, ValueError):
    """Partitions of a new topic must all have the same, non-zero number of replicas."""

    kafka_error_code = 38  # INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(ClusterError, ValueError):
    """Partitions are not 0..n-1, or a partition lists a broker twice."""

    kafka_error_code = 39  # INVALID_REPLICA_ASSIGNMENT


class InvalidConfigurationError(ClusterError, ValueError):
    """A config map whose keys or values are not strings (ZooKeeper stores them as strings)."""

    kafka_error_code = 40  # INVALID_CONFIG


class MalformedZnodeError(ClusterError, ValueError):
    """A znode's data is not what Kafka 2.x writes there; the message names path and rule."""


class BadVersionError(ClusterError):
    """A conditional write lost: the znode's version is no longer the one the caller read.

    Internal (-1): the caller re-reads the znode and decides again (Kafka's
    ``conditionalUpdatePath`` returning ``(false, -1)``).
    """


class PartitionStateExistsError(ClusterError):
    """A partition's state znode exists already; the controller must read it, not create it."""


class BrokerIdAlreadyRegisteredError(ClusterError):
    """Another live session holds ``/brokers/ids/{id}``; two brokers must not share an id."""


class ControllerMovedError(ClusterError):
    """``/controller_epoch`` changed under us: another broker became controller."""

    kafka_error_code = 41  # NOT_CONTROLLER


class ProducerIdsExhaustedError(ClusterError):
    """The next producer id block would pass 2**63 - 1."""


class ZooKeeperUnavailableError(ClusterError):
    """No ZooKeeper session could be established within the connection timeout."""
