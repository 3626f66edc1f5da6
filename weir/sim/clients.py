"""Producers and readers: one of each per partition, on the network node "c".

- A producer sends one record at a time to the leader named by its metadata, with acks 0, 1 or
  all (-1) drawn per record; an acks=all success is reported to the checker with the offset the
  leader answered. Errors and timeouts refresh the metadata; the record is not retried, so every
  value is written at most once by the client (the network may still duplicate a request).
- A reader fetches from its position up to the leader's HW, naming the leader epoch it knows
  (KIP-320), and reports every answer to the checker.
- Metadata comes from ZooKeeper's partition state (what any broker's metadata converges to);
  clients refresh it after an error, a timeout, or a second without one.
"""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode

from weir.zk.model import NO_LEADER

CLIENT = "c"
ACKS = (-1, -1, -1, 1, 0)


class Clients:
    def __init__(self, world, rng: random.Random) -> None:
        self.world = world
        self.rng = rng
        self.pending: dict[int, tuple] = {}
        self._next_id = 0
        self._next_pid = 0
        self.meta: dict = {}
        self.position: dict = {}
        self.reader_epoch: dict = {}
        self.sequence: dict = {}
        self.stop_at = world.settings.heal_at_ms + world.settings.liveness_bound_ms
        world.network.register(CLIENT, self._receive)
        for key in world.keys:
            self.position[key] = 0
            self.reader_epoch[key] = -1
            self.sequence[key] = 0
            self._refresh(key)
            world.events.after(rng.randint(1, 50), self._produce, key)
            world.events.after(rng.randint(1, 50), self._read, key)

    def _rid(self) -> int:
        self._next_id += 1
        return self._next_id

    def _refresh(self, key) -> None:
        state = self.world.zk.partition_state(*key)
        self.meta[key] = (NO_LEADER, -1) if state is None else (state.leader, state.leader_epoch)

    # ----- producing

    def _produce(self, key) -> None:
        world = self.world
        if world.events.now > self.stop_at:
            return
        leader, _ = self.meta[key]
        if leader == NO_LEADER:
            self._refresh(key)
            world.events.after(50, self._produce, key)
            return
        acks = world.acks_choice(self.rng)
        self.sequence[key] += 1
        value = f"{key[1]}:{self.sequence[key]}"
        gap = self.rng.randint(*world.settings.produce_gap_ms)
        rid = self._rid()
        self._next_pid += 1  # a producer id per record: the broker drops a duplicated request's copy
        world.network.send(CLIENT, leader, ("produce", rid, key, value, self._next_pid, world.events.now, acks))
        if acks == 0:
            world.events.after(gap, self._produce, key)
            return
        self.pending[rid] = ("produce", key, value, acks, leader)
        world.events.after(world.settings.request_timeout_ms + 200, self._timeout, rid)

    def _on_produce_response(self, rid, error, offset) -> None:
        entry = self.pending.pop(rid, None)
        if entry is None:
            return
        _, key, value, acks, leader = entry
        if error == ErrorCode.none:
            if acks == -1:
                self.world.checker.on_acked(key, offset, value, leader)
        else:
            self._refresh(key)
        self.world.events.after(self.rng.randint(*self.world.settings.produce_gap_ms), self._produce, key)

    # ----- reading

    def _read(self, key) -> None:
        world = self.world
        if world.events.now > self.stop_at:
            return
        leader, epoch = self.meta[key]
        if leader == NO_LEADER:
            self._refresh(key)
            world.events.after(world.settings.read_interval_ms, self._read, key)
            return
        self.reader_epoch[key] = max(self.reader_epoch[key], epoch)
        rid = self._rid()
        self.pending[rid] = ("read", key, leader)
        world.network.send(CLIENT, leader, ("read", rid, key, self.position[key], self.reader_epoch[key]))
        world.events.after(world.settings.request_timeout_ms, self._timeout, rid)

    def _on_read_response(self, rid, error, hw, offset, values) -> None:
        entry = self.pending.pop(rid, None)
        if entry is None:
            return
        _, key, leader = entry
        world = self.world
        if error == ErrorCode.none and offset == self.position[key]:
            world.checker.on_read(key, leader, hw, offset, values)
            self.position[key] = offset + len(values)
        elif error == ErrorCode.offset_out_of_range and hw >= 0:
            world.checker.on_read(key, leader, hw, offset, ())
            self.position[key] = hw  # auto.offset.reset=latest: only after an unclean election
            self._refresh(key)
        elif error != ErrorCode.none:
            self._refresh(key)
        world.events.after(world.settings.read_interval_ms, self._read, key)

    def _timeout(self, rid) -> None:
        entry = self.pending.pop(rid, None)
        if entry is None:
            return
        key = entry[1]
        self._refresh(key)
        if entry[0] == "produce":
            self.world.events.after(1, self._produce, key)
        else:
            self.world.events.after(1, self._read, key)

    def _receive(self, src, message) -> None:
        if message[0] == "produce_resp":
            self._on_produce_response(*message[1:])
        elif message[0] == "read_resp":
            self._on_read_response(*message[1:])
