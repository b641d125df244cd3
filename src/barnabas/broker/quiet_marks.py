"""Quiet marks: what a fetch session remembers of a partition where a read found nothing new.

A mark is (the leader, its partition state, its log's ``offsets_version``, the reader) at the read.
While all four still hold, reading the partition again for that reader would find nothing to
answer (``fetch_sessions``). A marked partition leaves its session's ready set and its log wakes
the session at its next move (``PartitionLog.on_next_move``); a leader whose state changes, or
that resigns, moves its log too. The log's callback is keyed by the session, so a session holds
one per log, dropped when the session ends.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, cast

from .fetch_sessions import FetchSession

if TYPE_CHECKING:
    from .replication.leader import LeaderReplica

__all__ = ["QuietMark", "Replica", "release", "still_quiet", "watch"]

Replica = tuple[int, int]
#: The leader, its partition state and its log's ``offsets_version`` when a read at the end of what the
#: fetcher may read found nothing, and the follower that read it (None: a consumer).
QuietMark = tuple["LeaderReplica", object, int, Replica | None]


def still_quiet(mark: object, replica: Replica | None) -> LeaderReplica | None:
    """The mark's leader if reading its partition again would find nothing new for ``replica``, else None.

    The leader still leads (a new leader, or none, resigns it first), with the same state, and its
    log's offsets have not moved (nor has the log closed: a deleted topic's log bumps the version).
    """
    leader, state, version, reader = cast(QuietMark, mark)
    if leader.resigned or leader.state is not state or leader.log.offsets_version != version or reader != replica:
        return None
    return leader


def watch(session: FetchSession[Any], key: tuple[str, int], mark: object, replica: Replica | None) -> None:
    """Have the marked partition's log wake ``session`` at its next move; wake it now if it moved already
    (between the read that made the mark and this answer, a long poll may have waited)."""
    leader = still_quiet(mark, replica)
    if leader is None:
        session.wake(key)
        return
    leader.log.on_next_move(session, partial(session.wake, key))


def release(session: FetchSession[Any]) -> None:
    """``session`` ended: its logs forget their callbacks for it."""
    for part in session.partitions.values():
        if part.quiet is not None:
            cast(QuietMark, part.quiet)[0].log.drop_on_next_move(session)
