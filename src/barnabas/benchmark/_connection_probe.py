"""Memory per client connection of a proxy node: open many connections, read its RSS before and after.

Rules this module keeps:

- Every connection completes ApiVersions and then Metadata (all topics) before anything is read,
  so the proxy holds its session for it and, through that session, the session's own connection to
  a broker (the proxy relays a client's Metadata over that client's broker links).
- The proxy's RSS (``VmRSS`` in /proc/PID/status) and its open sockets (/proc/PID/fd) are read
  before the first connection, with all of them open, and after they are closed; the figure is
  the growth with all open divided by the number of connections. RSS counts pages touched, so
  memory the proxy freed earlier and reuses would hide: the probe runs on a fresh proxy, before any
  other workload.
- Connects are kept a few at a time, under the listener's accept backlog.
- A connection that fails or an answer without brokers is an error (BenchError), not a number.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from barnabas.client import BrokerConnectionError, KafkaClient
from barnabas.protocol import make, request_class

from ._settings import BenchError

__all__ = ["measure_connection_memory", "rss_kib", "socket_count"]

METADATA = 3
#: The newest Metadata version the probe sends (asks for topics by name, or all with a null list).
_METADATA_VERSION = 12
_CONNECTING_AT_ONCE = 16
_TIMEOUT_S = 30.0
#: After the last answer (or close), before reading: the proxy's own tasks for the connections finish.
_SETTLE_S = 0.5


def rss_kib(status: str) -> int:
    """The resident set size in KiB from the text of /proc/PID/status.

    Raises:
        ValueError: the text has no VmRSS line (a kernel thread, or not Linux).
    """
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"VmRSS in {unit!r}, expected kB")
            return int(value)
    raise ValueError("no VmRSS line")


def socket_count(fd_targets: Sequence[str]) -> int:
    """How many of a process's file descriptors (their /proc/PID/fd link targets) are sockets."""
    return sum(target.startswith("socket:") for target in fd_targets)


def _read(pid: int) -> tuple[int, int]:
    """(RSS in KiB, open sockets) of process ``pid``."""
    fd_dir = Path(f"/proc/{pid}/fd")
    targets = []
    for entry in fd_dir.iterdir():
        try:
            targets.append(os.readlink(entry))
        except OSError:  # closed while listing
            continue
    return rss_kib(Path(f"/proc/{pid}/status").read_text()), socket_count(targets)


async def _open(host: str, port: int, gate: asyncio.Semaphore) -> KafkaClient:
    async with gate:
        client = await KafkaClient.connect(host, port, client_id="barnabas-bench-probe", timeout_s=_TIMEOUT_S)
        try:
            versions = await client.api_versions()
            low, high = versions.get(METADATA, (0, -1))
            version = min(high, _METADATA_VERSION)
            if version < max(low, 1):
                raise BenchError(f"the proxy serves Metadata v{low}-{high}; the probe needs v1 or later")
            body = make(
                request_class(METADATA, version),
                topics=None,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
            response = await client.request(METADATA, version, body)
        except BaseException:
            client.close()
            raise
        if not response.brokers:
            client.close()
            raise BenchError("the proxy answered Metadata with no brokers")
        return client


async def _probe(pid: int, host: str, port: int, connections: int) -> dict[str, Any]:
    before = _read(pid)
    gate = asyncio.Semaphore(_CONNECTING_AT_ONCE)
    began = time.monotonic()
    results = await asyncio.gather(*(_open(host, port, gate) for _ in range(connections)), return_exceptions=True)
    clients = [r for r in results if isinstance(r, KafkaClient)]
    try:
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if isinstance(failure, BenchError):
            raise failure
        if failure is not None:
            raise BenchError(f"connection probe: {type(failure).__name__}: {failure}") from failure
        opened_s = time.monotonic() - began
        await asyncio.sleep(_SETTLE_S)
        with_open = _read(pid)
    finally:
        for client in clients:
            client.close()
        for client in clients:
            await client.wait_closed()
    await asyncio.sleep(_SETTLE_S)
    after = _read(pid)
    return {
        "kind": "connections",
        "name": "proxy memory per client connection",
        "connections": connections,
        "open_s": round(opened_s, 3),
        "rss_kib": {"before": before[0], "open": with_open[0], "closed": after[0]},
        "sockets": {"before": before[1], "open": with_open[1], "closed": after[1]},
        "kib_per_connection": round((with_open[0] - before[0]) / connections, 2),
        # 2 when each client connection has one broker connection of its own behind it.
        "sockets_per_connection": round((with_open[1] - before[1]) / connections, 2),
    }


def measure_connection_memory(pid: int, bootstrap: str, connections: int) -> dict[str, Any]:
    """Open ``connections`` client connections to the proxy at ``bootstrap`` (process ``pid``) and measure its growth.

    Raises:
        BenchError: a connection or request failed, or /proc has no such process.
    """
    host, _, port = bootstrap.split(",", maxsplit=1)[0].rpartition(":")
    try:
        return asyncio.run(_probe(pid, host, int(port), connections))
    except (BrokerConnectionError, OSError, ValueError) as exc:
        raise BenchError(f"connection probe: {exc}") from None
