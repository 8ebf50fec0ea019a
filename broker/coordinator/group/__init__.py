"""The group coordinator (Kafka's classic group protocol) and the ``__consumer_offsets`` records.

``core.GroupCoordinatorCore`` is the pure state machine; ``records`` encodes and decodes Kafka's
key/value layout of the offsets topic. The asyncio shell is ``broker.server.group_coordinator``.
"""
