"""What the producer's user threads and its I/O thread share: its settings and its state.

A module of its own so that ``producer.py`` (the user threads' side) and the sender modules
(``sender.py``, ``batch_outcomes.py``) build on one definition without importing each other;
the locking rules are in ``broker.client.sender``'s docstring.
"""

from __future__ import annotations

import socket
import threading
from collections import defaultdict
from dataclasses import dataclass, field

from broker.client.accumulator import RecordAccumulator
from broker.client.config import ClientConfig
from broker.client.errors import KafkaError

__all__ = ["ProducerSettings", "ProducerState"]


@dataclass(frozen=True)
class ProducerSettings:
    acks: int
    idempotent: bool
    compression: int
    retries: int
    delivery_timeout_ms: int
    request_bytes_max: int
    max_in_flight: int
    config: ClientConfig
    transactional_id: str | None = None  # set: batches join the open transaction (``transactions``)


@dataclass
class ProducerState:
    """Everything user threads and the sender share; guarded by ``lock`` (and ``cond`` on it)."""

    accumulator: RecordAccumulator
    lock: threading.Lock = field(default_factory=threading.Lock)
    cond: threading.Condition = None  # type: ignore[assignment]
    partitions: dict[str, int] = field(default_factory=dict)  # topic -> partition count
    metadata_wanted: set[str] = field(default_factory=set)
    metadata_errors: dict[str, KafkaError] = field(default_factory=dict)
    force_serial: int = -1  # batches up to this serial are ready regardless of linger (flush)
    buffer_waiters: int = 0  # user threads blocked on buffer_bytes_max: everything is ready
    unreported: list = field(default_factory=list)  # failed batches not yet raised by flush
    callbacks_due: list = field(default_factory=list)  # completed batches with on_delivery callbacks
    callbacks_running: bool = False  # the I/O thread is calling some (flush waits for them)
    reported: set = field(default_factory=set)  # failed deliveries already raised by get()
    stats: dict = field(default_factory=lambda: defaultdict(int))
    closing: bool = False
    abandon: bool = False  # close(flush=False): fail what is not in flight
    fatal: BaseException | None = None  # the sender thread died of a bug
    sender_sleeping: bool = False
    sender_wakes_at_ms: float = float("inf")  # when the sleeping I/O thread runs its next turn
    turn_wanted: bool = False  # a user thread found the I/O thread mid-turn with work for it
    wake_w: socket.socket | None = None

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)
        self.stats["sender_wakeups"] = 0  # wake-up bytes written to the sleeping I/O thread
        self.stats["batches_left_to_answers"] = 0  # opened at linger 0, sent by an answer's turn

    def wake(self, unless_awake_by_ms: float | None = None) -> None:
        """Wake the sender out of ``select`` (call with the lock held); not when it wakes by
        itself by ``unless_awake_by_ms`` anyway (a wake-up costs the I/O thread a turn, and a
        GIL hand-off to it)."""
        if unless_awake_by_ms is not None and self.sender_wakes_at_ms <= unless_awake_by_ms:
            return
        if self.sender_sleeping and self.wake_w is not None:
            self.sender_sleeping = False
            self.stats["sender_wakeups"] += 1
            try:
                self.wake_w.send(b"\0")
            except (BlockingIOError, OSError):
                pass  # the pipe is full or closed: the sender is awake or gone either way
