"""Cluster metadata in ZooKeeper, in Kafka 2.x's layout, so Kafka's tools read pylog's tree.

- ``names``: topic name rules (``Topic.validate``) and the "." / "_" metric-name collision.
- ``assignment``: the rules a new topic's replica assignment and config must follow.
- ``paths``: every znode path (``ZkData``); ``layout``: what each znode holds (pure codecs).
- ``zk``: ``KafkaZkClient``, the blocking kazoo adapter that reads and writes them.
- ``errors``: typed errors carrying Kafka error codes.
"""
