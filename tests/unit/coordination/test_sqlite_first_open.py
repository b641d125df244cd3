"""Opening a SQLite coordination file that others are opening, for the first time, at the same moment.

Brokers of a local cluster start together: their first opens create the file and switch it to WAL at
once. SQLite answers one of two connections racing for the switch with "database is locked" at once,
without waiting (its busy handler would deadlock them). A broker must retry, not exit.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from barnabas.coordination import open_metastore

OPENERS = 4
ROUNDS = 40  # the race loses about one round in ten without the retry


def test_metastores_opening_a_new_file_together_all_open(tmp_path: Path) -> None:
    errors: list[str] = []
    for round_number in range(ROUNDS):
        url = f"sqlite:///{tmp_path / f'round-{round_number}.db'}"
        together = threading.Barrier(OPENERS)

        def open_once(url: str = url, together: threading.Barrier = together) -> None:
            async def open_and_close() -> None:
                metastore = await open_metastore(url)
                await metastore.close()

            together.wait()
            try:
                asyncio.run(open_and_close())
            except Exception as exc:  # what the test looks for: any failure to open
                errors.append(f"{url}: {exc}")

        threads = [threading.Thread(target=open_once) for _ in range(OPENERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors[:3]
