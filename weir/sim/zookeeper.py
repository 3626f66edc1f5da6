"""A model of ZooKeeper with the semantics Kafka's ZooKeeper mode relies on.

Rules:

- SESSIONS. A client connects and gets a session with a timeout. Every request it sends counts as
  a heartbeat. A session not heard from for its timeout expires, or its client closes it: its
  ephemeral znodes are deleted (firing watches) and its watches are dropped. Requests on an expired session fail with
  SESSION_EXPIRED; the client must open a new session.
- ZNODES have data, a version (bumped by every set) and the zxid of their creation (czxid, which
  Kafka uses as a broker's epoch). Creating an existing znode fails (NODE_EXISTS); a set or a
  multi checks versions (compare-and-set) and applies all or nothing.
- WATCHES are one-shot: a data watch (also on a znode that does not exist yet, like `exists`)
  fires once on create, set or delete; a child watch fires once when a child is created or
  deleted. A reader re-arms by reading again, so changes between the firing and the re-read are
  seen together, as with the real server.
- A notification lost to a partition marks the session as having missed events; the next answer
  tells the client, which then reads everything again (a reconnecting client of Weir's watcher
  does the same).
- THE CONTROLLER. /controller is ephemeral; winning it and bumping /controller_epoch is one
  atomic step; partition-state writes are a multi that starts with a check of /controller_epoch's
  version, so a deposed controller's writes fail as a whole.

Paths are Kafka's: /brokers/ids/<id>, /controller, /controller_epoch, /brokers/topics/<t> (the
assignment), /brokers/topics/<t>/partitions/<p>/state, /config/topics/<t>.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.sim.network import ZK
from weir.zk.formats import BROKER_IDS_PATH
from weir.zk.model import PartitionState, TopicAssignment

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
OK, NODE_EXISTS, NO_NODE, BAD_VERSION, SESSION_EXPIRED, FENCED = (
    "ok", "node_exists", "no_node", "bad_version", "session_expired", "fenced")


def topic_path(topic: str) -> str:
    return f"/brokers/topics/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def config_path(topic: str) -> str:
    return f"/config/topics/{topic}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


@dataclass
class Znode:
    data: object
    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int | None = None


@dataclass
class Session:
    sid: int
    owner: object
    timeout_ms: int
    last_heard_ms: int
    alive: bool = True
    missed: bool = False


class ZooKeeper:
    def __init__(self, events, network, trace, *, expiry_check_ms: int = 50) -> None:
        self.events = events
        self.network = network
        self.trace = trace
        self.znodes: dict[str, Znode] = {}
        self.sessions: dict[int, Session] = {}
        self.data_watches: dict[str, set[int]] = {}
        self.child_watches: dict[str, set[int]] = {}
        self.zxid = 0
        self._next_sid = 0
        self.expiry_check_ms = expiry_check_ms
        self.on_expired = lambda session: None  # the checker and the trace listen
        # (path, old state, new state) as each partition state write by a controller applies
        self.on_state_applied = lambda path, old, new: None
        network.register(ZK, self.receive)
        network.on_zk_drop = self._missed
        self.create(CONTROLLER_EPOCH, 0)
        events.after(expiry_check_ms, self._expire_sessions)

    # ----- the store, applied directly (setup, admin tools, the nemesis)

    def create(self, path: str, data, ephemeral_owner: int | None = None) -> Znode | None:
        if path in self.znodes:
            return None
        self.zxid += 1
        node = self.znodes[path] = Znode(data, 0, self.zxid, self.zxid, ephemeral_owner)
        self._fire(path, created_or_deleted=True)
        return node

    def set(self, path: str, data, version: int = -1) -> Znode | None:
        node = self.znodes.get(path)
        if node is None or (version != -1 and node.version != version):
            return None
        self.zxid += 1
        node.data, node.version, node.mzxid = data, node.version + 1, self.zxid
        self._fire(path, created_or_deleted=False)
        return node

    def delete(self, path: str) -> bool:
        if self.znodes.pop(path, None) is None:
            return False
        self.zxid += 1
        self._fire(path, created_or_deleted=True)
        return True

    def get(self, path: str):
        node = self.znodes.get(path)
        return None if node is None else node.data

    def children(self, prefix: str) -> dict[str, Znode]:
        prefix = prefix + "/"
        return {p[len(prefix):]: n for p, n in self.znodes.items()
                if p.startswith(prefix) and "/" not in p[len(prefix):]}

    def controller_id(self) -> int:
        data = self.get(CONTROLLER)
        return -1 if data is None else data

    def assignment(self, topic: str) -> TopicAssignment:
        return self.znodes[topic_path(topic)].data

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self.get(state_path(topic, partition))

    # ----- watches

    def _fire(self, path: str, *, created_or_deleted: bool) -> None:
        for sid in sorted(self.data_watches.pop(path, ())):
            self._notify(sid, path)
        if created_or_deleted:
            parent = path.rsplit("/", 1)[0]
            for sid in sorted(self.child_watches.pop(parent, ())):
                self._notify(sid, parent)

    def _notify(self, sid: int, path: str) -> None:
        session = self.sessions.get(sid)
        if session is not None and session.alive:
            self.network.send(ZK, session.owner, ("watch", sid, path))

    def _missed(self, node) -> None:
        for session in self.sessions.values():
            if session.owner == node and session.alive:
                session.missed = True

    # ----- sessions

    def _expire_sessions(self) -> None:
        now = self.events.now
        for session in list(self.sessions.values()):
            if session.alive and now - session.last_heard_ms > session.timeout_ms:
                self.expire(session)
        self.events.after(self.expiry_check_ms, self._expire_sessions)

    def expire(self, session: Session, how: str = "expired") -> None:
        session.alive = False
        self.trace(f"zk: session {session.sid} of {session.owner} {how}")
        for watches in (self.data_watches, self.child_watches):
            for sids in watches.values():
                sids.discard(session.sid)
        for path in sorted(p for p, n in self.znodes.items() if n.ephemeral_owner == session.sid):
            self.delete(path)
        self.on_expired(session)

    # ----- requests over the network

    def receive(self, src, message) -> None:
        _, sid, req_id, op, args = message
        if op == "connect":
            self._next_sid += 1
            session = self.sessions[self._next_sid] = Session(self._next_sid, src, args[0], self.events.now)
            self._reply(src, req_id, OK, session.sid, False)
            return
        session = self.sessions.get(sid)
        if session is None or not session.alive:
            self._reply(src, req_id, SESSION_EXPIRED, None, False)
            return
        session.last_heard_ms = self.events.now
        status, result = getattr(self, "_op_" + op)(session, *args)
        missed, session.missed = session.missed, False
        self._reply(src, req_id, status, result, missed)

    def _reply(self, dst, req_id, status, result, missed) -> None:
        self.network.send(ZK, dst, ("resp", req_id, status, result, missed))

    def _watch(self, table: dict, path: str, sid: int) -> None:
        table.setdefault(path, set()).add(sid)

    def _op_heartbeat(self, session):
        return OK, None

    def _op_create(self, session, path, data, ephemeral):
        node = self.create(path, data, session.sid if ephemeral else None)
        if node is None:
            existing = self.znodes[path]
            return NODE_EXISTS, (existing.czxid, existing.ephemeral_owner)
        return OK, node.czxid

    def _op_get(self, session, path, watch):
        if watch:
            self._watch(self.data_watches, path, session.sid)
        node = self.znodes.get(path)
        return OK, None if node is None else (node.data, node.version, node.mzxid)

    def _op_children(self, session, prefix, watch):
        if watch:
            self._watch(self.child_watches, prefix, session.sid)
        return OK, {name: (n.data, n.czxid) for name, n in self.children(prefix).items()}

    def _op_close(self, session):
        """The client closes its session (a broker stopping cleanly): its ephemeral znodes go now,
        not a session timeout later."""
        self.expire(session, "closed")
        return OK, None

    def _op_delete(self, session, path):
        return (OK, None) if self.delete(path) else (NO_NODE, None)

    def _op_elect(self, session, broker_id):
        """Kafka's registerControllerAndIncrementControllerEpoch: one atomic step. A /controller this
        session created is its own election whose answer was lost: won, with the epoch it set
        (Kafka's checkedEphemeralCreate)."""
        epoch_node = self.znodes[CONTROLLER_EPOCH]
        if CONTROLLER in self.znodes:
            if self.znodes[CONTROLLER].ephemeral_owner == session.sid:
                return OK, (epoch_node.data, epoch_node.version)
            return NODE_EXISTS, self.znodes[CONTROLLER].data
        self.create(CONTROLLER, broker_id, session.sid)
        self.set(CONTROLLER_EPOCH, epoch_node.data + 1)
        return OK, (epoch_node.data, epoch_node.version)

    def _op_read_all(self, session, topics, watch_brokers):
        """Everything a broker or a new controller reads, arming the watches it keeps."""
        sid = session.sid
        self._watch(self.data_watches, CONTROLLER, sid)
        if watch_brokers:
            self._watch(self.child_watches, BROKER_IDS_PATH, sid)
        states, configs, assignments = {}, {}, {}
        for topic, partitions in topics.items():
            self._watch(self.data_watches, config_path(topic), sid)
            configs[topic] = self.get(config_path(topic)) or {}
            self._watch(self.data_watches, topic_path(topic), sid)
            assignments[topic] = self.get(topic_path(topic))
            for p in partitions:
                path = state_path(topic, p)
                self._watch(self.data_watches, path, sid)
                node = self.znodes.get(path)
                if node is not None:
                    states[(topic, p)] = (node.data, node.mzxid)
        brokers = {int(name): n.czxid for name, n in self.children(BROKER_IDS_PATH).items()}
        return OK, {"brokers": brokers, "states": states, "configs": configs, "topics": assignments,
                    "controller": self.controller_id(), "controller_epoch": self.get(CONTROLLER_EPOCH),
                    "controller_epoch_zxid": self.znodes[CONTROLLER_EPOCH].mzxid}

    def _op_write_assignments(self, session, epoch_version, assignments):
        """One multi: the controller-epoch check, then each topic's assignment."""
        if self.znodes[CONTROLLER_EPOCH].version != epoch_version:
            return FENCED, None
        for assignment in assignments:
            assert self.get(topic_path(assignment.name)).replicas.keys() == assignment.replicas.keys()
            self.set(topic_path(assignment.name), assignment)
        return OK, None

    def _op_write_states(self, session, epoch_version, changes):
        """A multi per change, each starting with the controller-epoch check."""
        if self.znodes[CONTROLLER_EPOCH].version != epoch_version:
            return FENCED, None
        results = []
        for path, expected, state in changes:
            node = self.znodes.get(path)
            if expected is None:
                if node is not None:
                    results.append((BAD_VERSION, node.data))
                    continue
                self.create(path, state)
                self.on_state_applied(path, None, state)
                results.append((OK, 0))
            elif node is None:
                results.append((NO_NODE, None))
            elif node.version != expected:
                results.append((BAD_VERSION, node.data))
            else:
                assert state.partition_epoch == node.version + 1, (state, node.version)
                old = node.data
                self.set(path, state)
                self.on_state_applied(path, old, state)
                results.append((OK, node.version))
        return OK, results
