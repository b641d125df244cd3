"""The embedded Storage backend against a real SQLite file, including a second process."""

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from barnabas.coordination import (
    KeyExistsError,
    NoSuchKeyError,
    VersionConflictError,
    Versioned,
    open_storage,
)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_versioned_operations(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            assert await storage.get("a") is None
            assert await storage.put_if_absent("a", b"1") == 1
            with pytest.raises(KeyExistsError):
                await storage.put_if_absent("a", b"x")
            assert await storage.compare_and_set("a", b"2", 1) == 2
            with pytest.raises(VersionConflictError):
                await storage.compare_and_set("a", b"3", 1)
            assert await storage.update_if_exists("a", b"4") == 3
            with pytest.raises(NoSuchKeyError):
                await storage.update_if_exists("b", b"x")
            with pytest.raises(NoSuchKeyError):
                await storage.compare_and_set("b", b"x", 1)
            assert await storage.get("a") == Versioned(b"4", 3)
            with pytest.raises(VersionConflictError):
                await storage.delete("a", expected_version=2)
            assert await storage.delete("a", expected_version=3)
            assert not await storage.delete("a")
            assert await storage.put_if_absent("a", b"again") == 1
        finally:
            await storage.close()

    run(scenario())


def test_list_by_prefix(tmp_path: Path) -> None:
    async def scenario() -> dict[str, Versioned]:
        storage = await open_storage(f"sqlite://{tmp_path / 'c.db'}")
        try:
            for key in ("topics/a", "topics/b", "topicsx", "partitions/a/0"):
                await storage.put_if_absent(key, key.encode())
            return await storage.list("topics/")
        finally:
            await storage.close()

    assert list(run(scenario())) == ["topics/a", "topics/b"]


def test_another_process_sees_writes_and_conflicts(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'c.db'}"

    async def first() -> None:
        storage = await open_storage(url)
        await storage.put_if_absent("k", b"v1")
        await storage.close()

    run(first())
    script = (
        "import asyncio, sys\n"
        "from barnabas.coordination import open_storage\n"
        "async def main():\n"
        f"    s = await open_storage({url!r})\n"
        "    v = await s.get('k')\n"
        "    await s.compare_and_set('k', v.value + b'+other', v.version)\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)

    async def check() -> Versioned | None:
        storage = await open_storage(url)
        try:
            return await storage.get("k")
        finally:
            await storage.close()

    assert run(check()) == Versioned(b"v1+other", 2)
