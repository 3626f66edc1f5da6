"""Fetch sessions (KIP-227), the fetcher's side: what a follower's next Fetch to one leader must
carry. After a full request the leader may open a session; from then on a request names only the
partitions whose fetch fields changed (and forgets those no longer wanted), and the answer holds
only the partitions with something new. Any doubt (a failed request, a session error) starts
again with a full request. Pure: the replica fetcher drives it, tests drive it directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.protocol.errors import ErrorCode
from weir.replication.fetch_sessions import INITIAL_EPOCH, next_epoch

SESSION_ERRORS = frozenset({ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch,
                            ErrorCode.fetch_session_topic_id_error})


@dataclass(frozen=True)
class SessionRequest:
    session_id: int
    epoch: int
    send: dict  # key -> fetch fields, the partitions this request names
    forgotten: list  # keys the session drops

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    """Keys are any hashable partition name ((topic id, partition) for a follower); fields are
    what the request says of a partition (its leader epoch, fetch offset, log start, max bytes)."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._in_session: dict = {}  # key -> fields, as the leader's session holds them
        self._pending: tuple[SessionRequest, dict] | None = None

    def build(self, wanted: dict) -> SessionRequest:
        """The next request, for the partitions `wanted` now (key -> fields). The handler keeps
        `wanted` as it is, without a copy: the caller passes a new dict when anything in it changes,
        and the same one again when nothing did, which then costs no look at its partitions."""
        held = self._in_session
        if self.epoch == INITIAL_EPOCH:
            request = SessionRequest(self.session_id, INITIAL_EPOCH, wanted, [])
        elif wanted is held:
            request = SessionRequest(self.session_id, self.epoch, {}, [])
        else:
            request = SessionRequest(self.session_id, self.epoch,
                                     {key: fields for key, fields in wanted.items() if held.get(key) != fields},
                                     [key for key in held if key not in wanted])
        self._pending = (request, wanted)
        return request

    def on_answer(self, error: int, session_id: int) -> bool:
        """The answer to the last request built, with its top-level error: False when its
        partitions must be ignored (a session error: every partition of the request got it) and
        the next request is full. It names the session unless the leader no longer has it, so
        the leader frees its slot."""
        request, wanted = self._pending
        self._pending = None
        if error in SESSION_ERRORS or (not request.full and session_id != self.session_id):
            self._start_over(0 if error == ErrorCode.fetch_session_id_not_found else self.session_id)
            return False
        if request.full:
            self.session_id = session_id
            self.epoch = 1 if session_id else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        self._in_session = wanted if self.session_id else {}
        return True

    def on_failure(self) -> None:
        """The request got no answer: the leader may or may not have applied it. The next full
        request names the session, so the leader closes it."""
        self._start_over(self.session_id)

    def _start_over(self, session_id: int) -> None:
        self.session_id, self.epoch, self._in_session, self._pending = session_id, INITIAL_EPOCH, {}, None
