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

An incremental fetch compares only the partitions its caller says may have changed since the last
one, so its cost follows what moved, not what the session holds.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
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
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class SessionFetch(Generic[W]):
    """One fetch as the session makes it."""

    session_id: int
    epoch: int
    #: Partitions to name in the request (all of them in a full fetch).
    send: dict[Key, W]
    #: Partitions the session holds and this fetch no longer wants.
    forget: tuple[Key, ...]


class FetchSessionHandler(Generic[W]):
    """One follower's session with one leader."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._held: dict[Key, W] = {}

    def build(self, wanted: Mapping[Key, W], changed: Iterable[Key] | None = None) -> SessionFetch[W]:
        """The next fetch for ``wanted`` (a full one in its order).

        ``changed``: every partition whose want may differ from the last fetch built (added, changed
        or no longer wanted); an incremental fetch compares only those. None: any may have.
        """
        if self.epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, dict(wanted), ())
        held = self._held
        send: dict[Key, W] = {}
        forget: list[Key] = []
        for key in held.keys() | wanted.keys() if changed is None else changed:
            if key not in wanted:
                if key in held:
                    forget.append(key)
            elif (had := held.get(key, _ABSENT)) is _ABSENT or had != wanted[key]:
                send[key] = wanted[key]
        return SessionFetch(self.session_id, self.epoch, send, tuple(forget))

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
        if full:
            self._held = dict(fetch.send)
        else:
            self._held.update(fetch.send)
            for key in fetch.forget:
                del self._held[key]
        return True

    def failed(self) -> None:
        """The fetch got no answer: the leader may have taken it up, so start a new session."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._held = {}
