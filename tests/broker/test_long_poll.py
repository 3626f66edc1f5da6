"""A Fetch that must wait reads at once and parks in the same event. A record appended after that
read must wake it: otherwise a consumer, or a follower holding up an acks=all produce, waits out
max_wait for a record that is already there (it did, when the long poll parked a loop turn after
its read)."""

import asyncio
import datetime
import uuid

import pytest
from log.batches import make_batch

from weir.broker.apis import DataApis
from weir.broker.replica_manager import ReplicaManager
from weir.config.broker_config import BrokerConfig
from weir.protocol.header import RequestHeader
from weir.protocol.hot_requests import FetchPartition, FetchRequest, FetchTopic
from weir.protocol.hot_responses import FileRegion
from weir.protocol.versions import ApiKey
from weir.zk.model import BrokerInfo, ClusterView, PartitionState, TopicAssignment

ME = 1
MAX_WAIT_S = 30


@pytest.fixture
def replicas(tmp_path):
    manager = ReplicaManager(BrokerConfig({"broker.id": str(ME), "log.dirs": str(tmp_path)}), 0)
    manager.can_lead = True
    view = ClusterView(brokers={ME: BrokerInfo(ME, "h", 9000)},
                       topics={"t": TopicAssignment("t", uuid.uuid4(), {0: (ME,)})},
                       states={("t", 0): PartitionState(ME, 0, (ME,), 1, 0)}, state_zxids={("t", 0): 10},
                       broker_epochs={ME: 5}, broker_sessions={ME: 77}, controller_id=ME, controller_epoch=1,
                       session_id=77)
    manager.apply_view(view, 0)
    yield manager
    manager.close()


def fetch_at(offset: int) -> tuple[RequestHeader, FetchRequest]:
    header = RequestHeader(ApiKey.FETCH, 12, 1, "consumer", 0)
    request = FetchRequest(-1, datetime.timedelta(seconds=MAX_WAIT_S), 1, 1 << 20, 0, 0, -1,
                           [FetchTopic("t", None, [FetchPartition(0, 0, offset, -1, 0, 1 << 20)])], [], "")
    return header, request


def test_a_record_appended_between_the_read_and_the_parking_wakes_the_fetch(replicas):
    async def scenario():
        parked = DataApis(replicas).fetch(*fetch_at(0))  # nothing to read yet: a future of the answer
        assert isinstance(parked, asyncio.Future) and not parked.done()
        replicas.append("t", 0, bytearray(make_batch([b"already here"])), 1, 0)
        return await asyncio.wait_for(parked, MAX_WAIT_S / 10)

    answer = asyncio.run(scenario())
    records = [part for part in answer if isinstance(part, FileRegion)]
    assert sum(region.size for region in records) == len(make_batch([b"already here"]))
