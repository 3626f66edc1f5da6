"""Fetch sessions (KIP-227), both halves driven directly: the leader's session cache and the
follower's session handler, then the two talking to each other over many rounds."""

import random

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.hot_requests import FetchPartition
from weir.protocol.hot_responses import FetchPartitionResult
from weir.replication.fetch_session_handler import FetchSessionHandler
from weir.replication.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, MAX_EPOCH, FetchSessionCache, next_epoch


def ask(index, offset, epoch=5, log_start=0, max_bytes=1 << 20):
    return FetchPartition(index, epoch, offset, -1, log_start, max_bytes)


def result(index, hw=10, records=None, error=0, lso=10, log_start=0):
    return FetchPartitionResult(index, error, hw, lso, log_start, records)


def answer_all(context, results_by_partition):
    """Results in the context's read order, from {(topic, partition): FetchPartitionResult}."""
    return context.answer([(key, None, [results_by_partition[key, p.partition] for p in partitions])
                           for key, partitions in context.wanted])


def sent(answer):
    return {(topic, r.index): r for topic, _, results in answer for r in results}


def open_session(cache, topics, results, now=0, follower=True):
    context = cache.context(0, INITIAL_EPOCH, topics, [], by_id=False, follower=follower, now_ms=now)
    session_id, answered = answer_all(context, results)
    return session_id, answered


def test_a_full_request_opens_a_session_and_gets_every_partition():
    cache = FetchSessionCache()
    results = {("t", 0): result(0), ("t", 1): result(1)}
    session_id, answered = open_session(cache, [("t", [ask(0, 10), ask(1, 10)])], results)
    assert session_id != 0
    assert set(sent(answered)) == {("t", 0), ("t", 1)}


@pytest.mark.parametrize("epoch", [INITIAL_EPOCH, FINAL_EPOCH])
def test_a_full_request_naming_a_partition_twice_reads_it_once_as_last_named(epoch):
    """Kafka's FetchRequest.fetchData is a map by topic-partition: the last entry wins, in the
    place of the first."""
    cache = FetchSessionCache()
    context = cache.context(0, epoch, [("t", [ask(0, 10), ask(1, 10)]), ("u", [ask(0, 3)]), ("t", [ask(0, 12)])], [],
                            by_id=False, follower=False, now_ms=0)
    assert [(key, [(p.partition, p.fetch_offset) for p in partitions]) for key, partitions in context.wanted] == [
        ("t", [(0, 12), (1, 10)]), ("u", [(0, 3)])]


def test_a_sessionless_request_opens_none_and_closes_the_one_it_names():
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 10)])], {("t", 0): result(0)})
    context = cache.context(session_id, FINAL_EPOCH, [("t", [ask(0, 10)])], [], by_id=False, follower=True, now_ms=1)
    assert answer_all(context, {("t", 0): result(0)})[0] == 0
    with pytest.raises(KafkaError) as e:
        cache.context(session_id, 1, [], [], by_id=False, follower=True, now_ms=2)
    assert e.value.code is ErrorCode.fetch_session_id_not_found


def test_an_incremental_request_reads_every_session_partition_but_answers_only_changed_ones():
    cache = FetchSessionCache()
    results = {("t", 0): result(0), ("t", 1): result(1), ("u", 0): result(0)}
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10)]), ("u", [ask(0, 10)])], results)
    context = cache.context(session_id, 1, [], [], by_id=False, follower=True, now_ms=1)
    assert [(key, [p.partition for p in parts]) for key, parts in context.wanted] == [("t", [0, 1]), ("u", [0])]
    _, answered = answer_all(context, {**results, ("t", 1): result(1, hw=11), ("u", 0): result(0, error=6)})
    assert set(sent(answered)) == {("t", 1), ("u", 0)}  # a moved HW, an error; t-0 is as it was

    context = cache.context(session_id, 2, [], [], by_id=False, follower=True, now_ms=2)
    _, answered = answer_all(context, {**results, ("t", 1): result(1, hw=11), ("t", 0): result(0, log_start=3),
                                       ("u", 0): result(0, records=[b"x"])})
    assert set(sent(answered)) == {("t", 0), ("u", 0)}  # a moved log start, records; t-1 already told

    context = cache.context(session_id, 3, [], [], by_id=False, follower=True, now_ms=3)
    _, answered = answer_all(context, {**results, ("t", 1): result(1, hw=11), ("t", 0): result(0, log_start=3, lso=8)})
    assert set(sent(answered)) == {("t", 0)}  # a moved last stable offset alone; u-0 has nothing new


def test_partitions_named_again_take_their_new_fields_and_forgotten_ones_leave():
    cache = FetchSessionCache()
    results = {("t", 0): result(0), ("t", 1): result(1), ("t", 2): result(2)}
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10)])], results)
    context = cache.context(session_id, 1, [("t", [ask(0, 15), ask(2, 0)])], [("t", [1])], by_id=False,
                            follower=True, now_ms=1)
    assert [(p.partition, p.fetch_offset) for _, parts in context.wanted for p in parts] == [(0, 15), (2, 0)]


def test_a_partition_that_brought_records_goes_to_the_back_of_the_read_order():
    cache = FetchSessionCache()
    results = {("t", i): result(i) for i in range(3)}
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10), ask(2, 10)])], results)
    context = cache.context(session_id, 1, [], [], by_id=False, follower=False, now_ms=1)
    answer_all(context, {**results, ("t", 0): result(0, records=[b"x"])})
    context = cache.context(session_id, 2, [], [], by_id=False, follower=False, now_ms=2)
    assert [p.partition for _, parts in context.wanted for p in parts] == [1, 2, 0]


@pytest.mark.parametrize("epoch, by_id, code", [(2, False, ErrorCode.invalid_fetch_session_epoch),
                                                (1, True, ErrorCode.fetch_session_topic_id_error)])
def test_a_wrong_epoch_or_topic_naming_is_refused_and_the_session_survives(epoch, by_id, code):
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 10)])], {("t", 0): result(0)})
    with pytest.raises(KafkaError) as e:
        cache.context(session_id, epoch, [], [], by_id=by_id, follower=True, now_ms=1)
    assert e.value.code is code
    assert cache.context(session_id, 1, [], [], by_id=False, follower=True, now_ms=1).session is not None


def test_epochs_wrap_to_one():
    assert next_epoch(1) == 2
    assert next_epoch(MAX_EPOCH) == 1


def test_a_full_cache_evicts_an_idle_session_or_a_consumers_for_a_follower_else_answers_without_one():
    cache = FetchSessionCache(slots=2, eviction_ms=1000)
    one = {("t", 0): result(0)}
    consumer, _ = open_session(cache, [("t", [ask(0, 10)])], one, now=0, follower=False)
    follower, _ = open_session(cache, [("t", [ask(0, 10)])], one, now=500, follower=True)
    assert open_session(cache, [("t", [ask(0, 10)])], one, now=600, follower=False)[0] == 0  # nothing idle
    newer_follower, _ = open_session(cache, [("t", [ask(0, 10)])], one, now=700, follower=True)
    assert newer_follower != 0 and consumer not in cache.sessions  # a follower's takes a consumer's place
    late, _ = open_session(cache, [("t", [ask(0, 10)])], one, now=1600, follower=False)
    assert late != 0 and follower not in cache.sessions  # idle for 1.1 s
    assert FetchSessionCache(slots=0).create(False, True, 0) is None


def test_the_handler_sends_only_changed_partitions_and_forgets_dropped_ones():
    handler = FetchSessionHandler()
    first = handler.build({"a": (5, 10), "b": (5, 10)})
    assert (first.session_id, first.epoch, set(first.send)) == (0, INITIAL_EPOCH, {"a", "b"})
    assert handler.on_answer(ErrorCode.none, 77)
    second = handler.build({"a": (5, 12), "b": (5, 10)})
    assert (second.session_id, second.epoch, second.send, second.forgotten) == (77, 1, {"a": (5, 12)}, [])
    assert handler.on_answer(ErrorCode.none, 77)
    third = handler.build({"a": (5, 12)})
    assert (third.epoch, third.send, third.forgotten) == (2, {}, ["b"])


def test_the_handler_given_the_same_wanted_again_sends_an_empty_request_without_a_look_at_it():
    handler = FetchSessionHandler()
    wanted = {"a": (5, 10), "b": (5, 10)}
    handler.build(wanted)
    assert handler.on_answer(ErrorCode.none, 77)
    wanted["a"] = (5, 99)  # not how a caller changes it (a new dict), to show the handler does not look
    again = handler.build(wanted)
    assert (again.epoch, again.send, again.forgotten) == (1, {}, [])
    assert handler.on_answer(ErrorCode.none, 77)
    changed = handler.build({"a": (5, 12), "b": (5, 10)})
    assert (changed.epoch, changed.send, changed.forgotten) == (2, {"a": (5, 12)}, [])


@pytest.mark.parametrize("outcome", ["session error", "other session id", "no answer"])
def test_the_handler_starts_over_with_a_full_request_after_any_doubt(outcome):
    handler = FetchSessionHandler()
    handler.build({"a": 1})
    handler.on_answer(ErrorCode.none, 77)
    handler.build({"a": 2})
    if outcome == "session error":
        assert not handler.on_answer(ErrorCode.fetch_session_id_not_found, 0)
    elif outcome == "other session id":
        assert not handler.on_answer(ErrorCode.none, 78)
    else:
        handler.on_failure()
    again = handler.build({"a": 2})
    assert again.full and again.send == {"a": 2}
    assert again.session_id == (0 if outcome == "session error" else 77)  # a full request closing one still held


def test_the_handler_without_a_session_keeps_sending_full_requests():
    handler = FetchSessionHandler()
    handler.build({"a": 1})
    assert handler.on_answer(ErrorCode.none, 0)  # the leader had no room
    again = handler.build({"a": 1})
    assert again.full and again.send == {"a": 1}


def test_leader_and_follower_agree_over_many_rounds_with_lost_answers_and_restarts():
    """The follower's view of every partition (fetch offset, HW, log start) stays what a sessionless
    fetcher would see, whatever is lost on the way."""
    rng = random.Random(7)
    cache, handler = FetchSessionCache(slots=4), FetchSessionHandler()
    leader = {i: {"leo": 0, "hw": 0, "log_start": 0} for i in range(6)}
    follower = {i: {"offset": 0, "hw": 0, "log_start": 0} for i in range(6)}
    for now in range(2000):
        for state in leader.values():
            if rng.random() < 0.3:
                state["leo"] += rng.randint(1, 5)
            state["hw"] = min(state["leo"], state["hw"] + rng.randint(0, 3))
            if rng.random() < 0.02:
                state["log_start"] = state["hw"]
        if rng.random() < 0.01:
            cache = FetchSessionCache(slots=4)  # the leader restarted
        wanted = {("t", i): (5, f["offset"], f["log_start"], 1 << 20) for i, f in follower.items() if rng.random() > 0.05}
        request = handler.build(wanted)
        topics = [("t", [ask(i, offset, epoch, log_start, max_bytes)
                         for (_, i), (epoch, offset, log_start, max_bytes) in request.send.items()])]
        try:
            context = cache.context(request.session_id, request.epoch, topics,
                                    [("t", [i for _, i in request.forgotten])], by_id=False, follower=True, now_ms=now)
        except KafkaError as e:
            assert not handler.on_answer(e.code, 0)
            continue
        reads = {}
        for key, partitions in context.wanted:
            for p in partitions:
                state = leader[p.partition]
                records = [p.fetch_offset, state["leo"]] if p.fetch_offset < state["leo"] else None
                reads[key, p.partition] = result(p.partition, state["hw"], records, lso=-1,
                                                 log_start=state["log_start"])
        assert {k for k, _ in wanted.items()} == set(reads), "the leader reads exactly what the follower wants"
        session_id, answered = answer_all(context, reads)
        if rng.random() < 0.03:
            handler.on_failure()  # the answer was lost
            continue
        assert handler.on_answer(ErrorCode.none, session_id)
        for (_, i), r in sent(answered).items():
            if r.records:
                follower[i]["offset"] = r.records[1]
            follower[i]["hw"], follower[i]["log_start"] = r.high_watermark, r.log_start_offset
        for (_, i) in wanted:
            state = leader[i]
            assert follower[i]["hw"] == state["hw"] and follower[i]["log_start"] == state["log_start"]
            assert follower[i]["offset"] == state["leo"]


def test_after_an_error_the_next_answer_is_sent_whole():
    """An error answer may carry the real HW (out of range does); the fetcher sets an error answer
    aside, so once the error clears, that HW must still be told."""
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 100)])], {("t", 0): result(0, hw=100, lso=100)})
    context = cache.context(session_id, 1, [], [], by_id=False, follower=True, now_ms=1)
    assert set(sent(answer_all(context, {("t", 0): result(0, hw=105, lso=105, error=1)})[1])) == {("t", 0)}
    context = cache.context(session_id, 2, [], [], by_id=False, follower=True, now_ms=2)
    assert set(sent(answer_all(context, {("t", 0): result(0, hw=105, lso=105)})[1])) == {("t", 0)}


@pytest.mark.parametrize("again", [ask(0, 10, epoch=6), ask(0, 7)], ids=["new leader epoch", "log cut back"])
def test_a_partition_named_for_a_new_leadership_or_a_cut_log_is_answered_whole(again):
    """The follower may have set the last answer aside (one for another leader epoch): it hears all again."""
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 10)])], {("t", 0): result(0)})
    context = cache.context(session_id, 1, [("t", [again])], [], by_id=False, follower=True, now_ms=1)
    assert set(sent(answer_all(context, {("t", 0): result(0)})[1])) == {("t", 0)}


def test_an_answer_leaves_alone_what_a_later_request_of_its_session_forgot_or_replaced():
    cache = FetchSessionCache()
    results = {("t", 0): result(0), ("t", 1): result(1)}
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10)])], results)
    polling = cache.context(session_id, 1, [], [], by_id=False, follower=False, now_ms=1)
    cache.context(session_id, 2, [], [("t", [0, 1])], by_id=False, follower=False, now_ms=2)
    later = cache.context(session_id, 3, [("t", [ask(1, 10)])], [], by_id=False, follower=False, now_ms=3)
    news = {("t", 0): result(0, hw=11), ("t", 1): result(1, hw=11)}
    assert sent(answer_all(polling, news)[1]) == {}  # t-0 is gone, t-1 is another entry now
    assert set(sent(answer_all(later, news)[1])) == {("t", 1)}


@pytest.mark.parametrize("error, names_the_session", [(ErrorCode.invalid_fetch_session_epoch, True),
                                                      (ErrorCode.fetch_session_topic_id_error, True),
                                                      (ErrorCode.fetch_session_id_not_found, False)])
def test_after_a_session_error_the_full_request_closes_the_session_the_leader_still_has(error, names_the_session):
    handler = FetchSessionHandler()
    handler.build({"a": 1})
    handler.on_answer(ErrorCode.none, 77)
    handler.build({"a": 1})
    assert not handler.on_answer(error, 0)
    again = handler.build({"a": 1})
    assert again.full and again.session_id == (77 if names_the_session else 0)


@pytest.mark.parametrize("follower", [True, False])
def test_only_a_followers_unnamed_partitions_carry_what_they_were_told(follower):
    """The short way for an idle partition is a follower's (a consumer's fetch is read in full)."""
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10)])],
                                 {("t", 0): result(0, hw=10), ("t", 1): result(1, hw=10)}, follower=follower)
    context = cache.context(session_id, 1, [("t", [ask(1, 12)])], [], by_id=False, follower=follower, now_ms=1)
    assert context.told == ({("t", 0): (10, 10, 0)} if follower else {})


def test_a_partition_found_quiet_without_a_read_is_left_out_and_keeps_what_it_was_told():
    """The leader's short way answers None for a follower's unnamed partition whose told answer
    still stands: nothing is sent for it, and what it was told stays the baseline."""
    cache = FetchSessionCache()
    results = {("t", 0): result(0), ("t", 1): result(1)}
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10)])], results)
    context = cache.context(session_id, 1, [], [], by_id=False, follower=True, now_ms=1)
    assert context.told == {("t", 0): (10, 10, 0), ("t", 1): (10, 10, 0)}
    _, answered = answer_all(context, {("t", 0): None, ("t", 1): result(1, records=[b"x"])})
    assert set(sent(answered)) == {("t", 1)}
    context = cache.context(session_id, 2, [], [], by_id=False, follower=True, now_ms=2)
    assert context.told[("t", 0)] == (10, 10, 0)
    _, answered = answer_all(context, {("t", 0): result(0, hw=12), ("t", 1): None})
    assert set(sent(answered)) == {("t", 0)}  # the HW moved from what it was told


def quiet_session(credits, now=0):
    """A follower's session over t-0 and t-1, t-0 found quiet in the first incremental read."""
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 10), ask(1, 10)])], {("t", 0): result(0), ("t", 1): result(1)})
    context = cache.context(session_id, 1, [], [], by_id=False, follower=True, now_ms=now)
    context.note_quiet(("t", 0), ("t", 0), credits.append)
    context.read_done(now)
    context.answer([("t", None, [None, None])])
    return cache, session_id


def test_a_quiet_partition_is_neither_read_nor_parked_on_until_it_has_news():
    credits = []
    cache, session_id = quiet_session(credits)
    context = cache.context(session_id, 2, [], [], by_id=False, follower=True, now_ms=500)
    assert [(key, [p.partition for p in parts]) for key, parts in context.wanted] == [("t", [1])]
    assert ("t", 0) not in context.told and context.holds_quiet
    context.read_done(500)
    context.answer([("t", None, [None])])
    assert cache.on_news(("t", 0), wake=True) == []  # no request parked: none to wake
    assert credits == [500]  # the follower fetched it at its LEO up to the last fetch
    again = cache.context(session_id, 3, [], [], by_id=False, follower=True, now_ms=1000)
    # read again, after those that stayed awake (the read order's back, as a partition that brought records)
    assert [(key, [p.partition for p in parts]) for key, parts in again.wanted] == [("t", [1, 0])]
    assert not again.holds_quiet


def test_news_of_a_quiet_partition_joins_the_parked_request_and_wakes_it_for_records_only():
    credits = []
    cache, session_id = quiet_session(credits)
    context = cache.context(session_id, 2, [], [], by_id=False, follower=True, now_ms=500)
    context.read_done(500)
    waiter = object()
    context.park(waiter)
    assert cache.on_news(("t", 1), wake=True) == []  # not quiet: its own park wakes it
    assert cache.on_news(("t", 0), wake=False) == []  # a moved HW: read from now on, no wake-up
    assert [(key, [p.partition for p in parts]) for key, parts in context.wanted] == [("t", [1]), ("t", [0])]
    assert context.told[("t", 0)] == (10, 10, 0)
    context.note_quiet(("t", 0), ("t", 0), credits.append)  # quiet again at the next first read
    context.unpark()
    next_request = cache.context(session_id, 3, [], [], by_id=False, follower=True, now_ms=1000)
    next_request.read_done(1000)
    next_request.park(waiter)
    assert cache.on_news(("t", 0), wake=True) == [waiter]
    assert credits == [500, 1000]


def test_a_quiet_partition_named_or_forgotten_or_its_session_closed_is_credited_and_heard_of_no_more():
    for change in ("named", "forgotten", "closed"):
        credits = []
        cache, session_id = quiet_session(credits, now=100)
        if change == "closed":
            cache.context(session_id, INITIAL_EPOCH, [("t", [ask(0, 10)])], [], by_id=False, follower=True,
                          now_ms=200)
        else:
            topics, forgotten = ([("t", [ask(0, 11)])], []) if change == "named" else ([], [("t", [0])])
            cache.context(session_id, 2, topics, forgotten, by_id=False, follower=True, now_ms=200)
        assert credits == [100], change
        assert cache.quiet_holders == {}, change
        assert cache.on_news(("t", 0), wake=True) == [] and credits == [100], change


def test_a_consumers_session_keeps_no_partition_quiet():
    cache = FetchSessionCache()
    session_id, _ = open_session(cache, [("t", [ask(0, 10)])], {("t", 0): result(0)}, follower=False)
    context = cache.context(session_id, 1, [], [], by_id=False, follower=False, now_ms=0)
    context.note_quiet(("t", 0), ("t", 0), lambda ms: None)
    assert not context.holds_quiet and cache.quiet_holders == {}
