"""Send order per client connection: requests reach brokers in the order the client sent them.

The proxy handles a connection's requests concurrently (a long-poll Fetch must not hold up a
Produce behind it), but Kafka's ordering promise is per connection: two produce requests to one
partition, or two offset commits of one group, must reach the broker in the order they were
sent. Each request gets a :class:`Turn`; it may do what it likes before writing to a broker (decode,
look up a leader, connect), then waits for the previous request's turn to end, writes every
broker request it needs at once, and ends its own turn.

A turn counts as ended only once every earlier one has: a request that writes nothing (its
broker refused the connection) ends at once, and the request after it must still wait for the
ones before it. Otherwise a Produce could overtake an earlier one of the same partition still
waiting for its turn (behind a Metadata request refreshing the proxy's view), and an idempotent
producer's later sequence would reach the broker first (OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to it).
"""

from __future__ import annotations

from barnabas.slim_event import SlimEvent

__all__ = ["Turn", "TurnChain"]


class Turn:
    __slots__ = ("_after", "_done")

    def __init__(self, after: SlimEvent | None) -> None:
        self._after = after
        self._done = SlimEvent()

    async def wait(self) -> None:
        """Until every earlier request of the connection has written its broker requests."""
        if self._after is not None and not self._after.is_set():
            await self._after.wait()

    def end(self) -> None:
        """This request has written everything it will write (or never will): the next may go once
        every earlier request has too."""
        if self._after is None:
            self._done.set()
        else:
            self._after.call_when_set(self._done.set)


class TurnChain:
    """Hands out turns to one connection's requests, in the order they arrive."""

    def __init__(self) -> None:
        self._last: SlimEvent | None = None

    def next(self) -> Turn:
        turn = Turn(self._last)
        self._last = turn._done
        return turn
