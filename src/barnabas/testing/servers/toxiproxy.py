"""A real Toxiproxy server: TCP relays on loopback whose traffic can be slowed at will (latency faults).

``tc netem`` is the usual way to add latency, but it needs a kernel module not every kernel has
(this machine's lacks it). Toxiproxy relays a TCP connection through itself and, with a latency
"toxic", holds each chunk of data for a time before passing it on: a connection through a relay
sees its round trips grow, as over a slow or congested link. Faults are made and undone over its
HTTP API; the server binds 127.0.0.1 only, on a port picked here.

Readiness is ``GET /version`` answering. The server binary is ``$TOXIPROXY`` or ``toxiproxy-server``
on the PATH (barnabas's ``make fault`` builds it from its Go module).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..process import ManagedServer, ServerProcess, free_ports

__all__ = ["TOXIPROXY", "Relay", "ToxiproxyServer", "toxiproxy_binary"]

TOXIPROXY = "toxiproxy-server"
START_TIMEOUT_S = 20.0
API_TIMEOUT_S = 10.0


def toxiproxy_binary() -> str | None:
    """The server binary (``$TOXIPROXY``, else the PATH's ``toxiproxy-server``), or None when there is none."""
    named = os.environ.get("TOXIPROXY")
    if named:
        return named if Path(named).exists() else None
    return shutil.which(TOXIPROXY)


@dataclass(frozen=True)
class Relay:
    """One relay: connections to ``listen_port`` reach ``upstream``, through the server's toxics."""

    server: ToxiproxyServer
    name: str
    listen_port: int
    upstream: str

    @contextlib.contextmanager
    def latency(self, latency_ms: int, jitter_ms: int = 0) -> Iterator[None]:
        """Hold every chunk ``latency_ms`` (± ``jitter_ms``) each way while in the block."""
        toxics = [f"{self.name}-latency-{stream}" for stream in ("upstream", "downstream")]
        for toxic, stream in zip(toxics, ("upstream", "downstream"), strict=True):
            self.server.call(
                "POST", f"/proxies/{self.name}/toxics",
                {"name": toxic, "type": "latency", "stream": stream, "toxicity": 1.0,
                 "attributes": {"latency": latency_ms, "jitter": jitter_ms}},
            )  # fmt: skip
        try:
            yield
        finally:
            for toxic in toxics:
                self.server.call("DELETE", f"/proxies/{self.name}/toxics/{toxic}")


class ToxiproxyServer(ManagedServer):
    """One toxiproxy-server process with its log in ``base_dir``; its relays are made with :meth:`relay`."""

    def __init__(self, base_dir: Path, binary: str | None = None) -> None:
        self.dir = base_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        found = binary or toxiproxy_binary()
        if found is None:
            raise FileNotFoundError("toxiproxy-server is not installed (set $TOXIPROXY or put it on the PATH)")
        (self.api_port,) = free_ports(1)
        self.process = ServerProcess(
            "toxiproxy", [found, "-host", "127.0.0.1", "-port", str(self.api_port)],
            log_path=self.dir / "toxiproxy.log", ready=lambda _: self.answers(), cwd=self.dir,
            start_timeout_s=START_TIMEOUT_S,
        )  # fmt: skip

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/version", timeout=1) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def relay(self, name: str, upstream_host: str, upstream_port: int) -> Relay:
        """A new relay to ``upstream_host:upstream_port`` on a free loopback port."""
        (port,) = free_ports(1)
        upstream = f"{upstream_host}:{upstream_port}"
        self.call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{port}", "upstream": upstream})
        return Relay(self, name, port, upstream)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One API call; its JSON answer (None when empty). Raises RuntimeError on an error answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}", data=data, method=method,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=API_TIMEOUT_S) as answer:
                text = answer.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"toxiproxy {method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from exc
        return json.loads(text) if text.strip() else None
