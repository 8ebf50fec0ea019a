"""The transaction coordinator (KIP-98) and the ``__transaction_state`` records.

``core.TxnCoordinatorCore`` is the pure state machine; ``records`` encodes and decodes Kafka's
key/value layout of the transaction log. The asyncio shell is ``broker.server.txn_coordinator``.
"""
