"""pylog's Kafka client, used by the ``pylog`` CLI, the tests and Spark tasks.

It speaks only the Kafka protocol (``broker.wire``) and RecordBatch v2 (``broker.records``), so
it works against pylog and against a real Kafka cluster alike. Standard-library sockets, no
asyncio. ``AdminClient`` and ``Consumer`` have one owner thread and no thread of their own
(except a group member's heartbeat thread, ``group_membership``);
``Producer`` is thread-safe and runs one I/O thread (see ``broker.client.sender``).

    from broker.client import AdminClient, Producer, Consumer
    with AdminClient("localhost:9092") as admin:
        admin.create_topics("orders", partitions=3, replication_factor=1)
    with Producer("localhost:9092") as producer:
        producer.send("orders", b"value", key=b"k")
        producer.send_arrow("orders", arrow_table)          # key/value columns, vectorized
    with Consumer("localhost:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("orders", 0)])
        records = consumer.poll(timeout_ms=1000)
        table = consumer.poll_arrow(timeout_ms=1000)         # Spark's Kafka source schema
    with Consumer("localhost:9092", group_id="loads") as consumer:   # a consumer group member
        consumer.subscribe(["orders"], on_revoke=print)      # range / roundrobin / cooperative-sticky
        records = consumer.poll(timeout_ms=1000)             # joins; a heartbeat thread keeps it in
        consumer.commit()                                    # auto-commit is on by default too
"""

from broker.client.admin import AdminClient, TopicDescription
from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock, SystemClock
from broker.client.connection import BrokerConnection
from broker.client.consumer import Consumer
from broker.client.errors import (
    DeliveryFailed,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from broker.client.fetched import ConsumerRecord
from broker.client.group_commit import OffsetAndMetadata
from broker.client.group_state import CommitFailedError, FencedInstanceIdError, RebalanceInProgressError
from broker.client.metadata import BrokerInfo, Cluster, PartitionMetadata, TopicMetadata, parse_bootstrap_servers
from broker.client.partitioner import murmur2
from broker.client.producer import ArrowDeliveries, BatchDelivery, Delivery, Producer
from broker.client.transactions import PreparedTransaction
from broker.client.txn_state import ProducerFencedError, TransactionAbortableError, TxnStateError

__all__ = [
    "AdminClient", "TopicDescription",
    "ClientConfig", "Clock", "SystemClock", "SYSTEM_CLOCK",
    "BrokerConnection",
    "Consumer", "ConsumerRecord", "OffsetAndMetadata",
    "CommitFailedError", "RebalanceInProgressError", "FencedInstanceIdError",
    "KafkaError", "KafkaConnectionError", "KafkaTimeoutError", "KafkaProtocolError", "DeliveryFailed",
    "Cluster", "BrokerInfo", "PartitionMetadata", "TopicMetadata", "parse_bootstrap_servers",
    "murmur2",
    "Producer", "Delivery", "BatchDelivery", "ArrowDeliveries",
    "PreparedTransaction", "ProducerFencedError", "TransactionAbortableError", "TxnStateError",
]
