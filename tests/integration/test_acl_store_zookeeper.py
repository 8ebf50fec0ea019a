"""broker.auth.zk_store.AclZkStore against a real ZooKeeper: brokers changing one resource's
ACLs at once (CreateAcls / DeleteAcls on each) all land.

One writer's read of the pattern is held until another session has changed the pattern, so its
write is the one ZooKeeper must refuse (NodeExists for the first ACL of a resource, BadVersion
after), and the store must read again and apply its change on top, never write its stale set over
the newer one - also when the znode was deleted and made again up to the very version it read.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

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


class _HeldStore(AclZkStore):
    """Its first read for an update is held until ``proceed`` is set."""

    def __init__(self, zk: KazooClient) -> None:
        super().__init__(zk, lambda: int(time.time() * 1000))
        self.first_read, self.proceed = threading.Event(), threading.Event()
        self.reads = 0

    def _read_for_update(self, pattern):
        answer = super()._read_for_update(pattern)
        self.reads += 1
        if self.reads == 1:
            self.first_read.set()
            assert self.proceed.wait(CALL_TIMEOUT_S)
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


@contextmanager
def _held(client, write):
    """``write(store)`` in a thread, its first read held while the block runs; gives the answer
    holder ``[answer]`` filled once it is done."""
    store, answer = _HeldStore(client), []
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(write, store)
        assert store.first_read.wait(CALL_TIMEOUT_S)
        yield answer
        store.proceed.set()
        answer.append(future.result(CALL_TIMEOUT_S))
    assert store.reads == 2  # refused once, read again


def test_concurrent_creates_and_deletes_on_one_resource_all_land(two_brokers_sessions):
    mine, theirs = two_brokers_sessions
    other = AclZkStore(theirs, lambda: int(time.time() * 1000))
    other.ensure_paths()
    notified = len(theirs.get_children(LITERAL_CHANGES))

    # the first ACL of the resource from both: the held create finds the znode and sets
    with _held(mine, lambda s: s.add([_acl("User:alice")])):
        other.add([_acl("User:bob")])
    assert other.read_pattern(TOPIC)[0] == {_acl("User:alice").entry, _acl("User:bob").entry}

    # a delete against a set: the delete answers what it removed, once
    alices = AclBindingFilter(Rt.TOPIC, TOPIC.name, PatternType.LITERAL, "User:alice")
    index = other.load_all()  # what DeleteAcls matched its filter against
    with _held(mine, lambda s: s.remove(alices, index)) as removed:
        other.add([_acl("User:carol")])
    assert removed == [[_acl("User:alice")]]
    assert other.read_pattern(TOPIC) == ({_acl("User:bob").entry, _acl("User:carol").entry}, 3)

    # read at version 3; meanwhile every ACL goes (the znode is deleted) and four new ones come,
    # the znode made again and set up to version 3: the held set must still be refused
    with _held(mine, lambda s: s.add([_acl("User:dave")])):
        other.remove(AclBindingFilter(Rt.TOPIC, TOPIC.name, PatternType.LITERAL))
        for name in ("erin", "frank", "gina", "hal"):
            other.add([_acl(f"User:{name}")])
        assert other.read_pattern(TOPIC)[1] == 3
    assert other.read_pattern(TOPIC)[0] == {_acl(f"User:{name}").entry
                                            for name in ("erin", "frank", "gina", "hal", "dave")}

    # every change told the brokers
    assert len(theirs.get_children(LITERAL_CHANGES)) - notified == 2 + 2 + 6
