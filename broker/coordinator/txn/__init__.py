"""The transaction coordinator (KIP-98) and the ``__transaction_state`` records.

``core.TxnCoordinatorCore`` is the pure state machine (its docstring is the contract with the
shell); ``apis`` holds the request handlers (Kafka's TransactionCoordinator), ``state`` the
states, their legal transitions and the per-id metadata, ``shard`` one loaded partition and the
replay of its records, ``records`` Kafka's key/value layout of the transaction log, ``responses``
the wire responses and error codes, ``effects`` the effects and settings. The asyncio shell is
``broker.server.txn_coordinator``; the simulation tier ``broker.sim.txns``.
"""
