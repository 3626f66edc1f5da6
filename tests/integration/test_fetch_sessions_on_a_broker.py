"""Fetch sessions (KIP-227) on a running broker: a fetcher that asks for a session names only
partitions whose position moved and hears only of partitions with news; a wrong epoch or an
unknown session is a top-level error, not a lost session or a stuck fetcher. kafka-python, which
uses sessions, reads records that arrive in waves across partitions, each once and in order."""

import datetime
import time

from kafka import KafkaConsumer, TopicPartition
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from log.batches import make_batch, record_values
from raw_protocol import FETCH, FETCH_V, NONE, RawClient, assert_healthy, create_topic, produce, request_payload, sized
from scraping import metric

FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71


def session_request(session_id, epoch, positions=(), forgotten=(), max_wait_ms=0):
    """A Fetch of topic "s" in a session: `positions` (partition, offset) named, `forgotten` dropped."""
    return FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=10 << 20,
        session_id=session_id, session_epoch=epoch,
        topics=(FetchTopic(topic="s", partitions=tuple(
            FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20) for p, offset in positions)),)
        if positions else (),
        forgotten_topics_data=(ForgottenTopic(topic="s", partitions=tuple(forgotten)),) if forgotten else (),
        rack_id="")


def session_fetch(client, *args, **kwargs):
    return client.call(FETCH, FETCH_V, session_request(*args, **kwargs))


def answered(response) -> dict[int, list]:
    return {p.partition_index: record_values(p.records) if p.records else []
            for t in response.responses for p in t.partitions}


def test_a_session_answers_only_the_partitions_with_news(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "s", partitions=3)
        for p in range(3):
            assert produce(client, "s", make_batch([b"first-%d" % p]), partition=p).error_code == NONE
        full = session_fetch(client, 0, 0, [(0, 0), (1, 0), (2, 0)])
        assert full.error_code == NONE and full.session_id != 0
        assert answered(full) == {p: [(0, b"first-%d" % p)] for p in range(3)}
        session = full.session_id

        moved = session_fetch(client, session, 1, [(0, 1), (1, 1), (2, 1)])
        assert (moved.error_code, moved.session_id, answered(moved)) == (NONE, session, {})

        assert produce(client, "s", make_batch([b"second"]), partition=2).error_code == NONE
        news = session_fetch(client, session, 2)  # names nothing: the session knows every position
        assert answered(news) == {2: [(1, b"second")]}

        assert produce(client, "s", make_batch([b"unheard"]), partition=0).error_code == NONE
        forgot = session_fetch(client, session, 3, [(2, 2)], forgotten=[0])
        assert answered(forgot) == {}

        stale = session_fetch(client, session, 3)
        assert (stale.error_code, stale.session_id, stale.responses) == (INVALID_FETCH_SESSION_EPOCH, 0, ())
        unknown = session_fetch(client, session + 1, 1)
        assert unknown.error_code == FETCH_SESSION_ID_NOT_FOUND

        assert produce(client, "s", make_batch([b"third"]), partition=1).error_code == NONE
        after = session_fetch(client, session, 4)  # the session outlived both refusals, without partition 0
        assert (after.error_code, answered(after)) == (NONE, {1: [(1, b"third")]})

        # a long poll in the session wakes for news in a partition it did not name
        client.send(sized(request_payload(FETCH, FETCH_V, session_request(session, 5, [(1, 2)], max_wait_ms=20_000),
                                          correlation_id=7)))
        with RawClient(broker.port) as other:
            assert produce(other, "s", make_batch([b"late"]), partition=2).error_code == NONE
        assert answered(client.read_response(FETCH, FETCH_V, 7)) == {2: [(2, b"late")]}
    assert_healthy(broker)


def test_a_fetch_naming_a_partition_twice_is_answered_once_from_the_last_position(broker):
    """Kafka keys a Fetch's partitions by topic-partition (FetchRequest.fetchData), the last entry
    winning: one answer per partition, with or without a session."""
    with RawClient(broker.port) as client:
        create_topic(client, "s", partitions=2)
        for p in range(2):
            for value in (b"a-%d" % p, b"b-%d" % p):
                assert produce(client, "s", make_batch([value]), partition=p).error_code == NONE
        for epoch in (0, -1):  # a new session; none
            response = client.call(FETCH, FETCH_V, FetchRequest(
                max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=10 << 20, session_id=0, session_epoch=epoch,
                topics=tuple(FetchTopic(topic="s", partitions=(
                    FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20),))
                    for p, offset in [(0, 0), (1, 0), (0, 1)]),
                forgotten_topics_data=(), rack_id=""))
            assert response.error_code == NONE
            named = [p.partition_index for t in response.responses for p in t.partitions]
            assert sorted(named) == [0, 1], named
            assert answered(response) == {0: [(1, b"b-0")], 1: [(0, b"a-1"), (1, b"b-1")]}
    assert_healthy(broker)


def test_kafka_python_reads_records_arriving_in_waves_in_its_session(start_broker):
    broker = start_broker(0, **{"metrics.port": "0"})
    with RawClient(broker.port) as client:
        create_topic(client, "waves", partitions=4)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=100,
                                 enable_auto_commit=False, auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition("waves", p) for p in range(4)])
            got: dict[int, list] = {p: [] for p in range(4)}
            expected: dict[int, list] = {p: [] for p in range(4)}
            for wave in range(6):
                partition = wave % 3  # partition 3 stays empty; each wave writes one other partition
                values = [b"w%d-%d" % (wave, i) for i in range(5)]
                assert produce(client, "waves", make_batch(values), partition=partition).error_code == NONE
                expected[partition] += values
                deadline = time.monotonic() + 20
                while got != expected and time.monotonic() < deadline:
                    for tp, records in consumer.poll(timeout_ms=200).items():
                        got[tp.partition] += [r.value for r in records]
                assert got == expected, f"after wave {wave}"
            assert metric(broker, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 4
        finally:
            consumer.close()
