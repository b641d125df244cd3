"""The fetching side of an incremental fetch session (KIP-227): Kafka's FetchSessionHandler.

A follower asks one leader for the same partitions again and again, mostly from the same offsets.
With a session it names only the partitions whose request changed (a new fetch offset, log start
or leader epoch) and those it no longer wants; the leader remembers the rest.

Kafka's rules, kept here:

- Without a session the fetch is full: every partition, epoch 0, asking the leader for one. A full
  fetch answered with session id 0 (the leader had no room) leaves the next one full as well.
- An incremental fetch names the session and its epoch; an answer naming the session moves the
  epoch on, one naming no session ends it (the next fetch is full).
- FETCH_SESSION_ID_NOT_FOUND forgets the session; any other error, or a fetch that got no answer
  (a lost connection, a timeout), makes the next fetch a full one that closes the old session and
  asks for a new one (the old id at epoch 0), since the leader may or may not have taken it up.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from barnabas.protocol import ErrorCode

__all__ = ["FetchSessionHandler", "SessionFetch"]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
_INT32_MAX = 2**31 - 1

Key = tuple[str, int]
#: What a fetch asks of one partition; equal values need not be sent again.
W = TypeVar("W", bound=Hashable)


@dataclass(frozen=True, slots=True)
class SessionFetch(Generic[W]):
    """One fetch as the session makes it."""

    session_id: int
    epoch: int
    #: Partitions to name in the request (all of them in a full fetch).
    send: dict[Key, W]
    #: Partitions the session holds and this fetch no longer wants.
    forget: tuple[Key, ...]
    #: Everything this fetch wants: what the session holds once it is answered.
    wanted: dict[Key, W]


class FetchSessionHandler(Generic[W]):
    """One follower's session with one leader."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held: dict[Key, W] = {}

    def build(self, wanted: dict[Key, W]) -> SessionFetch[W]:
        """The next fetch for ``wanted`` (in the order to read them); the fetch keeps the dict, unchanged.

        A want the session holds as the very same object was not changed (the fetcher reuses the tuple of
        a partition whose log has not moved): it is passed over without comparing.
        """
        if self.epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, wanted, (), wanted)
        held = self._held
        send = {key: want for key, want in wanted.items() if (had := held.get(key)) is not want and had != want}
        forget = tuple(key for key in held if key not in wanted) if len(held) != len(wanted) or send else ()
        return SessionFetch(self.session_id, self.epoch, send, forget, wanted)

    def answered(self, fetch: SessionFetch[W], error: ErrorCode, session_id: int) -> bool:
        """Take in the answer's top-level error and session id; False when its partitions must not be used."""
        if error is ErrorCode.fetch_session_id_not_found:
            self._reset(INVALID_SESSION_ID)
            return False
        if error is not ErrorCode.none:
            self._reset(fetch.session_id)
            return False
        if session_id == INVALID_SESSION_ID:
            self._reset(INVALID_SESSION_ID)  # no room, or the leader closed it: full fetches again
            return True
        full = fetch.epoch == INITIAL_EPOCH
        self.session_id = session_id
        self.epoch = 1 if full or fetch.epoch == _INT32_MAX else fetch.epoch + 1
        self._held = fetch.wanted
        return True

    def failed(self) -> None:
        """The fetch got no answer: the leader may have taken it up, so start a new session."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._held = {}
