"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), KIP-554, as
Kafka's ZooKeeper-mode ``ZkAdminManager`` answers them (any broker writes ZooKeeper).

Describe: no users (null or empty) lists every user with a credential; a named user without one
is RESOURCE_NOT_FOUND (91); a name given twice DUPLICATE_RESOURCE (92). Only mechanisms and
iterations are ever returned.

Alter, one result per user: an unknown mechanism UNSUPPORTED_SASL_MECHANISM (33); an empty name,
iterations outside 4096..16384, or an empty salt/salted password UNACCEPTABLE_CREDENTIAL (93); a
mechanism both deleted and upserted, or twice, DUPLICATE_RESOURCE (92); deleting a credential that
does not exist RESOURCE_NOT_FOUND (91). A user with any error has none of its changes applied.

Authorization (ALTER / DESCRIBE on the cluster) is the authorizer's (issue 17 part 2).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from broker.security.scram import ITERATIONS_MAX, ITERATIONS_MIN, credential_from_salted, mechanism_name
from broker.security.scram import mechanism_id
from broker.server.context import BrokerContext
from broker.wire import (
    AlterUserScramCredentialsResponse,
    ApiKey,
    DescribeUserScramCredentialsResponse,
    ErrorCode,
)

__all__ = ["describe", "alter"]

_DResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = DescribeUserScramCredentialsResponse.CredentialInfo
_AResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def describe(ctx: BrokerContext, request) -> DescribeUserScramCredentialsResponse:
    store = ctx.credentials
    names = [user.name for user in request.users or []]
    if store is None:
        return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                    error_message=None, results=[])
    found = await asyncio.to_thread(_read, store, names)
    results, seen = [], set()
    for name in sorted(names or found):  # by name (Apache Kafka's order is a hash map's)
        if name in seen:
            continue
        seen.add(name)
        if names.count(name) > 1:
            results.append(_DResult(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                    error_message=f"Cannot describe SCRAM credentials for the same user twice "
                                                  f"in a single request: {name}", credential_infos=[]))
        elif not found.get(name):
            results.append(_DResult(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                    error_message=f"Attempt to describe a user credential that does not exist: "
                                                  f"{name}", credential_infos=[]))
        else:
            infos = [_Info(mechanism=mechanism_id(m), iterations=c.iterations) for m, c in sorted(found[name].items())]
            results.append(_DResult(user=name, error_code=ErrorCode.NONE, error_message="",
                                    credential_infos=infos))  # "" as Apache Kafka 4.1 sends it
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                error_message=None, results=results)


def _read(store, names: list[str]) -> dict:
    return {name: store.credentials(name) for name in (names or store.users())}


async def alter(ctx: BrokerContext, request) -> AlterUserScramCredentialsResponse:
    changes: dict[str, list] = defaultdict(list)  # user -> [("delete"|"upsert", item)], request order
    for item in request.deletions:
        changes[item.name].append(("delete", item))
    for item in request.upsertions:
        changes[item.name].append(("upsert", item))
    results = []
    for user, items in changes.items():
        error, message = _check(user, items)
        if error == ErrorCode.NONE:
            error, message = await asyncio.to_thread(_apply, ctx.credentials, user, items)
        results.append(_AResult(user=user, error_code=error, error_message=message))
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _check(user: str, items: list) -> tuple[int, str | None]:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanisms = []
    for kind, item in items:
        name = mechanism_name(item.mechanism)
        if name is None:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        mechanisms.append(name)
        if kind == "upsert":
            if item.iterations < ITERATIONS_MIN:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
            if item.iterations > ITERATIONS_MAX:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
            if not item.salt or not item.salted_password:
                return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    if len(set(mechanisms)) != len(mechanisms):
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    return ErrorCode.NONE, None


def _apply(store, user: str, items: list) -> tuple[int, str | None]:
    if store is None:
        return ErrorCode.UNKNOWN_SERVER_ERROR, "no credential store"
    existing = store.credentials(user)
    delete, upsert = [], {}
    for kind, item in items:
        name = mechanism_name(item.mechanism)
        if kind == "delete":
            if name not in existing:
                return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            delete.append(name)
        else:
            upsert[name] = credential_from_salted(name, bytes(item.salted_password), bytes(item.salt),
                                                  item.iterations)
    store.alter(user, upsert, delete)
    return ErrorCode.NONE, None
