"""The simulated controller: the broker's controller shell (weir/broker/controller_service.py) on
simulated time and simulated ZooKeeper.

Every decision and every write is weir/controller/events.py's, as in the real shell; this file
queues events, carries out the store operations the handlers yield as ZooKeeper requests, and
throws the failures back in: a fenced write (a newer controller) makes it resign, any other failed
request (lost, timed out, an expired session) fails the event, and the handler's states stay
unconfirmed until the next event reads them back. An AlterPartition whose event failed is
answered REQUEST_TIMED_OUT (as admin_apis.py does); a failed metadata event is tried again, as
the real watcher reads everything again once its session is back.
"""

from __future__ import annotations

import dataclasses
from collections import deque

from kio.schema.errors import ErrorCode

from weir.controller.decisions import ControllerConfig
from weir.controller.events import (READ_AGAIN, SHUTDOWN_REQUESTS_RETRY_MS, ControllerEvents, CreateStates, ReadCluster,
                                    ReadShutdownRequests, ReadStates, WriteAssignments)
from weir.coordination.zk_metadata import ControllerFenced, PartitionWriteResult
from weir.sim.zookeeper import BAD_VERSION, FENCED, OK, state_path
from weir.zk.formats import CONTROLLED_SHUTDOWN_PATH
from weir.zk.model import NO_LEADER, BrokerInfo, ClusterView, TopicsByName

RETRY_MS = 100


class StoreUnavailable(Exception):
    """A ZooKeeper request without an answer (or on an expired session): its outcome is unknown."""


class SimController:
    def __init__(self, broker, epoch: int, epoch_version: int) -> None:
        self.broker = broker
        self.world = broker.world
        self.epoch_version = epoch_version
        s = self.world.settings
        self.events = ControllerEvents(broker.id, ControllerConfig(
            unclean_leader_election_enable=False, auto_leader_rebalance_enable=s.auto_leader_rebalance_enable),
            on_written=lambda change: self.world.on_state_written(self, change))
        self.queue: deque = deque()
        self.busy = False
        self.epoch = epoch

    def start(self) -> None:
        """Once it is the broker's controller: take over, then run events."""
        self.enqueue(("elected", self.epoch))
        self.broker.later(self.world.settings.first_leader_balance_check_ms, self._balance_timer)

    @property
    def core(self):
        return self.events.core

    @property
    def active(self) -> bool:
        return self.broker.controller is self and self.broker.up

    def _balance_timer(self) -> None:
        if self.active:
            self.enqueue(("balance",))
            self.broker.later(self.world.settings.leader_imbalance_check_interval_ms, self._balance_timer)

    # ----- the broker tells

    def on_metadata_change(self) -> None:
        self.enqueue(("metadata",))

    def on_shutdown_requests(self) -> None:
        """The child watch on CONTROLLED_SHUTDOWN_PATH fired (ControllerService._on_shutdown_requests)."""
        self.enqueue(("rewatch_shutdowns",))

    def on_alter_partition(self, src, rid, leader_id, broker_epoch, proposals) -> None:
        items = [(*key, proposal.leader_epoch, proposal.partition_epoch, tuple(sorted(proposal.new_isr)),
                  dict(proposal.broker_epochs)) for key, proposal in proposals.items()]
        self.enqueue(("alter_partition", leader_id, broker_epoch, items, (src, rid)))

    # ----- the event queue (ControllerService._run)

    def enqueue(self, event) -> None:
        if self.queue and event == ("metadata",) and self.queue[-1] == event:
            return  # one look at ZooKeeper answers both
        self.queue.append(event)
        self._next()

    def _next(self) -> None:
        if self.active and not self.busy and self.queue:
            self.busy = True
            event = self.queue.popleft()
            if event[0] == "rewatch_shutdowns":  # a shell event, as in ControllerService
                self._step(event, self.events.shutdown_requests(), None, None)
                return
            if self.core is None and event[0] != "elected":  # not in charge yet: as ControllerService
                # a reassignment's answer is by partition; one missing is NOT_CONTROLLER (reassignment_apis)
                self._finish(event, {} if event[0] == "reassign" else (ErrorCode.not_controller, {}))
                return
            if event[0] == "elected":
                handler = self.events.elected(event[1])
            elif event[0] == "alter_partition":
                handler = self.events.handle(*event[:4])
            else:
                handler = self.events.handle(*event)
            self._step(event, handler, None, None)

    def _step(self, event, handler, result, error) -> None:
        """events.run_handler, with callbacks for awaits."""
        if not self.active:
            return
        try:
            op = handler.send(result) if error is None else handler.throw(error)
        except StopIteration as done:
            self._finish(event, done.value)
            return
        except ControllerFenced:
            self.broker.watcher.resign("fenced by a newer controller epoch")
            return
        except StoreUnavailable:
            self._fail(event)
            return
        self._execute(op, lambda result, error=None: self._step(event, handler, result, error))

    def reassign(self, targets) -> None:
        """AlterPartitionReassignments from an admin client."""
        self.enqueue(("reassign", targets))

    def _finish(self, event, answer) -> None:
        if event[0] == "elected":  # ControllerService._elect watches the shutdown requests next
            self.queue.appendleft(("rewatch_shutdowns",))
        if event[0] == "rewatch_shutdowns":  # ControllerService._watch_shutdown_requests
            if answer == READ_AGAIN:
                self.broker.later(SHUTDOWN_REQUESTS_RETRY_MS, self.on_shutdown_requests)
            else:
                self.queue.extend(("controlled_shutdown", broker) for broker in answer)
        if event[0] == "reassign":
            self.broker.trace(f"reassignment answered {[(k, code.name) for k, (code, _) in sorted(answer.items())]}")
        if event[0] == "alter_partition":
            self.broker.send(event[4][0], ("alter_resp", event[4][1], *answer))
        self.busy = False
        self._next()

    def _fail(self, event) -> None:
        if event[0] == "alter_partition":  # the outcome is unknown: the leader retries (admin_apis)
            self.broker.send(event[4][0], ("alter_resp", event[4][1], ErrorCode.none,
                                           {(topic, p): (ErrorCode.request_timed_out, None)
                                            for topic, p, *_ in event[3]}))
        elif event[0] == "metadata" or (event[0] == "elected" and self.core is None):
            self.broker.later(RETRY_MS, self.enqueue, event)
        self.busy = False
        self._next()

    # ----- store operations as ZooKeeper requests

    def _execute(self, op, answer) -> None:
        if isinstance(op, ReadShutdownRequests):
            self.broker.zk.request("children", CONTROLLED_SHUTDOWN_PATH, True, callback=lambda status, children:
                                   answer(children) if status == OK else answer(None, StoreUnavailable(status)))
            return
        if isinstance(op, (ReadCluster, ReadStates)):
            def read(status, snapshot):
                if status != OK:
                    answer(None, StoreUnavailable(status))
                elif isinstance(op, ReadCluster):
                    answer(self._view(snapshot))
                else:
                    answer({key: snapshot["states"].get(key, (None,))[0] for key in op.keys})
            self.broker.zk.request("read_all", self.world.topics, isinstance(op, ReadCluster), callback=read)
            return
        if isinstance(op, WriteAssignments):
            def assigned(status, result):
                if status == FENCED:
                    answer(None, ControllerFenced("controller epoch superseded"))
                elif status != OK:
                    answer(None, StoreUnavailable(status))
                else:
                    answer(None)
            self.broker.zk.request("write_assignments", self.epoch_version, op.assignments, callback=assigned)
            return
        if isinstance(op, CreateStates):
            writes = [(op.topic, p, None, state) for p, state in sorted(op.states.items())]
        else:
            writes = list(op.changes)

        def written(status, results):
            if status == FENCED:
                answer(None, ControllerFenced("controller epoch superseded"))
            elif status != OK:
                answer(None, StoreUnavailable(status))
            elif isinstance(op, CreateStates):
                answer({p: dataclasses.replace(new, partition_epoch=0)
                        for (_, p, _, new), (result, _) in zip(writes, results) if result == OK})
            else:
                answer([PartitionWriteResult(t, p, state=dataclasses.replace(new, partition_epoch=data))
                        if result == OK else
                        PartitionWriteResult(t, p, error="conflict" if result == BAD_VERSION else "missing",
                                             current=data if result == BAD_VERSION else None)
                        for (t, p, _, new), (result, data) in zip(writes, results)])
        payload = [(state_path(t, p), expected, new) for t, p, expected, new in writes]
        for t, p, _, new in writes:  # for the checker, which hears of the write when ZooKeeper applies it
            self.world.unclean_allowed_by_write[(state_path(t, p), new.leader_epoch)] = self.core.unclean_allowed(t)
        self.broker.zk.request("write_states", self.epoch_version, payload, callback=written)

    def _view(self, snapshot) -> ClusterView:
        world = self.world
        brokers = snapshot["brokers"]
        return ClusterView(
            brokers={b: BrokerInfo(b, "sim", 9092) for b in sorted(brokers)}, broker_epochs=dict(brokers),
            topics=TopicsByName(snapshot["topics"]),
            topic_configs={t: dict(snapshot["configs"].get(t, {})) for t in world.topics},
            states={key: state for key, (state, _) in snapshot["states"].items()},
            state_zxids={key: mzxid for key, (_, mzxid) in snapshot["states"].items()},
            controller_id=self.broker.id)


def describe(state) -> str:
    leader = "none" if state.leader == NO_LEADER else f"b{state.leader}"
    return f"leader {leader} epoch {state.leader_epoch} isr {list(state.isr)} v{state.partition_epoch}"
