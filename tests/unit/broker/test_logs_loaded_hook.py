"""A broker calls ``on_logs_loaded`` once its logs are loaded and before it registers.

The command line freezes the loaded objects out of automatic garbage collections there: the first
collection walks all of them (about a second at 33,000 partitions), and after registering it held
the event loop past the new coordination session's renewals.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from barnabas.broker import Broker
from barnabas.config import load_broker_config
from tests.unit.broker.in_memory import TEST_SETTINGS

REGISTERED = "registered with broker epoch"


def test_the_hook_runs_once_between_loading_the_logs_and_registering(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="barnabas.broker.server")
    overrides = {
        **TEST_SETTINGS,
        "log.dirs": str(tmp_path / "data"),
        "coordination.url": f"sqlite:///{tmp_path / 'coordination.db'}",
    }
    registered_at_call: list[bool] = []

    def on_logs_loaded() -> None:
        registered_at_call.append(any(REGISTERED in record.getMessage() for record in caplog.records))

    async def start_and_stop() -> None:
        broker = Broker(load_broker_config(overrides=overrides, environ={}), on_logs_loaded=on_logs_loaded)
        await broker.start(listen=False)
        await broker.stop()

    asyncio.run(asyncio.wait_for(start_and_stop(), 60))
    assert registered_at_call == [False]
    assert any(REGISTERED in record.getMessage() for record in caplog.records)
