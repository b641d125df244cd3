"""The clients that keep incremental fetch sessions (KIP-227) read everything through them.

The Java client and kafka-python open a session with their first full fetch and go on with
incremental ones while the broker answers a session id. Each produces 10,000 records to three
partitions and reads every one back (the interop driver and its checker, as in
``test_client_interop``) from a broker whose answers hold one batch each (``fetch.max.bytes`` 1 KiB),
so reading takes dozens of fetches. The broker's admin endpoint must then have counted incremental
fetches, so the records came through a session. The Java client closes its session as it closes (a
fetch at epoch -1), and none may be left then; kafka-python leaves its own to the broker's eviction.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.interop.common import problems_in
from tests.support.admin_metrics import ADMIN, scrape, total
from tests.support.broker_process import BrokerProcess
from tests.support.interop_tools import JAVA_DIR, JAVA_TOOLS, REPO, build_tools, java_command

COUNT = 10_000
PARTITIONS = 3
INCREMENTAL = "barnabas_fetch_incremental_total"


def _driver(client: str) -> tuple[str, ...]:
    if client == "java":
        problem = build_tools(JAVA_DIR / "build.sh", JAVA_TOOLS, "Java driver build")
        if problem:
            pytest.fail(problem, pytrace=False)
        return java_command("barnabas.interop.InteropDriver")
    return (sys.executable, "-m", "tests.interop.py_driver", "--client", client)


@pytest.mark.parametrize("client", ["java", "kafka-python"])
def test_a_session_keeping_client_reads_everything_incrementally(
    client: str, broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory(properties={**ADMIN, "fetch.max.bytes": "1024"}).start()
    before = total(scrape(broker.admin_port), INCREMENTAL)
    out = tmp_path / "report.json"
    topic = f"sessions-{client}-{uuid.uuid4().hex[:8]}"
    command = [*_driver(client), "--bootstrap", broker.bootstrap, "--topic", topic, "--mode", "plain",
               "--count", str(COUNT), "--partitions", str(PARTITIONS), "--out", str(out)]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert problems_in(json.loads(out.read_text()), COUNT, PARTITIONS) == []
    after = scrape(broker.admin_port)
    assert total(after, INCREMENTAL) - before > 10
    sessions_left = total(after, "kafka_server_fetchsessioncache_numincrementalfetchsessions")
    assert sessions_left == (0 if client == "java" else 1)
