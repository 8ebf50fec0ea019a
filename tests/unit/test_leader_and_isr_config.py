"""A LeaderAndIsr for a topic this broker's metadata does not know yet (the controller outran
the ZooKeeper watch) opens the log with the topic's overrides read from ZooKeeper, not with the
broker's defaults (broker/server/handlers/leader_and_isr.py)."""

from __future__ import annotations

from test_server_harness import Harness, run

from broker.wire import ApiKey, LeaderAndIsrRequest


class _ConfigStore:
    """What ZooKeeper holds under /config/topics (the handler reads through ``read``)."""

    def __init__(self, topics: dict) -> None:
        self.topics, self.reads = topics, []

    async def read(self, entity_type: str, name: str) -> dict:
        self.reads.append((entity_type, name))
        return self.topics.get(name, {})


def test_a_new_topics_log_opens_with_its_overrides(tmp_path):
    harness = Harness(tmp_path, broker_id=1)
    store = harness.context.config_store = _ConfigStore({"fresh": {"segment.bytes": "65536", "retention.ms": "1234"}})
    try:
        state = LeaderAndIsrRequest.LeaderAndIsrPartitionState(
            partition_index=0, controller_epoch=1, leader=1, leader_epoch=0, isr=[1], zk_version=0,
            replicas=[1], is_new=True)
        request = LeaderAndIsrRequest(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
            LeaderAndIsrRequest.LeaderAndIsrTopicState(topic_name="fresh", partition_states=[state])], live_leaders=[])
        response = run(harness.call(ApiKey.LEADER_AND_ISR, 4, request))
        assert (response.error_code, [e.error_code for e in response.partition_errors]) == (0, [0])
        assert store.reads == [("topics", "fresh")]
        log = harness.replicas.get("fresh", 0).log
        assert (log.config.segment_bytes, log.config.retention_ms) == (65536, 1234)
    finally:
        harness.close()
