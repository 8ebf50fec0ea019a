"""The registry of API specs, and the version ranges the broker advertises in ApiVersions.

``API_SPECS`` is what the codec *can* parse; ``SUPPORTED_API_VERSIONS`` is what the server
*offers* (the reference's "Full profile" column, plus the inter-broker APIs of ZooKeeper mode:
LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown). They differ on purpose: Produce v0-2 parse but
are answered with UNSUPPORTED_VERSION; Fetch/ListOffsets/OffsetForLeaderEpoch parse older
versions than are offered (OffsetCommit v0-1 and OffsetFetch v0 too: Kafka 4 removed them,
KIP-896); the classic group APIs are offered at the versions Apache Kafka 4.1 advertises, except
DescribeGroups v6, which the codec does not parse yet. Kafka 4.0 keeps advertising Produce from v0 because librdkafka
< 2.11.1 turned compression off otherwise (reference pitfall 8.1).
"""

from __future__ import annotations

from enum import IntEnum
from types import MappingProxyType

from broker.wire.api import ApiSpec
from broker.wire.apis.acls import (
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_ACLS,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from broker.wire.apis.alter_configs import (
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    AlterConfigsRequest,
    AlterConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from broker.wire.apis.create_partitions import (
    CREATE_PARTITIONS,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from broker.wire.apis.delete_records import (
    DELETE_RECORDS,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from broker.wire.apis.elect_leaders import (
    ELECT_LEADERS,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from broker.wire.apis.describe_log_dirs import (
    DESCRIBE_LOG_DIRS,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from broker.wire.apis.alter_partition_reassignments import (
    ALTER_PARTITION_REASSIGNMENTS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from broker.wire.apis.api_versions import API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse
from broker.wire.apis.controlled_shutdown import (
    CONTROLLED_SHUTDOWN,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from broker.wire.apis.create_topics import CREATE_TOPICS, CreateTopicsRequest, CreateTopicsResponse
from broker.wire.apis.delete_topics import DELETE_TOPICS, DeleteTopicsRequest, DeleteTopicsResponse
from broker.wire.apis.describe_cluster import (
    DESCRIBE_CLUSTER,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from broker.wire.apis.describe_configs import (
    DESCRIBE_CONFIGS,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from broker.wire.apis.describe_topic_partitions import (
    DESCRIBE_TOPIC_PARTITIONS,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from broker.wire.apis.fetch import FETCH, FetchRequest, FetchResponse
from broker.wire.apis.find_coordinator import (
    FIND_COORDINATOR,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from broker.wire.apis.init_producer_id import (
    INIT_PRODUCER_ID,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from broker.wire.apis.leader_and_isr import LEADER_AND_ISR, LeaderAndIsrRequest, LeaderAndIsrResponse
from broker.wire.apis.list_offsets import LIST_OFFSETS, ListOffsetsRequest, ListOffsetsResponse
from broker.wire.apis.list_partition_reassignments import (
    LIST_PARTITION_REASSIGNMENTS,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from broker.wire.apis.metadata import METADATA, MetadataRequest, MetadataResponse
from broker.wire.apis.offset_for_leader_epoch import (
    OFFSET_FOR_LEADER_EPOCH,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from broker.wire.apis.produce import PRODUCE, ProduceRequest, ProduceResponse
from broker.wire.apis.stop_replica import STOP_REPLICA, StopReplicaRequest, StopReplicaResponse
from broker.wire.apis.update_metadata import (
    UPDATE_METADATA,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
# The classic consumer-group APIs (issue 14): parsed, not yet served (no handlers).
from broker.wire.apis.delete_groups import DELETE_GROUPS, DeleteGroupsRequest, DeleteGroupsResponse
from broker.wire.apis.describe_groups import (
    DESCRIBE_GROUPS,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from broker.wire.apis.heartbeat import HEARTBEAT, HeartbeatRequest, HeartbeatResponse
from broker.wire.apis.join_group import JOIN_GROUP, JoinGroupRequest, JoinGroupResponse
from broker.wire.apis.leave_group import LEAVE_GROUP, LeaveGroupRequest, LeaveGroupResponse
from broker.wire.apis.list_groups import LIST_GROUPS, ListGroupsRequest, ListGroupsResponse
from broker.wire.apis.offset_commit import OFFSET_COMMIT, OffsetCommitRequest, OffsetCommitResponse
from broker.wire.apis.offset_delete import OFFSET_DELETE, OffsetDeleteRequest, OffsetDeleteResponse
from broker.wire.apis.offset_fetch import OFFSET_FETCH, OffsetFetchRequest, OffsetFetchResponse
from broker.wire.apis.sync_group import SYNC_GROUP, SyncGroupRequest, SyncGroupResponse
# The transaction APIs (issue 15): parsed; handlers advertise them in SUPPORTED_API_VERSIONS.
from broker.wire.apis.add_offsets_to_txn import (
    ADD_OFFSETS_TO_TXN,
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from broker.wire.apis.add_partitions_to_txn import (
    ADD_PARTITIONS_TO_TXN,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from broker.wire.apis.describe_producers import (
    DESCRIBE_PRODUCERS,
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from broker.wire.apis.describe_transactions import (
    DESCRIBE_TRANSACTIONS,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from broker.wire.apis.end_txn import END_TXN, EndTxnRequest, EndTxnResponse
from broker.wire.apis.list_transactions import (
    LIST_TRANSACTIONS,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from broker.wire.apis.txn_offset_commit import (
    TXN_OFFSET_COMMIT,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
# Authentication (issue 17): SASL and SCRAM credential administration.
from broker.wire.apis.sasl_authenticate import (
    SASL_AUTHENTICATE,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from broker.wire.apis.client_quotas import (
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_CLIENT_QUOTAS,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from broker.wire.apis.sasl_handshake import SASL_HANDSHAKE, SaslHandshakeRequest, SaslHandshakeResponse
from broker.wire.apis.user_scram_credentials import (
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from broker.wire.apis.write_txn_markers import (
    WRITE_TXN_MARKERS,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

__all__ = [
    "ApiKey", "API_SPECS", "SUPPORTED_API_VERSIONS", "spec_for",
    "ApiVersionsRequest", "ApiVersionsResponse",
    "ControlledShutdownRequest", "ControlledShutdownResponse",
    "CreateTopicsRequest", "CreateTopicsResponse",
    "DeleteTopicsRequest", "DeleteTopicsResponse",
    "DescribeClusterRequest", "DescribeClusterResponse",
    "DescribeConfigsRequest", "DescribeConfigsResponse",
    "DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse",
    "FetchRequest", "FetchResponse",
    "FindCoordinatorRequest", "FindCoordinatorResponse",
    "InitProducerIdRequest", "InitProducerIdResponse",
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "ListOffsetsRequest", "ListOffsetsResponse",
    "ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse",
    "MetadataRequest", "MetadataResponse",
    "OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse",
    "ProduceRequest", "ProduceResponse",
    "StopReplicaRequest", "StopReplicaResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
    "DeleteGroupsRequest", "DeleteGroupsResponse",
    "DescribeGroupsRequest", "DescribeGroupsResponse",
    "HeartbeatRequest", "HeartbeatResponse",
    "JoinGroupRequest", "JoinGroupResponse",
    "LeaveGroupRequest", "LeaveGroupResponse",
    "ListGroupsRequest", "ListGroupsResponse",
    "OffsetCommitRequest", "OffsetCommitResponse",
    "OffsetDeleteRequest", "OffsetDeleteResponse",
    "OffsetFetchRequest", "OffsetFetchResponse",
    "SyncGroupRequest", "SyncGroupResponse",
    "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse",
    "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse",
    "EndTxnRequest", "EndTxnResponse",
    "WriteTxnMarkersRequest", "WriteTxnMarkersResponse",
    "TxnOffsetCommitRequest", "TxnOffsetCommitResponse",
    "DescribeProducersRequest", "DescribeProducersResponse",
    "DescribeTransactionsRequest", "DescribeTransactionsResponse",
    "ListTransactionsRequest", "ListTransactionsResponse",
    "CreateAclsRequest", "CreateAclsResponse",
    "DeleteAclsRequest", "DeleteAclsResponse",
    "DescribeAclsRequest", "DescribeAclsResponse",
    "SaslHandshakeRequest", "SaslHandshakeResponse",
    "SaslAuthenticateRequest", "SaslAuthenticateResponse",
    "DescribeUserScramCredentialsRequest", "DescribeUserScramCredentialsResponse",
    "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse",
    "DescribeClientQuotasRequest", "DescribeClientQuotasResponse",
    "AlterClientQuotasRequest", "AlterClientQuotasResponse",
    "AlterConfigsRequest", "AlterConfigsResponse",
    "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse",
    "CreatePartitionsRequest", "CreatePartitionsResponse",
    "DeleteRecordsRequest", "DeleteRecordsResponse",
    "ElectLeadersRequest", "ElectLeadersResponse",
    "DescribeLogDirsRequest", "DescribeLogDirsResponse",
    "AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse",
]


class ApiKey(IntEnum):
    """Kafka's api keys (``org.apache.kafka.common.protocol.ApiKeys``) for the APIs we cover."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75


_ALL = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA,
    CONTROLLED_SHUTDOWN, FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS,
    INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, DESCRIBE_CLUSTER,
    DESCRIBE_TOPIC_PARTITIONS, LIST_PARTITION_REASSIGNMENTS,
    OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS,
    LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE,
    ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT,
    DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS,
    DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS,
    SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS,
    ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, CREATE_PARTITIONS, DELETE_RECORDS, ELECT_LEADERS,
    DESCRIBE_LOG_DIRS, ALTER_PARTITION_REASSIGNMENTS,
)

API_SPECS: MappingProxyType[int, ApiSpec] = MappingProxyType({spec.key: spec for spec in _ALL})

# (min, max) per api key, sent in our ApiVersions response.
SUPPORTED_API_VERSIONS: MappingProxyType[int, tuple[int, int]] = MappingProxyType({
    ApiKey.PRODUCE: (0, 12),  # v12: transaction version 2's implicit add (handlers/produce.py)
    ApiKey.FETCH: (4, 12),
    # v0 is gone from Kafka 4 (KIP-896) but served: Debian's Burrow 1.2.1 sends it.
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (0, 12),
    # Inter-broker APIs of ZooKeeper mode, advertised as Kafka 2.x advertises them (clients
    # ignore them); ControlledShutdown from v1, see its spec.
    ApiKey.LEADER_AND_ISR: (0, 4),
    ApiKey.STOP_REPLICA: (0, 3),
    ApiKey.UPDATE_METADATA: (0, 6),
    ApiKey.CONTROLLED_SHUTDOWN: (1, 3),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),  # v5 = v4 (TRANSACTION_ABORTABLE allowed); v6 (KIP-939) unstable in Kafka 4.1
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    # ACL admin (issue 17), Kafka 4.1's versions (v0 is gone, KIP-896).
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    # Dynamic configs (issue 18), Kafka 4.1's versions.
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),  # Kafka 4.1's: v0 went with KIP-896
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),  # Kafka 4.1: 0-1 (v1: allowReplicationFactorChange)
    # What Kafka 4's Java admin client asks before falling back to Metadata (kafka-topics).
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # The classic group protocol (broker/server/group_coordinator.py).
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # Transactions (broker/server/txn_coordinator.py), at Kafka 4.1's versions except
    # ListTransactions v2 (KIP-1152 id pattern). Transaction version 2 (KIP-890 part 2) is
    # served and finalized in ApiVersions (transaction.version 2, handlers/api_versions.py):
    # EndTxn v5 bumps the epoch at every EndTxn, Produce v12 and TxnOffsetCommit v5 add their
    # partition to the transaction implicitly, so Java clients skip AddPartitionsToTxn/AddOffsetsToTxn.
    # AddPartitionsToTxn v4-5 are the broker-to-broker verification form (KIP-890 part 1), which
    # clients never send; advertised, as by Kafka, so that other brokers' requests are served.
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),  # broker to broker; Kafka 4.1 serves v1 only (KIP-896)
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),  # as Kafka 4.1 (kafka-transactions describe-producers, find-hanging)
    # The group coordinator's (txn_offsets); v5 is transaction version 2 (KIP-890 part 2: the
    # offsets partition added implicitly, handlers/txn_offset_commit.py).
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    # Authentication (broker/server/authenticator.py), at Kafka 4.1's versions.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),  # client quotas (broker/server/quota.py), as Kafka 4.1
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
})

assert {int(key) for key in ApiKey} == set(API_SPECS), "ApiKey and API_SPECS disagree"
for _key, (_low, _high) in SUPPORTED_API_VERSIONS.items():
    assert _low in API_SPECS[_key].valid and _high in API_SPECS[_key].valid, _key


def spec_for(api_key: int) -> ApiSpec | None:
    return API_SPECS.get(api_key)
