"""Rules a new topic's replica assignment must follow (``AdminZkClient.validateTopicCreate``).

Checked before anything is written, so a bad request leaves ZooKeeper untouched. Only *new*
topics are held to these rules: an existing assignment read back from ZooKeeper may legally be
uneven (a reassignment in progress), so ``broker.cluster.layout`` parses without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from broker.cluster.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

__all__ = ["validate_new_assignment", "validate_config"]


def validate_new_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """Partitions are exactly 0..n-1 (n >= 1); every partition has the same replica count (>= 1);
    no partition names a broker twice; broker ids are non-negative ints."""
    if not assignment:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    partitions = sorted(assignment)
    if any(not _is_int(p) for p in partitions) or partitions != list(range(len(partitions))):
        raise InvalidReplicaAssignmentError(
            f"partitions should be a consecutive 0-based integer sequence, got {partitions}"
        )
    factors = {len(replicas) for replicas in assignment.values()}
    if len(factors) != 1:
        raise InvalidReplicationFactorError(
            f"All partitions should have the same number of replicas, got {sorted(factors)}"
        )
    if factors == {0}:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    for partition in partitions:
        replicas = list(assignment[partition])
        if any(not _is_int(b) or b < 0 for b in replicas):
            raise InvalidReplicaAssignmentError(
                f"partition {partition}: broker ids must be non-negative integers, got {replicas}"
            )
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Duplicate replica assignment found: partition {partition} -> {replicas}"
            )


def validate_config(config: Mapping[str, str]) -> None:
    """Topic configs travel as strings (``{"retention.ms":"1000"}``); anything else is refused
    here rather than stringified, so ``1000`` and ``"1e3"`` cannot be silently confused."""
    for key, value in config.items():
        if not isinstance(key, str) or not key:
            raise InvalidConfigurationError(f"config names must be non-empty strings, got {key!r}")
        if not isinstance(value, str):
            raise InvalidConfigurationError(
                f"config {key!r}: values must be strings, got {type(value).__name__} {value!r}"
            )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
