"""The admin HTTP endpoint: /healthz, /readyz and /metrics, served from a daemon thread.

Why a thread with the standard library's ``wsgiref`` rather than an HTTP server on the event loop:

- /healthz must say whether the event loop is responsive. A server on the loop cannot: a blocked
  loop answers nothing, and the probe only times out. From a thread, /healthz asks the loop to run
  a no-op and waits ``probe_timeout_s``; that round trip *is* the check, and a blocked loop gets
  an explicit 503 naming the cause.
- /metrics is prometheus-client's own WSGI app (content negotiation, OpenMetrics, gzip, ``name[]``
  filters), so no exposition format and no HTTP parsing is written here, and no dependency is
  added beyond prometheus-client.
- Scrapes and probes stay off the hot path: the text of a scrape is rendered in the request's
  thread; only reading the broker's state (a snapshot) runs on the loop.

Rules this module keeps:

- Broker and proxy state is read only on the event loop (``call_on_loop``): the loop owns it,
  and a dictionary read from another thread while the loop changes it could fail half-way.
- Every wait for the loop is bounded; a loop that does not answer makes /healthz and /readyz
  answer 503 and leaves the state's families out of a scrape (the process's stay).
- Paths: ``/healthz`` and ``/readyz`` answer GET with a plain-text body (``ok``, ``ready``,
  or the reasons, one per line); ``/metrics`` is prometheus-client's; anything else is 404.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import socketserver
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["AdminEndpoint", "LoopCollector", "LoopUnresponsiveError", "call_on_loop"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How often the serving thread looks for a stop request (the longest ``stop`` waits for it).
SHUTDOWN_POLL_S = 0.2
#: How long a scrape waits for the event loop to snapshot the state's metrics.
SCRAPE_TIMEOUT_S = 5.0

_TEXT = ("Content-Type", "text/plain; charset=utf-8")


class LoopUnresponsiveError(TimeoutError):
    """The event loop did not run a call in time (or is closed)."""


def call_on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], timeout_s: float) -> T:
    """Run ``fn`` on ``loop`` from another thread and return its result.

    Raises:
        LoopUnresponsiveError: the loop did not run it within ``timeout_s``, or is closed.
        Exception: whatever ``fn`` raised.
    """
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

    try:
        loop.call_soon_threadsafe(run)
    except RuntimeError:  # the loop is closed
        raise LoopUnresponsiveError("the event loop is closed") from None
    try:
        return future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise LoopUnresponsiveError(f"the event loop did not answer within {timeout_s:g} s") from None


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class LoopCollector(Collector):
    """A prometheus-client collector whose families are built on the event loop, at scrape time.

    Args:
        loop: the loop that owns the state ``families`` reads.
        families: builds the metric families; runs on ``loop``.
        timeout_s: how long a scrape waits for the loop; past it the families are left out.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, families: Callable[[], list[Metric]], timeout_s: float = SCRAPE_TIMEOUT_S
    ) -> None:
        self._loop = loop
        self._families = families
        self._timeout_s = timeout_s

    def collect(self) -> Iterable[Metric]:
        if _on_loop_thread(self._loop):  # a caller on the loop itself (a test) must not wait for it
            return self._families()
        try:
            return call_on_loop(self._loop, self._families, self._timeout_s)
        except LoopUnresponsiveError as exc:
            log.warning("scrape without the state's metrics: %s", exc)
            return []


class _QuietHandler(WSGIRequestHandler):
    """Requests are logged at debug level, not on stderr (probes come every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    """One thread per request, daemon threads: a hung probe never keeps the process alive.

    The listening socket is non-blocking: during a proxy's hot restart two processes accept from it,
    both are woken for one connection, and a blocking accept in the one that loses would hang (and
    with it that process's shutdown). A lost race is an ``OSError`` that socketserver ignores.
    """

    daemon_threads = True
    block_on_close = False

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN (DNS, possibly slow) for SERVER_NAME only.
        socketserver.TCPServer.server_bind(self)
        self.socket.setblocking(False)
        self._named()

    def adopt(self, sock: socket.socket) -> None:
        """Serve on ``sock``, a socket already listening (handed over by another process), instead of binding."""
        self.socket.close()
        self.socket = sock
        sock.setblocking(False)
        self.server_address = sock.getsockname()
        self._named()

    def _named(self) -> None:
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        self.setup_environ()

    def get_request(self) -> tuple[socket.socket, Any]:
        request, address = self.socket.accept()
        request.setblocking(True)  # a request's socket blocks, whatever the listening one does
        return request, address


def _server_class(host: str) -> type[_Server]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Bound(_Server):
        address_family = family

    return Bound


class AdminEndpoint:
    """/healthz, /readyz and /metrics of one broker or proxy.

    Args:
        host: the interface to bind ('' for every one).
        port: the port to bind (0 picks one; see :attr:`port`).
        registry: what /metrics exposes.
        readiness: the reasons the server is not ready (empty when it is); runs on the event loop.
        probe_timeout_s: how long /healthz and /readyz wait for the event loop.
        name: names the serving thread and the log lines.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry,
        readiness: Callable[[], Sequence[str]],
        probe_timeout_s: float,
        name: str = "admin",
    ) -> None:
        self.host = host
        self.requested_port = port
        self.registry = registry
        self.readiness = readiness
        self.probe_timeout_s = probe_timeout_s
        self.name = name
        self._metrics_app = make_wsgi_app(registry)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, sock: socket.socket | None = None) -> int:
        """Bind (or serve on ``sock``, a listening socket handed over) and serve from a daemon thread; the bound
        port. Call it on the event loop.

        Raises:
            OSError: the address cannot be bound.
        """
        self._loop = asyncio.get_running_loop()
        server = _server_class(self.host)((self.host, self.requested_port), _QuietHandler, bind_and_activate=False)
        try:
            if sock is None:
                server.server_bind()
                server.server_activate()
            else:
                server.adopt(sock)
        except BaseException:
            server.server_close()
            raise
        server.set_app(self._app)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name=self.name, daemon=True
        )
        self._thread.start()
        return self.port

    @property
    def port(self) -> int:
        """The bound port (the one picked when asked for port 0)."""
        if self._server is None:
            raise RuntimeError("the admin endpoint is not serving")
        return int(self._server.server_address[1])

    @property
    def listening_socket(self) -> socket.socket:
        """The socket it accepts on (to hand to another process: a proxy's hot restart)."""
        if self._server is None:
            raise RuntimeError("the admin endpoint is not serving")
        return self._server.socket

    async def stop(self) -> None:
        """Stop serving and close the socket (requests being answered finish on their threads)."""
        server, self._server = self._server, None
        if server is None:
            return
        await asyncio.to_thread(server.shutdown)
        server.server_close()

    # -- requests, on the server's threads -------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            result: Iterable[bytes] = self._metrics_app(environ, start_response)
            return result
        if path not in ("/healthz", "/readyz"):
            start_response("404 Not Found", [_TEXT])  # a new list each time: wsgiref adds to it
            return [b"not found: the admin endpoint serves /healthz, /readyz and /metrics\n"]
        if environ.get("REQUEST_METHOD") != "GET":
            start_response("405 Method Not Allowed", [_TEXT, ("Allow", "GET")])
            return [b"use GET\n"]
        problems = self._health() if path == "/healthz" else self._not_ready()
        body = ("\n".join(problems) if problems else ("ok" if path == "/healthz" else "ready")) + "\n"
        start_response("503 Service Unavailable" if problems else "200 OK", [_TEXT])
        return [body.encode()]

    def _health(self) -> list[str]:
        """Alive means the event loop runs a call within the probe timeout."""
        try:
            self._on_loop(lambda: None)
        except LoopUnresponsiveError as exc:
            return [str(exc)]
        return []

    def _not_ready(self) -> list[str]:
        try:
            return list(self._on_loop(self.readiness))
        except LoopUnresponsiveError as exc:
            return [str(exc)]
        except Exception as exc:
            log.exception("%s: the readiness check failed", self.name)
            return [f"the readiness check failed: {exc!r}"]

    def _on_loop(self, fn: Callable[[], T]) -> T:
        assert self._loop is not None
        return call_on_loop(self._loop, fn, self.probe_timeout_s)
