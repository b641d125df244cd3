"""Turns: one client connection's requests write to brokers in the order the client sent them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from barnabas.proxy.turns import TurnChain


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 5))


async def write_in_turn(name: str, turn_wait: Callable[[], Awaitable[None]], written: list[str]) -> None:
    """A request that writes (notes ``name`` in ``written``) once its turn has come."""
    await turn_wait()
    written.append(name)


async def settle() -> None:
    """Let every task that can run, run."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_first_turn_does_not_wait() -> None:
    async def main() -> None:
        await TurnChain().next().wait()

    run(main)


def test_a_later_turn_waits_until_the_earlier_one_ends() -> None:
    async def main() -> None:
        chain = TurnChain()
        first, second, third = chain.next(), chain.next(), chain.next()
        written: list[str] = []

        later = [
            asyncio.create_task(write_in_turn("third", third.wait, written)),
            asyncio.create_task(write_in_turn("second", second.wait, written)),
        ]
        await settle()
        assert written == []  # nothing ended: both wait, whatever order they asked in
        await first.wait()
        written.append("first")
        first.end()
        await settle()
        assert written == ["first", "second"]  # the third still waits for the second's end
        second.end()
        await asyncio.gather(*later)
        assert written == ["first", "second", "third"]

    run(main)


def test_a_turn_that_ended_before_the_next_asked_lets_it_go_at_once() -> None:
    async def main() -> None:
        chain = TurnChain()
        first = chain.next()
        first.end()
        await chain.next().wait()

    run(main)


def test_ending_twice_is_harmless() -> None:
    async def main() -> None:
        chain = TurnChain()
        first = chain.next()
        first.end()
        first.end()
        second = chain.next()
        await second.wait()
        second.end()
        second.end()
        third = chain.next()
        await third.wait()

    run(main)


def test_a_turn_ended_without_writing_does_not_let_the_next_overtake_an_earlier_one() -> None:
    """A request that fails before its turn (its broker refused the connection) ends its turn at once;
    the request after it must still wait for every earlier one, not only for it: a Produce of
    sequence 100 overtook one of sequence 97 that still waited behind a Metadata request, and the
    broker refused it as out of order (fatal to an idempotent producer)."""

    async def main() -> None:
        chain = TurnChain()
        first, second, third, fourth = chain.next(), chain.next(), chain.next(), chain.next()
        written: list[str] = []

        waiting = [
            asyncio.create_task(write_in_turn("second", second.wait, written)),
            asyncio.create_task(write_in_turn("fourth", fourth.wait, written)),
        ]
        third.end()  # failed before its turn came: wrote nothing
        await settle()
        assert written == []  # the fourth waits for the second, which waits for the first
        first.end()
        await settle()
        assert written == ["second"]  # the second has not ended: the fourth still waits
        second.end()
        await asyncio.gather(*waiting)
        assert written == ["second", "fourth"]

    run(main)
