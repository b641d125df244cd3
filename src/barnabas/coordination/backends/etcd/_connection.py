"""The URL, one gRPC channel per etcd endpoint, fail-over between them, and the error table.

Rules this module keeps:

- ``etcd://host:port[,host:port…]/prefix[?timeout=seconds]``: every key lives under ``/prefix/``
  (``/barnabas/`` when the path is empty); ``timeout`` bounds each request (default 5 s).
- One endpoint is *current* and takes every call. A call failing with UNAVAILABLE or a deadline moves
  to the next endpoint, so the following call tries another member (fail-over, not balancing: one
  member's view for reads and watches until it fails).
- A request is sent only over a channel that is READY, so "connection refused" never leaves a write
  in doubt. Reads are idempotent and retried, over every endpoint, until the request deadline.
  A write is retried only when etcd proves it was not proposed ("etcdserver: no leader", returned
  before the request reaches raft); any other failure after sending may have applied it and
  surfaces as UnavailableError (the caller re-reads).
- Every call carries ``hasleader=true`` metadata (etcd's ``WithRequireLeader``): a member cut off
  from its leader fails the call or ends the stream at once instead of hanging or going silent.
- Driver exceptions become coordination errors in :func:`translate` and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import grpc
from aetcd import rpc

from ...errors import CoordinationError, SessionLostError, UnavailableError

__all__ = [
    "REQUIRE_LEADER",
    "Connection",
    "EtcdAddress",
    "Stubs",
    "parse_url",
    "prefix_range_end",
    "translate",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PORT = 2379
DEFAULT_PREFIX = "/barnabas"
DEFAULT_TIMEOUT_S = 5.0
#: How long a connecting endpoint gets before the next one is tried (multi-endpoint URLs only).
CONNECT_SLICE_S = 0.5
#: Pause between read retries; doubles up to the cap.
RETRY_PAUSE_S = 0.02
RETRY_PAUSE_MAX_S = 0.5

REQUIRE_LEADER = (("hasleader", "true"),)

_CHANNEL_OPTIONS = (
    # Reconnect to a restarted member within a second (gRPC's default backoff reaches 120 s).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Detect a dead peer under an idle watch stream; etcd refuses pings more often than every 5 s
    # (--grpc-keepalive-min-time) and pings without an open stream.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    # A big list() or a watch response for a large transaction may exceed gRPC's 4 MiB default.
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
)

#: gRPC codes meaning "this member cannot serve now": fail over and, for reads, retry.
_UNAVAILABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
    }
)
#: etcd's ErrGRPCNoLeader: refused before proposing, so a write can be retried elsewhere.
_NO_LEADER = "etcdserver: no leader"
#: etcd's ErrGRPCLeaseNotFound.
_LEASE_NOT_FOUND = "requested lease not found"


@dataclass(frozen=True, slots=True)
class EtcdAddress:
    """What an ``etcd://`` URL names."""

    endpoints: tuple[str, ...]
    root: bytes
    timeout_s: float


def parse_url(url: str) -> EtcdAddress:
    """Split ``etcd://h:p[,h:p…]/prefix[?timeout=s]`` into endpoints, key root and request timeout.

    Raises:
        ValueError: another scheme, no host, a bad port, credentials or an unknown query option.
    """
    parts = urlsplit(url)
    if parts.scheme != "etcd":
        raise ValueError(f"not an etcd URL: {url!r}")
    if "@" in parts.netloc:
        raise ValueError(f"etcd URL {url!r}: credentials are not supported")
    endpoints = tuple(_endpoint(item, url) for item in parts.netloc.split(",") if item)
    if not endpoints:
        raise ValueError(f"etcd URL {url!r} names no host")
    path = unquote(parts.path).rstrip("/") or DEFAULT_PREFIX
    if not path.startswith("/"):
        path = "/" + path
    options = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    unknown = set(options) - {"timeout"}
    if unknown:
        raise ValueError(f"etcd URL {url!r}: unknown option(s) {', '.join(sorted(unknown))}")
    timeout_s = DEFAULT_TIMEOUT_S
    if "timeout" in options:
        try:
            timeout_s = float(options["timeout"][-1])
        except ValueError:
            raise ValueError(f"etcd URL {url!r}: timeout must be seconds") from None
        if not timeout_s > 0:
            raise ValueError(f"etcd URL {url!r}: timeout must be positive")
    return EtcdAddress(endpoints, (path + "/").encode(), timeout_s)


def _endpoint(item: str, url: str) -> str:
    host, port = item, str(DEFAULT_PORT)
    if item.startswith("["):  # [v6]:port
        end = item.find("]")
        if end < 0:
            raise ValueError(f"etcd URL {url!r}: bad host {item!r}")
        host, rest = item[: end + 1], item[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"etcd URL {url!r}: bad host {item!r}")
            port = rest[1:]
    elif ":" in item:
        host, port = item.rsplit(":", 1)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"etcd URL {url!r}: bad host:port {item!r}")
    return f"{host}:{int(port)}"


def prefix_range_end(prefix: bytes) -> bytes:
    """The etcd ``range_end`` covering every key that starts with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def translate(exc: grpc.aio.AioRpcError, what: str) -> Exception:
    """The coordination error for a failed etcd call (the one place driver errors are mapped)."""
    code, details = exc.code(), exc.details() or ""
    if code is grpc.StatusCode.NOT_FOUND and _LEASE_NOT_FOUND in details:
        return SessionLostError(f"{what}: the session's lease has ended ({details})")
    if code in _UNAVAILABLE_CODES:
        return UnavailableError(f"{what}: etcd unavailable ({code.name}: {details})")
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE):
        # e.g. "too many operations in txn request" (--max-txn-ops, 128), "request is too large".
        return ValueError(f"{what}: etcd rejected the request ({details})")
    return CoordinationError(f"{what}: etcd error {code.name}: {details}")


def is_unavailable(exc: grpc.aio.AioRpcError) -> bool:
    return exc.code() in _UNAVAILABLE_CODES


def is_no_leader(exc: grpc.aio.AioRpcError) -> bool:
    return exc.code() is grpc.StatusCode.UNAVAILABLE and _NO_LEADER in (exc.details() or "")


@dataclass(frozen=True, slots=True)
class Stubs:
    """The gRPC services of one endpoint (the generated stubs are untyped)."""

    endpoint: str
    kv: Any
    lease: Any
    watch: Any


class Connection:
    """Channels to every endpoint of one cluster, one of them current."""

    def __init__(self, address: EtcdAddress) -> None:
        self.address = address
        self.timeout_s = address.timeout_s
        self._channels: dict[int, tuple[Any, Stubs]] = {}
        self._current = 0
        self._closed = asyncio.Event()

    def is_closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for :meth:`close`; True if closed (a cancellable pause)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._closed.wait()
        return self.is_closed()

    async def wait_trouble(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``, returning early when the current channel stops being READY.

        Returns:
            True if the connection was closed meanwhile.
        """
        waits = [asyncio.ensure_future(self._closed.wait())]
        entry = self._channels.get(self._current)
        if entry is not None and entry[0].get_state() is grpc.ChannelConnectivity.READY:
            waits.append(asyncio.ensure_future(entry[0].wait_for_state_change(grpc.ChannelConnectivity.READY)))
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return self.is_closed()

    def _channel(self, index: int) -> tuple[Any, Stubs]:
        if index not in self._channels:
            endpoint = self.address.endpoints[index]
            channel = grpc.aio.insecure_channel(endpoint, options=_CHANNEL_OPTIONS)
            stubs = Stubs(endpoint, rpc.KVStub(channel), rpc.LeaseStub(channel), rpc.WatchStub(channel))
            self._channels[index] = (channel, stubs)
        return self._channels[index]

    def failed(self, stubs: Stubs) -> None:
        """``stubs``' endpoint failed a call: make the next endpoint current (if it still was)."""
        endpoints = self.address.endpoints
        if len(endpoints) > 1 and endpoints[self._current] == stubs.endpoint:
            self._current = (self._current + 1) % len(endpoints)
            log.info("etcd endpoint %s failed; trying %s next", stubs.endpoint, endpoints[self._current])

    async def ready(self, deadline: float) -> Stubs:
        """The current endpoint once its channel is READY, trying each endpoint in turn.

        Raises:
            UnavailableError: no endpoint became ready before ``deadline`` (monotonic seconds).
        """
        endpoints = self.address.endpoints
        while True:
            if self.is_closed():
                raise UnavailableError("the etcd metastore is closed")
            index = self._current
            channel, stubs = self._channel(index)
            state = channel.get_state(try_to_connect=True)
            if state is grpc.ChannelConnectivity.READY:
                return stubs
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise UnavailableError(f"no etcd endpoint reachable ({', '.join(endpoints)})")
            if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE and len(endpoints) > 1:
                self._current = (index + 1) % len(endpoints)
                if self._current == 0:  # every endpoint tried: wait for one to change state
                    await self._wait_state_change(self._channel(0)[0], min(remaining, CONNECT_SLICE_S))
                continue
            wait = remaining if len(endpoints) == 1 else min(remaining, CONNECT_SLICE_S)
            if not await self._wait_ready(channel, wait) and index == self._current and len(endpoints) > 1:
                self._current = (index + 1) % len(endpoints)

    @staticmethod
    async def _wait_state_change(channel: Any, timeout_s: float) -> None:
        state = channel.get_state(try_to_connect=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await channel.wait_for_state_change(state)

    @staticmethod
    async def _wait_ready(channel: Any, timeout_s: float) -> bool:
        async def ready() -> None:
            while (state := channel.get_state(try_to_connect=True)) is not grpc.ChannelConnectivity.READY:
                if state is grpc.ChannelConnectivity.SHUTDOWN:
                    raise UnavailableError("channel shut down")
                await channel.wait_for_state_change(state)

        try:
            async with asyncio.timeout(timeout_s):
                await ready()
        except TimeoutError:
            return False
        return True

    def attempt_timeout(self, deadline: float) -> float:
        """Seconds one attempt may take: what is left, but leave time to try another endpoint."""
        remaining = max(0.001, deadline - time.monotonic())
        if len(self.address.endpoints) > 1:
            return min(remaining, max(1.0, self.timeout_s / 2))
        return remaining

    async def read(self, what: str, call: Callable[[Stubs, float], Awaitable[T]]) -> T:
        """Run an idempotent call, retrying over the endpoints until the request deadline.

        Raises:
            UnavailableError: no member answered in time.
        """
        deadline = time.monotonic() + self.timeout_s
        pause = RETRY_PAUSE_S
        while True:
            stubs = await self.ready(deadline)
            try:
                return await call(stubs, self.attempt_timeout(deadline))
            except grpc.aio.AioRpcError as exc:
                if not is_unavailable(exc) or time.monotonic() + pause >= deadline:
                    raise translate(exc, what) from exc
                log.debug("etcd %s failed on %s, retrying: %s", what, stubs.endpoint, exc.details())
                self.failed(stubs)
            await self.wait_closed(pause)
            pause = min(pause * 2, RETRY_PAUSE_MAX_S)

    async def write(self, what: str, call: Callable[[Stubs, float], Awaitable[T]]) -> T:
        """Run a non-idempotent call once it can be sent; retry only what provably was not applied.

        Raises:
            UnavailableError: not sent in time, or sent and the outcome is unknown.
        """
        deadline = time.monotonic() + self.timeout_s
        pause = RETRY_PAUSE_S
        while True:
            stubs = await self.ready(deadline)
            try:
                return await call(stubs, self.attempt_timeout(deadline))
            except grpc.aio.AioRpcError as exc:
                if is_unavailable(exc):
                    self.failed(stubs)
                if not is_no_leader(exc) or time.monotonic() + pause >= deadline:
                    raise translate(exc, what) from exc
            await self.wait_closed(pause)
            pause = min(pause * 2, RETRY_PAUSE_MAX_S)

    async def close(self) -> None:
        """Close every channel; calls in flight end with CANCELLED."""
        self._closed.set()
        channels, self._channels = self._channels, {}
        for channel, _ in channels.values():
            await channel.close()
