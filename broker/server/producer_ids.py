"""Producer ids for InitProducerId, handed out from blocks reserved in ZooKeeper.

Each broker claims ``[block_start, block_end]`` (1000 ids, Kafka's ``ProducerIdManager``) from
``/latest_producer_id_block`` with a conditional write, and hands them out one by one; ids are
never reused, even across restarts (a restarted broker claims a fresh block). Claiming is
blocking ZooKeeper I/O, so it runs in a worker thread, one claim at a time (``_lock``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from broker.cluster.layout import ProducerIdBlock

__all__ = ["ProducerIdManager"]

logger = logging.getLogger(__name__)


class ProducerIdManager:
    def __init__(self, claim_block: Callable[[], ProducerIdBlock]) -> None:
        """``claim_block`` is blocking (``KafkaZkClient.allocate_producer_id_block`` bound to
        this broker's id); it runs off the event loop."""
        self._claim_block = claim_block
        self._next = 0
        self._end = -1  # inclusive; empty until the first claim
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                block = await asyncio.to_thread(self._claim_block)
                logger.info("claimed producer ids %d..%d", block.block_start, block.block_end)
                self._next, self._end = block.block_start, block.block_end
            producer_id = self._next
            self._next += 1
            return producer_id
