"""CreatePartitions' plan (broker.server.partition_plan): the count must grow, given replicas
must fit the topic, and placed ones continue the topic's spread."""

from random import Random

import pytest

from broker.server.partition_plan import PartitionPlanError, plan_new_partitions
from broker.wire import ErrorCode

CURRENT = {0: [1, 2], 1: [2, 3], 2: [3, 1]}


def test_new_partitions_continue_the_spread_without_sharing_a_broker():
    plan = plan_new_partitions("t", CURRENT, 6, None, [1, 2, 3], Random(0))
    assert sorted(plan) == [3, 4, 5]
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in plan.values())
    assert sorted(r[0] for r in plan.values()) == [1, 2, 3]  # leaders spread over the brokers


def test_given_assignments_are_used_as_given():
    assert plan_new_partitions("t", CURRENT, 4, [[3, 2]], [1, 2, 3], Random(0)) == {3: [3, 2]}


@pytest.mark.parametrize("count, assignments, code, words", [
    (3, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
    (2, None, ErrorCode.INVALID_PARTITIONS, "The topic t currently has 3 partition(s); 2 would not be an increase."),
    (5, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 additional partition(s), but only 1"),
    (4, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "includes broker 9, but no such broker is registered"),
    (4, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "may not contain duplicate entries: 1"),
    (4, [[1, 2, 3]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a partition with 3 replica(s)"),
])
def test_refusals_in_kafkas_words(count, assignments, code, words):
    with pytest.raises(PartitionPlanError) as err:
        plan_new_partitions("t", CURRENT, count, assignments, [1, 2, 3], Random(0))
    assert err.value.error_code == code and words in err.value.message
