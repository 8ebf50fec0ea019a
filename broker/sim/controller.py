"""``SimController``: ``broker.server.controller.ControllerService`` over the simulator.

Watch events are coalesced and taken one at a time in the service's priority order (resign,
elect, re-initialize, brokers, topics, ISR changes, then rebalance); ``ControllerMovedError``
resigns, any other ZooKeeper error re-initializes after a backoff. The requests the core returns
go to one ordered queue per broker, each request waiting for its answer and retried while the
broker is live (``ControllerChannelManager``).
"""

from __future__ import annotations

from collections import deque

from broker.cluster.errors import ClusterError, ControllerMovedError
from broker.controller import ControllerCore, ControllerSettings
from broker.controller.core import ShutdownResult
from broker.sim import messages as m
from broker.sim.zookeeper import SimConnectionLoss
from broker.wire import ErrorCode

__all__ = ["SimController"]


class _ZkProxy:
    """The controller core keeps one ZooKeeper object; sessions change under it."""

    def __init__(self, node: "SimBroker") -> None:
        self._node = node

    def __getattr__(self, name: str):
        return getattr(self._node.zk, name)


class SimController:
    """``ControllerService`` over the simulator: coalesced events, one at a time, and one
    ordered send queue per broker."""

    _ORDER = ("resign", "elect", "reinit", "brokers", "topics", "isr")

    def __init__(self, node: SimBroker) -> None:
        self.node = node
        self.core = ControllerCore(node.id, _ZkProxy(node), ControllerSettings(
            auto_leader_rebalance_enable=True))
        self._pending: set[str] = set()
        self._scheduled = False
        self._queues: dict[int, deque] = {}
        self._busy: set[int] = set()
        self._live: set[int] = set()

    def mark(self, event: str) -> None:
        self._pending.add(event)
        if not self._scheduled:
            self._scheduled = True
            self.node.after(self.node.sim.rng.randint(0, 5), self._process)

    def on_controller_changed(self) -> None:
        try:
            controller_id = self.node.zk.get_controller_id()
        except SimConnectionLoss:
            return
        if controller_id == -1:
            self.mark("elect")
        elif controller_id != self.node.id and self.core.active:
            self.mark("resign")

    def resign(self) -> None:
        if self.core.active:
            self.core.on_resigned()
        self._queues.clear()

    def _process(self) -> None:
        self._scheduled = False
        for event in self._ORDER:
            if event in self._pending:
                self._pending.discard(event)
                self._handle(event)
                break
        else:
            if "rebalance" in self._pending:
                self._pending.discard("rebalance")
                if self.core.active:
                    self._run(self.core.on_auto_rebalance)
        if self._pending and not self._scheduled:
            self._scheduled = True
            self.node.after(1, self._process)

    def _handle(self, event: str) -> None:
        core = self.core
        if event == "resign":
            self.resign()
        elif event == "elect":
            if not core.active:
                self._elect()
        elif event == "reinit":
            if core.active:
                self._run(core.on_elected, core.ctx.epoch, core.ctx.epoch_zk_version)
        elif core.active:
            self._run({"brokers": core.on_broker_change, "topics": core.on_topic_change,
                       "isr": core.on_isr_change}[event])

    def _elect(self) -> None:
        try:
            won = self.node.zk.register_controller(self.node.id, self.node.sim.scheduler.now_ms)
            if won is None:
                won = self.node.zk.owned_controller_epoch()
        except SimConnectionLoss:
            self.node.after(self.node.settings.controller_backoff_ms, self.mark, "elect")
            return
        if won is not None:
            self._run(self.core.on_elected, *won)
            if self.core.active:
                self.node.sim.observe_controller(self.node.id, self.core.epoch)
                self.node.after(self.node.sim.rng.randint(200, 800), self._rebalance_timer)

    def _rebalance_timer(self) -> None:
        if self.core.active:
            self.mark("rebalance")
            self.node.after(500, self._rebalance_timer)

    def _run(self, handler, *args):
        try:
            result = handler(*args)
        except ControllerMovedError:
            self.resign()
            return None
        except ClusterError:
            self.node.after(self.node.settings.controller_backoff_ms, self.mark, "reinit")
            return None
        sends = result.sends if isinstance(result, ShutdownResult) else result
        if self.core.active:
            self._send(sends)
        return result

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ShutdownResult:
        if not self.core.active:
            return ShutdownResult(ErrorCode.NOT_CONTROLLER, [], [])
        result = self._run(self.core.on_controlled_shutdown, broker_id, broker_epoch)
        return result if result is not None else ShutdownResult(ErrorCode.NOT_CONTROLLER, [], [])

    # --------------------------------------------------------------------------- sends

    def _send(self, sends) -> None:
        live = set(self.core.ctx.live_brokers)
        for broker in [b for b in self._queues if b not in live]:
            del self._queues[broker]
        for send in sends:
            if send.broker_id in live:
                self._queues.setdefault(send.broker_id, deque()).append(send.request)
        for broker in sorted(self._queues):
            self._send_next(broker)

    def _send_next(self, broker: int) -> None:
        queue = self._queues.get(broker)
        if not queue or broker in self._busy or not self.core.active:
            return
        self._busy.add(broker)
        request = queue[0]

        def answered(response) -> None:
            self._busy.discard(broker)
            current = self._queues.get(broker)
            if response is not None and current is queue and queue and queue[0] is request:
                queue.popleft()
                self._send_next(broker)
            elif current is queue:
                self.node.after(self.node.settings.controller_backoff_ms, self._send_next, broker)

        self.node.rpc.call(broker, m.ControllerRequest(request), answered, self.node.settings.rpc_timeout_ms)
