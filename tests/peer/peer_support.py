"""Helpers of the peer tier that tests import (conftest.py holds only fixtures): ``Peer``, the
settings both systems share, and unique topic names."""

from __future__ import annotations

import functools
import inspect
import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from broker.client.admin import AdminClient

# Broker settings both sides share, so a difference in behaviour is never a difference in config:
# topics are created explicitly, and the same message size limit holds on both. Retention runs
# every 500 ms (not 5 min) from the start (Kafka's log.initial.task.delay.ms is 30 s by default;
# pylog has no such delay and ignores the key), so a test can move a log start offset with
# retention.bytes. The log cleaner looks for work every 100 ms (Kafka's log.cleaner.backoff.ms is
# 15 s), so a compacted topic is cleaned soon after its active segment rolls. A group's first
# rebalance completes at once (Kafka's group.initial.rebalance.delay.ms is 3 s by default, which
# ApacheKafkaCluster already lowers to 0), so a group scenario waits for its members only. The
# transaction coordinator looks for transactions past their transaction.timeout.ms every second
# (Kafka's default is every 10 s), so a timeout scenario waits about its own timeout. A group
# member's session may be as short as 1 s (Kafka's group.min.session.timeout.ms is 6 s), so a
# scenario that waits for a member to be expelled waits ~1.5 s, not 6.
GROUP_MIN_SESSION_TIMEOUT_MS = 1_000
COMMON_BROKER_SETTINGS = {
    "auto.create.topics.enable": "false",
    "message.max.bytes": "1048588",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "0",
    "log.cleaner.backoff.ms": "100",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "group.min.session.timeout.ms": str(GROUP_MIN_SESSION_TIMEOUT_MS),
}
_topic_numbers = itertools.count()


def internal_topic_settings(nodes: int) -> dict[str, str]:
    """What ``ApacheKafkaCluster`` gives Apache Kafka for its internal topics (replication factor
    min(3, nodes), transaction min ISR min(2, nodes)), for pylog's side of the same size: both then
    create ``__consumer_offsets`` and ``__transaction_state`` alike on first use."""
    return {
        "offsets.topic.replication.factor": str(min(3, nodes)),
        "transaction.state.log.replication.factor": str(min(3, nodes)),
        "transaction.state.log.min.isr": str(min(2, nodes)),
    }


@dataclass
class Peer:
    """One system under comparison: ``name`` is ``"kafka"`` or ``"pylog"``. ``data_dirs`` are
    the brokers' log dirs (``<dir>/<topic>-<partition>/<base offset>.log``), in broker order."""

    name: str
    bootstrap: str
    ports: list[int]
    data_dirs: list[Path] = field(default_factory=list)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, str] | None = None) -> str:
        with AdminClient(self.bootstrap) as admin:
            admin.create_topics(name, partitions, replication_factor, configs or {})
        return name

    def __str__(self) -> str:
        return self.name


def unique_topic(prefix: str = "peer") -> str:
    return f"{prefix}-{next(_topic_numbers)}"


def on_both_peers(param: str = "peer"):
    """Run a test written for one system (its ``param`` argument, e.g. ``peer``) on Apache Kafka and
    on pylog at once, in two threads, instead of as two parametrized tests one after the other.

    Why: most of a peer scenario is waiting (a rebalance, a session or poll timeout, a tool's
    JVM), so the two systems' halves overlap instead of adding up; the body and every assertion
    stay as they were, each made on each system. The decorated test asks for ``peers`` instead of
    ``param`` (other fixtures and parametrize arguments pass through). A failure on one side is
    raised with a note naming the system; failures on both are raised together.
    """
    def decorate(test):
        signature = inspect.signature(test)
        rest = [p for p in signature.parameters.values() if p.name != param]
        both_param = inspect.Parameter("peers", inspect.Parameter.POSITIONAL_OR_KEYWORD)

        @functools.wraps(test)
        def both(peers, **kwargs):
            with ThreadPoolExecutor(len(peers), thread_name_prefix=test.__name__) as pool:
                futures = [(peer, pool.submit(test, **{param: peer}, **kwargs)) for peer in peers]
                failures = []
                for peer, future in futures:
                    if (error := future.exception()) is not None:
                        error.add_note(f"(on {peer.name})")
                        failures.append(error)
            if len(failures) == 1:
                raise failures[0]
            if failures:
                raise BaseExceptionGroup(f"{test.__name__} failed on both systems", failures)

        both.__signature__ = signature.replace(parameters=[both_param, *rest])  # what pytest passes
        return both

    return decorate
