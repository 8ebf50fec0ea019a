"""Find the coordinator of a consumer group or of a transactional id (FindCoordinator, key 10),
for the blocking client: the consumer's group membership, ``pylog groups`` and the admin tools.

Usage::

    from broker.client.coordinator import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, find_coordinator

    node = find_coordinator(cluster, "my-group")                      # a group (key type 0)
    node = find_coordinator(cluster, "tx-1", KEY_TYPE_TRANSACTION)    # a transactional id
    node.node_id, node.host, node.port                                # also unpacks as a tuple
    conn = cluster.connection(node.node_id)

``find_coordinator(cluster, key, key_type=KEY_TYPE_GROUP, *, timeout_ms=None) -> Coordinator``

* asks any reachable broker (``Cluster.any_connection``) at the highest FindCoordinator version
  both sides speak (``BrokerConnection.version_for``): v4+ sends the key in
  ``coordinator_keys`` and reads ``coordinators[0]`` (KIP-699), v1-3 send ``key``/``key_type``,
  v0 knows only groups (so a transactional id needs v1+);
* retries COORDINATOR_NOT_AVAILABLE (15: e.g. the internal topic is being created, or its
  partition has no leader) and COORDINATOR_LOAD_IN_PROGRESS (14), and a lost connection or a
  request timeout, with exponential backoff from ``config.retry_backoff_ms`` up to
  ``RETRY_BACKOFF_MAX_MS``, until ``timeout_ms`` (default ``config.request_timeout_ms``)
  has passed; then raises the last error;
* raises any other error code at once as ``KafkaError`` (e.g. GROUP_AUTHORIZATION_FAILED,
  INVALID_REQUEST), carrying the broker's error message when it sent one.

It does not cache: a caller that keeps the answer drops it on NOT_COORDINATOR (16) or on the
two codes above from the coordinator, and calls again (reference coordinators.md section 2).
"""

from __future__ import annotations

from typing import NamedTuple

from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster
from broker.wire import ApiKey, ErrorCode

__all__ = [
    "Coordinator", "find_coordinator", "KEY_TYPE_GROUP", "KEY_TYPE_TRANSACTION",
    "RETRY_BACKOFF_MAX_MS",
]

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
RETRY_BACKOFF_MAX_MS = 1_000  # Kafka's retry.backoff.max.ms default (KIP-580)

_RETRIED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_KEY_NAMES = {KEY_TYPE_GROUP: "group", KEY_TYPE_TRANSACTION: "transactional id"}


class Coordinator(NamedTuple):
    """The broker that coordinates a key (a tuple, so ``node_id, host, port = ...`` works)."""

    node_id: int
    host: str
    port: int


def find_coordinator(cluster: Cluster, key: str, key_type: int = KEY_TYPE_GROUP, *,
                     timeout_ms: float | None = None) -> Coordinator:
    """The coordinator of ``key`` (see the module docstring for versions, retries, errors)."""
    if key_type not in _KEY_NAMES:
        raise ValueError(f"key_type {key_type}: expected {KEY_TYPE_GROUP} (group) or "
                         f"{KEY_TYPE_TRANSACTION} (transactional id)")
    clock, config = cluster.clock, cluster.config
    deadline_ms = clock.monotonic_ms() + (config.request_timeout_ms if timeout_ms is None else timeout_ms)
    backoff_ms = max(config.retry_backoff_ms, 1)
    what = f"{_KEY_NAMES[key_type]} {key!r}"
    while True:
        try:
            return _ask(cluster, key, key_type, what)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            error: KafkaError = exc
            cluster.invalidate()
        except KafkaError as exc:
            if exc.code not in _RETRIED:
                raise
            error = exc
        remaining_ms = deadline_ms - clock.monotonic_ms()
        if remaining_ms <= 0:
            raise error
        clock.sleep_ms(min(backoff_ms, remaining_ms))
        backoff_ms = min(backoff_ms * 2, RETRY_BACKOFF_MAX_MS)


def _ask(cluster: Cluster, key: str, key_type: int, what: str) -> Coordinator:
    """One FindCoordinator round trip; a non-zero error code raises ``KafkaError``."""
    conn = cluster.any_connection()
    version = conn.version_for(ApiKey.FIND_COORDINATOR, min_version=0 if key_type == KEY_TYPE_GROUP else 1)
    if version >= 4:
        body = {"key_type": key_type, "coordinator_keys": [key]}
    else:
        body = {"key": key, "key_type": key_type}
    response = conn.request(ApiKey.FIND_COORDINATOR, body, version)
    if version >= 4:
        answers = [c for c in response.coordinators if c.key == key]
        if not answers:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"FindCoordinator v{version} from {conn.address}: no answer for {what}")
        answer = answers[0]
    else:
        answer = response
    if answer.error_code != ErrorCode.NONE:
        message = getattr(answer, "error_message", None) if version >= 1 else None
        detail = f": {message}" if message else f": {KafkaError(answer.error_code).message}"
        raise KafkaError(answer.error_code, f"FindCoordinator for {what}{detail}")
    return Coordinator(answer.node_id, answer.host, answer.port)
