"""wait_until_lost on a real (embedded SQLite) session: it returns when the session ends, and at once after."""

from __future__ import annotations

import asyncio
from pathlib import Path

from barnabas.coordination import open_metastore, wait_until_lost


def test_it_returns_when_the_session_ends_and_at_once_once_it_has(tmp_path: Path) -> None:
    async def scenario() -> None:
        metastore = await open_metastore(f"sqlite://{tmp_path / 'c.db'}")
        try:
            session = await metastore.open_session(5.0)
            waiting = asyncio.create_task(wait_until_lost(session))
            await asyncio.sleep(0)  # let it register its listener
            assert not waiting.done()
            await session.close()
            async with asyncio.timeout(5):
                await waiting
            async with asyncio.timeout(1):
                await wait_until_lost(session)  # already lost: no wait
        finally:
            await metastore.close()

    asyncio.run(scenario())
