"""The TLS acceptor's one-step start: a coroutine run to its first wait at once, awaited later from a task."""

from __future__ import annotations

import asyncio

import pytest

from barnabas.security.tls_accept import _Stepped


def test_the_first_step_runs_at_once_and_the_rest_when_awaited() -> None:
    steps: list[str] = []

    async def work(gate: asyncio.Future[int]) -> int:
        steps.append("before the wait")
        value = await gate
        steps.append("after the wait")
        return value * 2

    async def main() -> int:
        gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        stepped = _Stepped(work(gate))
        assert steps == ["before the wait"]  # ran inside the constructor, before any task
        task = asyncio.get_running_loop().create_task(_await(stepped))
        gate.set_result(21)
        return await task

    assert asyncio.run(main()) == 42
    assert steps == ["before the wait", "after the wait"]


def test_an_error_before_the_first_wait_reaches_the_awaiting_task() -> None:
    async def broken() -> int:
        raise ValueError("refused at once")

    async def main() -> None:
        stepped = _Stepped(broken())
        with pytest.raises(ValueError, match="refused at once"):
            await stepped

    asyncio.run(main())


def test_cancelling_the_awaiting_task_cancels_the_coroutine() -> None:
    seen: list[str] = []

    async def waits_forever() -> None:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(_await(_Stepped(waits_forever())))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["cancelled"]


async def _await(stepped: _Stepped[int] | _Stepped[None]) -> int | None:
    return await stepped
