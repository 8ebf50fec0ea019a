"""One module per Kafka API. Each has ``API_KEY``, ``async handle(ctx, header, request)``
returning the response object (or None for no response), and ``error_response(header, request,
error_code)`` building the response that reports ``error_code`` everywhere (the dispatcher uses
it for versions the codec parses but the broker does not serve)."""

from __future__ import annotations

from types import MappingProxyType, ModuleType

from broker.server.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_user_scram_credentials,
    alter_configs,
    alter_partition_reassignments,
    api_versions,
    controlled_shutdown,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leader_and_isr,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stop_replica,
    sync_group,
    txn_offset_commit,
    update_metadata,
    write_txn_markers,
)
from broker.wire import SUPPORTED_API_VERSIONS

__all__ = ["HANDLERS"]

_MODULES: tuple[ModuleType, ...] = (
    api_versions, controlled_shutdown, create_topics, delete_topics, describe_cluster,
    describe_configs, describe_topic_partitions, fetch,
    find_coordinator, init_producer_id, leader_and_isr, list_offsets,
    list_partition_reassignments, metadata,
    offset_for_leader_epoch, produce, stop_replica, update_metadata,
    # the classic group protocol (group_common.forward to the group coordinator)
    delete_groups, describe_groups, heartbeat, join_group, leave_group, list_groups,
    offset_commit, offset_delete, offset_fetch, sync_group,
    # transactions (txn_common.forward to the transaction coordinator)
    add_partitions_to_txn, add_offsets_to_txn, end_txn, describe_transactions, list_transactions,
    write_txn_markers,  # partition leaders append the coordinator's markers
    describe_producers,  # a partition leader's producers and open transactions (KIP-664)
    txn_offset_commit,  # to the group coordinator (offsets pending until the transaction's marker)
    create_acls, delete_acls, describe_acls,  # ACL admin (broker/auth; request_auth checks the cluster ops)
    # authentication: the SASL gate serves these before authentication; after it, ILLEGAL_SASL_STATE
    sasl_handshake, sasl_authenticate,
    describe_user_scram_credentials, alter_user_scram_credentials,  # SCRAM users in ZooKeeper
    describe_client_quotas, alter_client_quotas,  # client quotas in ZooKeeper (quota.py, quota_store.py)
    alter_configs, incremental_alter_configs,  # dynamic configs (ZooKeeper, config_changes)
    create_partitions,  # on the controller (broker.server.partition_plan)
    delete_records,  # on partition leaders
    elect_leaders,  # on the controller
    describe_log_dirs,  # this broker's log directories
    alter_partition_reassignments,  # on the controller (broker.controller.reassignment)
)

HANDLERS: MappingProxyType[int, ModuleType] = MappingProxyType(
    {int(module.API_KEY): module for module in _MODULES}
)

assert set(HANDLERS) == {int(key) for key in SUPPORTED_API_VERSIONS}, "a served API has no handler"
