"""Fetch sessions (KIP-227), the leader's side: a fetcher in a session sends only the partitions
whose fetch position changed and is answered only the partitions whose answer changed.

`FetchSessionCache.context` turns one Fetch request into a `FetchContext`: the partitions to
read (for an incremental request, the session's, updated by the request) and, once they are
read, the session id to answer with and the results to send. No I/O and no clock of its own:
the broker drives it, tests drive it directly.

A partition left out of an incremental request is still fetched, at the position the session
holds for it: for a follower that is a fetch at its log end offset like any other (the leader
counts it as caught up), as in Kafka. What the session last answered (`FetchContext.told`) lets
the leader take such a fetch of an idle partition the short way (`ReplicaManager.read`).

Quiet partitions: an idle partition costs a follower's session nothing per fetch. One its first
read of a request found with nothing to tell (`note_quiet`) is not read again, nor parked on,
until the partition has news (`FetchSessionCache.on_news`: any decision of the partition, an
append, a new state, a moved log start), the follower names it again, or the session ends. Each
fetch of the session meanwhile is one at the follower's LEO, which is the leader's (any append
would be news): once the partition has news, those fetches are credited to the follower up to
the last one (`quiet_fetch_ms`), as it would have been timed at each, and a parked fetch of the
session reads it from then on (woken when the news is new records or a new role).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from weir.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0  # a full request that asks for a new session
FINAL_EPOCH = -1  # a full request without a session
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class _Cached:
    """One partition of a session: what the fetcher last asked, and what it was last answered."""
    request: object  # the FetchPartition last sent
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None

    def answered(self, result) -> bool:
        """Whether `result` must be sent (records, an error, or a moved offset), noting it if so.
        After an error nothing counts as told: the next answer is sent whole (Kafka likewise)."""
        if (not result.records and not result.error_code and result.high_watermark == self.high_watermark
                and result.last_stable_offset == self.last_stable_offset
                and result.log_start_offset == self.log_start_offset):
            return False
        if result.error_code:
            self.high_watermark = self.last_stable_offset = self.log_start_offset = None
        else:
            self.high_watermark = result.high_watermark
            self.last_stable_offset = result.last_stable_offset
            self.log_start_offset = result.log_start_offset
        return True


class FetchSession:
    def __init__(self, session_id: int, by_id: bool, follower: bool, now_ms: int) -> None:
        self.id = session_id
        self.by_id = by_id  # topics by id (Fetch v13+) or by name, for the session's life
        self.follower = follower
        self.epoch = 1  # the epoch its next request must carry
        self.last_used_ms = now_ms
        self.partitions: dict[tuple, _Cached] = {}  # (topic id or name, partition) -> what it knows of it
        self.awake: OrderedDict[tuple, _Cached] = OrderedDict()  # those not quiet, in read order
        # quiet partitions: key -> (the news key it waits on, the credit of the fetches it missed)
        self.quiet: dict[tuple, tuple[tuple, Callable[[int], None]]] = {}
        self.quiet_fetch_ms = now_ms  # the last fetch every quiet partition was still quiet at
        self.parked: FetchContext | None = None  # its request waiting in a long poll


class FetchContext:
    """One request's view of its session: `wanted` to read, then `answer` to reply."""

    def __init__(self, cache: FetchSessionCache, wanted: list, session: FetchSession | None = None,
                 new_session: tuple | None = None) -> None:
        self.cache = cache
        self.wanted = wanted  # [(topic id or name, [FetchPartition])], in read order
        self.session = session  # set for an incremental request
        self.new_session = new_session  # (by_id, follower, now_ms) when a full request asks for one
        # an incremental request's entries as it read them: a later request of the session may
        # forget or replace one while this one long-polls, and then this answer must not touch it
        self._entries = list(session.awake.values()) if session else []
        # a follower's session: (topic key, partition) -> (HW, LSO, log start) last answered, if unnamed now
        self.told: dict = {}
        self.waiter = None  # set() while parked

    def note_quiet(self, key: tuple, news_key: tuple, credit: Callable[[int], None]) -> None:
        """The first read of this request found the follower's partition `key` with nothing to
        tell: it is quiet until `news_key` (the partition as `on_news` names it) has news."""
        session = self.session
        if session is None or not session.follower or key in session.quiet or key not in session.partitions:
            return
        session.quiet[key] = (news_key, credit)
        del session.awake[key]
        self.cache.quiet_holders.setdefault(news_key, {})[session] = key

    @property
    def holds_quiet(self) -> bool:
        """Its session has quiet partitions: their news would wake a long poll of it."""
        return self.session is not None and bool(self.session.quiet)

    def read_done(self, now_ms: int) -> None:
        """The first read is over: this fetch found every partition still quiet at `now_ms`."""
        if self.session is not None:
            self.session.quiet_fetch_ms = now_ms

    def park(self, waiter) -> None:
        """The request waits in a long poll, `waiter` (its ParkedFetch) woken by news of a quiet
        partition, which joins its reads."""
        self.waiter = waiter
        if self.session is not None:
            self.session.parked = self

    def throttled_session_id(self) -> int:
        """The session id of an answer left empty because its consumer is over its quota (Kafka's
        getThrottledResponse): an incremental request's session; none for a full one, which
        then creates no session (the consumer asks again, in full, once unmuted)."""
        return self.session.id if self.session is not None else 0

    def unpark(self) -> None:
        if self.session is not None and self.session.parked is self:
            self.session.parked = None

    def take_back(self, key: tuple) -> None:
        """A quiet partition with news while this request is parked: read from now on."""
        cached = self.session.partitions.get(key)
        if cached is None:
            return
        self.wanted.append((key[0], [cached.request]))
        self._entries.append(cached)
        if cached.high_watermark is not None:
            self.told[key] = (cached.high_watermark, cached.last_stable_offset, cached.log_start_offset)

    def answer(self, results: list) -> tuple[int, list]:
        """(session id, results to send) for `results` = [(name, topic id, [FetchPartitionResult])]
        read in `wanted`'s order; in an incremental request, None for a partition found to have
        nothing new without a read (a follower's, by `told`). A full request gets every partition;
        an incremental one only those with something new, and a partition that brought records
        goes to the back of the session's read order, so one busy partition cannot take every
        answer's bytes."""
        if self.session is None:
            session = self.cache.create(*self.new_session) if self.new_session else None
            if session is not None:
                for (key, partitions), (_, _, answered) in zip(self.wanted, results):
                    for request, result in zip(partitions, answered):
                        cached = session.partitions[key, request.partition] = \
                            session.awake[key, request.partition] = _Cached(request)
                        cached.answered(result)
            return (session.id if session else 0), results
        session = self.session
        entries = iter(self._entries)
        sent = []
        for (key, partitions), (name, topic_id, answered) in zip(self.wanted, results):
            changed = []
            for request, result in zip(partitions, answered):
                cached = next(entries)
                if (result is not None and session.partitions.get((key, request.partition)) is cached
                        and cached.answered(result)):
                    changed.append(result)
                    if result.records and (key, request.partition) in session.awake:
                        session.awake.move_to_end((key, request.partition))
            if changed:
                sent.append((name, topic_id, changed))
        return session.id, sent


class FetchSessionCache:
    """The sessions of one broker: at most `slots` (max.incremental.fetch.session.cache.slots; 0:
    none). When full, a new session takes the place of the least recently used one idle for
    `eviction_ms` (Kafka's 120 s), else a follower's takes a consumer's; else the request is
    answered without a session and the fetcher goes on with full requests."""

    def __init__(self, slots: int = 1000, eviction_ms: int = 120_000, rng: random.Random | None = None) -> None:
        self.slots = slots
        self.eviction_ms = eviction_ms
        self.rng = rng or random.Random()
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.quiet_holders: dict[tuple, dict[FetchSession, tuple]] = {}  # news key -> session -> its key

    def on_news(self, news_key: tuple, wake: bool) -> list:
        """The partition `news_key` may have something to tell: it is quiet in no session any more,
        and joins the reads of those parked; returns the parked requests to wake (if `wake`: new
        records or a new role, what wakes a follower's long poll): their waiters."""
        holders = self.quiet_holders.pop(news_key, None)
        if not holders:
            return []
        woken = []
        for session, key in holders.items():
            self._unquiet(session, key, forget_holder=False)
            if session.parked is not None:
                session.parked.take_back(key)
                if wake:
                    woken.append(session.parked.waiter)
        return woken

    def _unquiet(self, session: FetchSession, key: tuple, *, forget_holder: bool = True) -> None:
        news_key, credit = session.quiet.pop(key)
        credit(session.quiet_fetch_ms)
        if key in session.partitions:
            session.awake[key] = session.partitions[key]
        if forget_holder:
            holders = self.quiet_holders.get(news_key)
            if holders is not None:
                holders.pop(session, None)
                if not holders:
                    del self.quiet_holders[news_key]

    def _close(self, session: FetchSession | None) -> None:
        """A session ends: its quiet partitions are credited with the fetches they had."""
        if session is not None:
            for key in list(session.quiet):
                self._unquiet(session, key)

    def context(self, session_id: int, epoch: int, topics: list, forgotten: list, *, by_id: bool, follower: bool,
                now_ms: int) -> FetchContext:
        """The context of a request whose `topics` are [(topic id or name, [FetchPartition])] and
        `forgotten` [(topic id or name, [partition])] (read in an incremental request only).
        Raises KafkaError for a session the cache does not hold (FETCH_SESSION_ID_NOT_FOUND), a
        wrong epoch (INVALID_FETCH_SESSION_EPOCH) or a session by topic id continued by name or
        the other way (FETCH_SESSION_TOPIC_ID_ERROR)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full request; it closes the session it names
            self._close(self.sessions.pop(session_id, None))
            new_session = (by_id, follower, now_ms) if epoch == INITIAL_EPOCH else None
            return FetchContext(self, _last_of_each(topics), new_session=new_session)
        session = self.sessions.get(session_id)
        if session is None:
            raise KafkaError(ErrorCode.fetch_session_id_not_found, f"no fetch session {session_id}")
        if epoch != session.epoch:
            raise KafkaError(ErrorCode.invalid_fetch_session_epoch,
                             f"fetch session {session_id} expects epoch {session.epoch}, not {epoch}")
        if by_id != session.by_id:
            raise KafkaError(ErrorCode.fetch_session_topic_id_error,
                             f"fetch session {session_id} names topics {'by id' if session.by_id else 'by name'}")
        for key, partitions in forgotten:
            for index in partitions:
                if (key, index) in session.quiet:
                    self._unquiet(session, (key, index))
                session.partitions.pop((key, index), None)
                session.awake.pop((key, index), None)
        for key, partitions in topics:
            for request in partitions:
                if (key, request.partition) in session.quiet:
                    self._unquiet(session, (key, request.partition))
                cached = session.partitions.get((key, request.partition))
                if cached is None or _starts_over(cached.request, request):
                    session.partitions[key, request.partition] = session.awake[key, request.partition] = \
                        _Cached(request)
                else:
                    cached.request = request
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        self.sessions.move_to_end(session_id)
        context = FetchContext(self, _grouped((key, cached.request) for (key, _), cached in session.awake.items()),
                               session=session)
        if session.follower:  # only a follower's fetch of an idle partition has a short way
            named = {(key, request.partition) for key, partitions in topics for request in partitions}
            context.told = {key: (cached.high_watermark, cached.last_stable_offset, cached.log_start_offset)
                            for key, cached in session.awake.items()
                            if key not in named and cached.high_watermark is not None}
        return context

    def create(self, by_id: bool, follower: bool, now_ms: int) -> FetchSession | None:
        if self.slots <= 0:
            return None
        if len(self.sessions) >= self.slots and not self._evict(follower, now_ms):
            return None
        session_id = 0
        while session_id == 0 or session_id in self.sessions:
            session_id = self.rng.randint(1, MAX_EPOCH)
        session = self.sessions[session_id] = FetchSession(session_id, by_id, follower, now_ms)
        return session

    def _evict(self, for_follower: bool, now_ms: int) -> bool:
        """Least recently used first: an idle session, else (for a follower) a consumer's."""
        idle = next((s for s in self.sessions.values() if now_ms - s.last_used_ms >= self.eviction_ms), None)
        if idle is None and for_follower:
            idle = next((s for s in self.sessions.values() if not s.follower), None)
        if idle is not None:
            self._close(self.sessions.pop(idle.id))
        return idle is not None


def _starts_over(before, now) -> bool:
    """A new leadership, or a log cut back: the fetcher may have set aside the answers it had (a
    follower ignores one sent for another leader epoch), so nothing counts as told."""
    return now.current_leader_epoch != before.current_leader_epoch or now.fetch_offset < before.fetch_offset


def _last_of_each(topics: list) -> list:
    """A full request's partitions, each once: the last time it is named, where it was first named,
    as Kafka's FetchRequest.fetchData (a LinkedHashMap by topic-partition) keeps them."""
    named: dict = {}
    for key, partitions in topics:
        for request in partitions:
            named[key, request.partition] = request
    return _grouped((key, request) for (key, _), request in named.items())


def _grouped(requests) -> list:
    """[(topic key, [FetchPartition])] from (topic key, FetchPartition) in read order, a topic's
    runs kept together where adjacent."""
    wanted: list = []
    for key, request in requests:
        if wanted and wanted[-1][0] == key:
            wanted[-1][1].append(request)
        else:
            wanted.append((key, [request]))
    return wanted
