"""Where ``pylog acls`` reads and writes ACLs: the ACL APIs of a running cluster, or ZooKeeper.

``ApiBackend`` speaks CreateAcls/DescribeAcls/DeleteAcls to any broker (each broker writes
ZooKeeper itself and the others follow the change notifications), raising ``ValueError`` with
Kafka's error name on a refusal (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED, ...), which the
command line prints as one line. ``ZooKeeperBackend`` is ``broker.auth.zk_store`` over a session of
its own.
"""

from __future__ import annotations

import time
from pathlib import Path

from kazoo.client import KazooClient

from broker.auth.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from broker.auth.zk_store import AclZkStore
from broker.client.admin import AdminClient
from broker.client.config import ClientConfig
from broker.wire import ApiKey, ErrorCode

__all__ = ["ApiBackend", "ZooKeeperBackend"]


def _check(code: int, message: str | None) -> None:
    if code == ErrorCode.NONE:
        return
    known = code in {int(e) for e in ErrorCode}
    name, default = (ErrorCode(code).name, ErrorCode(code).message) if known else (f"error {code}", "")
    raise ValueError(f"{name}: {message or default}")


def _filter_body(acl_filter: AclBindingFilter) -> dict:
    return {"resource_type_filter": int(acl_filter.resource_type), "resource_name_filter": acl_filter.resource_name,
            "pattern_type_filter": int(acl_filter.pattern_type), "principal_filter": acl_filter.principal,
            "host_filter": acl_filter.host, "operation": int(acl_filter.operation),
            "permission_type": int(acl_filter.permission_type)}


class ApiBackend:
    def __init__(self, bootstrap: str, timeout_ms: int, command_config: str | None = None) -> None:
        security = None
        if command_config is not None:
            from broker.client.security import client_security
            from broker.server.config import parse_properties
            security = client_security(parse_properties(Path(command_config).read_text()))
        self._admin = AdminClient(bootstrap, config=ClientConfig(client_id="pylog-acls", request_timeout_ms=timeout_ms,
                                                                 security=security))

    def _request(self, api_key: int, body: dict):
        conn = self._admin.cluster.any_connection()
        return conn.request(api_key, body, conn.version_for(api_key, min_version=1))

    def create(self, bindings: list[AclBinding]) -> None:
        response = self._request(ApiKey.CREATE_ACLS, {"creations": [{
            "resource_type": int(b.pattern.resource_type), "resource_name": b.pattern.name,
            "resource_pattern_type": int(b.pattern.pattern_type), "principal": b.entry.principal,
            "host": b.entry.host, "operation": int(b.entry.operation),
            "permission_type": int(b.entry.permission_type)} for b in bindings]})
        for result in response.results:
            _check(result.error_code, result.error_message)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        response = self._request(ApiKey.DESCRIBE_ACLS, _filter_body(acl_filter))
        _check(response.error_code, response.error_message)
        return [AclBinding(ResourcePattern(ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type)),
                           AccessControlEntry(a.principal, a.host, AclOperation(a.operation),
                                              AclPermissionType(a.permission_type)))
                for r in response.resources for a in r.acls]

    def delete(self, filters: list[AclBindingFilter]) -> None:
        response = self._request(ApiKey.DELETE_ACLS, {"filters": [_filter_body(f) for f in filters]})
        for result in response.filter_results:
            _check(result.error_code, result.error_message)

    def close(self) -> None:
        self._admin.close()


class ZooKeeperBackend:
    def __init__(self, connect: str, timeout_ms: int) -> None:
        self._zk = KazooClient(hosts=connect, timeout=timeout_ms / 1000)
        self._zk.start(timeout=timeout_ms / 1000)
        self._store = AclZkStore(self._zk, lambda: int(time.time() * 1000))
        self._store.ensure_paths()

    def create(self, bindings: list[AclBinding]) -> None:
        self._store.add(bindings)

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self._store.load_all().bindings(acl_filter)

    def delete(self, filters: list[AclBindingFilter]) -> None:
        for acl_filter in filters:
            self._store.remove(acl_filter)

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()
