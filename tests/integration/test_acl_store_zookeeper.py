"""broker.auth.zk_store.AclZkStore against a real ZooKeeper: two brokers changing one resource's
ACLs at once (CreateAcls / DeleteAcls on each) both land.

Both writers read the pattern znode at the same version before either writes (a barrier in their
first read), so the second write is the one ZooKeeper refuses with BadVersion (or NodeExists for
the first ACL of a resource); the store must read again and apply its change on top, as Kafka's
ZooKeeper authorizer did, never write its stale set over the other's.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from kazoo.client import KazooClient

from broker.auth.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation as Op,
    AclPermissionType as Perm,
    PatternType,
    ResourcePattern,
    ResourceType as Rt,
)
from broker.auth.zk_codec import LITERAL_CHANGES
from broker.auth.zk_store import AclZkStore

pytestmark = pytest.mark.integration

TOPIC = ResourcePattern(Rt.TOPIC, "ledger", PatternType.LITERAL)
CALL_TIMEOUT_S = 20


def _acl(principal: str, op: Op = Op.WRITE) -> AclBinding:
    return AclBinding(TOPIC, AccessControlEntry(principal, "*", op, Perm.ALLOW))


class _MeetingStore(AclZkStore):
    """Its first read of a pattern waits until the other writer has read too."""

    def __init__(self, zk: KazooClient, barrier: threading.Barrier) -> None:
        super().__init__(zk, lambda: int(time.time() * 1000))
        self._barrier = barrier
        self.reads = 0

    def read_pattern(self, pattern):
        answer = super().read_pattern(pattern)
        self.reads += 1
        if self.reads == 1:
            self._barrier.wait(CALL_TIMEOUT_S)
        return answer


@pytest.fixture
def two_brokers_sessions(zk_connect):
    clients = [KazooClient(hosts=zk_connect) for _ in range(2)]
    for client in clients:
        client.start(timeout=CALL_TIMEOUT_S)
    try:
        yield clients
    finally:
        for client in clients:
            client.stop()
            client.close()


def _race(clients, first, second):
    """Run ``first(store)`` and ``second(store)`` on two sessions, both reading before writing."""
    barrier = threading.Barrier(2)
    stores = [_MeetingStore(client, barrier) for client in clients]
    with ThreadPoolExecutor(2) as pool:
        results = [pool.submit(first, stores[0]), pool.submit(second, stores[1])]
        answers = [r.result(CALL_TIMEOUT_S) for r in results]
    return stores, answers


def test_concurrent_creates_and_a_delete_on_one_resource_all_land(two_brokers_sessions):
    plain = AclZkStore(two_brokers_sessions[0], lambda: int(time.time() * 1000))
    plain.ensure_paths()
    notified = len(two_brokers_sessions[0].get_children(LITERAL_CHANGES))

    # the first ACL of the resource from both: one create wins, the other finds the znode and sets
    stores, _ = _race(two_brokers_sessions, lambda s: s.add([_acl("User:alice")]),
                      lambda s: s.add([_acl("User:bob")]))
    assert plain.read_pattern(TOPIC)[0] == {_acl("User:alice").entry, _acl("User:bob").entry}
    assert max(s.reads for s in stores) >= 2  # one of them did read again

    # a set against a set (version check), and a delete against a set
    alices = AclBindingFilter(Rt.TOPIC, TOPIC.name, PatternType.LITERAL, "User:alice")
    index = plain.load_all()  # what DeleteAcls matched its filter against
    _, (_, removed) = _race(two_brokers_sessions, lambda s: s.add([_acl("User:carol")]),
                            lambda s: s.remove(alices, index))
    assert removed == [_acl("User:alice")]
    entries, version = plain.read_pattern(TOPIC)
    assert entries == {_acl("User:bob").entry, _acl("User:carol").entry}
    assert version == 3  # created, then one set per change: none overwrote another

    # every change told the brokers
    assert len(two_brokers_sessions[0].get_children(LITERAL_CHANGES)) - notified == 4
