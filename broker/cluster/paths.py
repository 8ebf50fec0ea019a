"""Znode paths of Kafka 2.x (``kafka.zk.ZkData``), so pylog and Kafka tooling share one tree.

Only the paths are here; what each znode holds is ``broker.cluster.layout``. Path components that
come from users (topic, group) are checked to be one znode name: a "/" in a group id would
otherwise write somewhere else in the tree.
"""

from __future__ import annotations

from broker.cluster.names import validate_topic_name

__all__ = [
    "CONSUMERS", "BROKERS", "BROKER_IDS", "BROKER_TOPICS", "BROKER_SEQUENCE_ID", "CONFIG",
    "CONFIG_CHANGES", "CONFIG_CHANGE_PREFIX", "CONFIG_TOPICS", "CONFIG_CLIENTS", "CONFIG_USERS",
    "CONFIG_BROKERS", "ADMIN", "DELETE_TOPICS", "ISR_CHANGE_NOTIFICATION", "ISR_CHANGE_PREFIX",
    "LOG_DIR_EVENT_NOTIFICATION", "LOG_DIR_EVENT_PREFIX", "PRODUCER_ID_BLOCK", "CONTROLLER",
    "CONTROLLER_EPOCH", "CLUSTER_ID", "PERSISTENT_PATHS",
    "broker_id_path", "topic_path", "partitions_path", "partition_path", "partition_state_path",
    "topic_config_path", "entity_config_path", "ENTITY_TYPES", "delete_topic_path", "consumer_group_path", "consumer_offsets_path",
    "consumer_offset_path",
]

CONSUMERS = "/consumers"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQUENCE_ID = "/brokers/seqid"  # its zk version generates broker ids
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"  # PERSISTENT_SEQUENTIAL
CONFIG_TOPICS = "/config/topics"
CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"  # PERSISTENT_SEQUENTIAL
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "/log_dir_event_notification/log_dir_event_"  # PERSISTENT_SEQUENTIAL
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLER = "/controller"  # EPHEMERAL
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"

# ZkData.PersistentZkPaths: created (empty) at broker start-up, in this order.
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    CONFIG_BROKERS,
)


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{_non_negative(broker_id, 'broker id')}"


def topic_path(topic: str) -> str:
    validate_topic_name(topic)
    return f"{BROKER_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{_non_negative(partition, 'partition')}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def topic_config_path(topic: str) -> str:
    validate_topic_name(topic)
    return f"{CONFIG_TOPICS}/{topic}"


# ConfigType: the entity kinds with a /config/<type>/<name> znode.
ENTITY_TYPES = ("topics", "brokers", "users", "clients")


def entity_config_path(entity_type: str, name: str) -> str:
    """``/config/<type>/<name>``: ``brokers/<default>`` is the cluster-wide broker default,
    ``users``/``clients`` names arrive already sanitized (Kafka URL-encodes them)."""
    if entity_type == "topics":
        return topic_config_path(name)
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}")
    if entity_type == "users" and "/clients/" in name:  # a (user, client id) quota entity
        user, _, client = name.partition("/clients/")
        return f"{CONFIG}/users/{_znode_name(user, 'user')}/clients/{_znode_name(client, 'client')}"
    return f"{CONFIG}/{entity_type}/{_znode_name(name, entity_type[:-1])}"


def delete_topic_path(topic: str) -> str:
    validate_topic_name(topic)
    return f"{DELETE_TOPICS}/{topic}"


def consumer_group_path(group: str) -> str:
    return f"{CONSUMERS}/{_znode_name(group, 'group id')}"


def consumer_offsets_path(group: str) -> str:
    return f"{consumer_group_path(group)}/offsets"


def consumer_offset_path(group: str, topic: str, partition: int) -> str:
    validate_topic_name(topic)
    return f"{consumer_offsets_path(group)}/{topic}/{_non_negative(partition, 'partition')}"


def _non_negative(value: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, got {value!r}")
    return value


def _znode_name(name: str, what: str) -> str:
    """One path component: non-empty, no "/", not "." or ".." (ZooKeeper refuses those)."""
    if not isinstance(name, str) or not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"{what} {name!r} cannot be a znode name (empty, '/', NUL, '.' or '..')")
    return name
