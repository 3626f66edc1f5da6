"""A simulated broker's request handlers (weir/broker/apis.py in production): Produce (with
acks=all parked until the partition completes it), a client's read, a follower's Fetch, and
OffsetForLeaderEpoch, each answered from what the partition object decides.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from weir.protocol.errors import KafkaError
from weir.replication.partition import Effects, Partition

from weir.sim.memlog import SimBatch


class SimApis:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.parked: dict = {}  # acks=all produce requests waiting for the HW

    def complete(self, completions) -> None:
        for completion in completions:
            first = self.parked.pop(completion.key, None)
            if first is not None:
                self.broker.send(completion.key[0], ("produce_resp", completion.key[1], completion.error, first))

    def produce(self, src, rid, partition: Partition, value: str, producer_id: int, acks: int) -> None:
        broker = self.broker
        batch = SimBatch(value, producer_id)
        try:
            produced = partition.produce(batch, batch, acks, broker.now, proven=broker.can_lead)
        except KafkaError as e:
            if acks != 0:
                broker.send(src, ("produce_resp", rid, e.code, -1))
            return
        broker.act(partition, produced.effects)
        if acks == 1:
            broker.send(src, ("produce_resp", rid, ErrorCode.none, produced.first_offset))
        elif acks == -1:
            key = (src, rid, broker._rid())  # a duplicated request is parked twice, as the real broker would
            deadline = broker.now + broker.settings.request_timeout_ms
            done = partition.await_replication(key, produced.last_offset, deadline, broker.now)
            self.parked[key] = produced.first_offset
            if done is not None:
                broker.act(partition, Effects([done]))

    def read(self, src, rid, partition: Partition, offset: int, current_leader_epoch: int) -> None:
        broker = self.broker
        error = partition.check_request(current_leader_epoch, proven=broker.can_lead)
        error, limit = (error, 0) if error else partition.read_limit(offset, follower=False)
        hw = partition.high_watermark if partition.leader else -1
        batches = partition.log.read(offset, limit, 50) if not error else ()
        broker.send(src, ("read_resp", rid, error, hw, offset, [b.value for b in batches]))

    def fetch(self, src, rid, partition: Partition, offset: int, current_leader_epoch: int,
              replica_epoch: int) -> None:
        broker = self.broker
        error, effects = partition.on_follower_fetch(src, replica_epoch, offset, current_leader_epoch, broker.now)
        broker.act(partition, effects)
        error, limit = (error, 0) if error else partition.read_limit(offset, follower=True)
        batches = None if error else partition.log.read(offset, limit, broker.settings.replica_fetch_max_records)
        broker.send(src, ("fetch_resp", rid, error, partition.high_watermark, batches or None))

    def ofle(self, src, rid, partition: Partition, current_leader_epoch: int, requested_epoch: int) -> None:
        broker = self.broker
        answer = partition.answer_epoch_request(requested_epoch, current_leader_epoch)
        broker.send(src, ("ofle_resp", rid, answer))
