"""A proxy's hot restart: a new process takes over the running one's listening sockets, and the old one drains.

After shotover 0.7's hot reload (its ``hot_reload`` module: SendListeningSockets, then GradualShutdown).
With ``proxy.hot.restart.socket`` set, a running proxy serves handovers on that Unix socket
(``handover``: private, same user only). A new process started with ``--takeover`` and the same
settings connects and

1. asks for the listening sockets, every one of them (the client listener's, the admin endpoint's),
   each named by its setting and configured value. If its own settings name other listeners it
   refuses, saying which, and the old serves on;
2. starts on them: reads the cluster, builds its router, serves. The old still serves meanwhile (both
   accept from the same sockets); if this start fails, it says why and the old serves on alone;
3. takes over the hot-restart socket's path, then tells the old to drain. The old stops accepting
   (closes its own descriptors: the sockets stay open in the new process, so no connection attempt is
   ever refused, the kernel queues it for the new one), leaves the group ``proxies``, says so, then
   drains its client connections as on SIGTERM (``proxy.drain.timeout.ms``) and exits.

The old process handles one handover at a time, and waits for step 3 for as long as the new process
keeps the conversation open (a new process that dies ends it). Messages carry a protocol version, so a
new process of another release refuses rather than guesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .handover import HandoverError, accept, bind_private, connect, peer_of, receive, send, served

__all__ = [
    "HandoverError",
    "HandoverServer",
    "Listening",
    "Takeover",
    "differences",
    "listener_value",
    "refuse_if_served",
]

log = logging.getLogger(__name__)

VERSION = 1
#: How long one side waits for an answer the other gives at once.
ANSWER_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Listening:
    """One listening socket: the setting that names it, the value configured there, its descriptor."""

    setting: str
    value: str
    fd: int


def listener_value(scheme: str, host: str, port: int) -> str:
    """A listener as both processes compare it: ``SCHEME://host:port`` (IPv6 hosts in brackets)."""
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"


def refuse_if_served(path: Path) -> None:
    """Refuse to start a proxy that would serve hot restarts where a running one does.

    Raises:
        HandoverError: a process accepts on ``path``.
    """
    peer = served(path)
    if peer is not None:
        raise HandoverError(
            f"a proxy (pid {peer.pid}) serves hot restarts on {path}: start with --takeover to replace it"
        )


class HandoverServer:
    """The running proxy's side: hand the listening sockets to a new process on ``path``, then let it drain.

    Args:
        path: the Unix socket (``proxy.hot.restart.socket``).
        listening: the sockets to hand over, read at each handover.
        release: stop accepting and leave the group; awaited before the new process is told it may go on.
        replaced: called with the new process's pid once it has taken over (the old then drains and exits).
    """

    def __init__(
        self,
        path: Path,
        listening: Callable[[], Sequence[Listening]],
        release: Callable[[], Awaitable[None]],
        replaced: Callable[[int], None],
    ) -> None:
        self.path = path
        self._listening = listening
        self._release = release
        self._replaced = replaced
        self._sock: socket.socket | None = None
        self._inode = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Listen on ``path`` (renamed over any socket there) and serve handovers. Call it on the event loop.

        Raises:
            HandoverError: the directory is not private, or the path is not a socket.
            OSError: binding failed.
        """
        self._sock = bind_private(self.path)
        self._inode = os.stat(self.path).st_ino
        self._task = asyncio.get_running_loop().create_task(self._serve(), name="proxy hot restart")

    async def _serve(self) -> None:
        assert self._sock is not None
        while True:
            conn = await accept(self._sock)
            with conn:
                try:
                    if await self._converse(conn):
                        return
                except (HandoverError, OSError) as exc:
                    log.warning("hot restart: %s; serving on", exc)

    async def _converse(self, conn: socket.socket) -> bool:
        """One handover; whether the new process took over.

        Raises:
            HandoverError: it went wrong before the new process served; this one serves on.
        """
        peer = peer_of(conn)
        if peer.uid != os.geteuid():
            log.warning("hot restart: refused pid %d of uid %d (only uid %d may take over)", peer.pid, peer.uid,
                        os.geteuid())  # fmt: skip
            return False
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                request, fds = await receive(conn)
        except (HandoverError, TimeoutError):
            log.debug("hot restart: pid %d asked nothing (a probe for a running proxy)", peer.pid)
            return False
        _close(fds)
        if request.get("version") != VERSION or request.get("op") != "listeners":
            await send(conn, {"version": VERSION, "op": "refused", "reason": f"unknown request {request!r:.200}"})
            return False
        listening = list(self._listening())
        described = [{"setting": each.setting, "value": each.value} for each in listening]
        await send(conn, {"version": VERSION, "op": "listeners", "listeners": described}, [e.fd for e in listening])
        log.info("hot restart: handed %d listening sockets to pid %d; serving until it is ready", len(listening),
                 peer.pid)  # fmt: skip
        try:
            request, fds = await receive(conn)  # as long as the new process takes to start
        except HandoverError as exc:
            raise HandoverError(f"pid {peer.pid} did not take over ({exc})") from None
        _close(fds)
        if request.get("op") != "drain":
            raise HandoverError(f"pid {peer.pid} did not take over ({request.get('reason', request.get('op'))})")
        await self._release()
        self._close_listener()
        try:
            await send(conn, {"version": VERSION, "op": "draining", "pid": os.getpid()})
        except HandoverError as exc:
            log.warning("hot restart: pid %d asked this one to drain and went away (%s)", peer.pid, exc)
        log.info("hot restart: pid %d took the listeners over; draining", peer.pid)
        self._replaced(peer.pid)  # it served when it asked: this process has stopped accepting either way
        return True

    def _close_listener(self) -> None:
        """Stop listening; remove the path only while it is still this process's socket (not a successor's)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        sock.close()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                self.path.unlink()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._close_listener()


class Takeover:
    """The new process's side of one handover: the sockets it was given, and the conversation to finish.

    Attributes:
        old_pid: the process that handed them over.
        sockets: setting -> the listening sockets it names (the caller serves on them or closes them).
    """

    def __init__(self, conn: socket.socket, old_pid: int, sockets: dict[str, list[socket.socket]]) -> None:
        self._conn = conn
        self.old_pid = old_pid
        self.sockets = sockets

    @classmethod
    async def begin(cls, path: Path, wanted: dict[str, str]) -> Takeover:
        """Ask the proxy serving on ``path`` for its listening sockets; ``wanted`` is setting -> configured value.

        Raises:
            HandoverError: nothing serves there, another user does, or its listeners differ from ``wanted``.
        """
        conn = connect(path)
        try:
            peer = peer_of(conn)
            if peer.uid != os.geteuid():
                raise HandoverError(f"{path} is served by uid {peer.uid} (pid {peer.pid}), not by this user")
            try:
                async with asyncio.timeout(ANSWER_TIMEOUT_S):
                    await send(conn, {"version": VERSION, "op": "listeners"})
                    answer, fds = await receive(conn)
            except TimeoutError:
                raise HandoverError(
                    f"pid {peer.pid} did not hand its sockets over within {ANSWER_TIMEOUT_S:g} s (is another hot "
                    "restart under way?)"
                ) from None
            theirs, sockets = _sockets(answer, fds, peer.pid)
        except BaseException:
            conn.close()
            raise
        takeover = cls(conn, peer.pid, sockets)
        problem = differences(peer.pid, theirs, wanted)
        if problem is not None:
            await takeover.abandon(problem)
            raise HandoverError(problem)
        return takeover

    async def finish(self) -> None:
        """Tell the old process to drain, and wait until it has stopped accepting and left the group.

        Raises:
            HandoverError: it did not answer (it may have been stopping anyway).
        """
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                await send(self._conn, {"version": VERSION, "op": "drain"})
                answer, fds = await receive(self._conn)
            _close(fds)
            if answer.get("op") != "draining":
                raise HandoverError(f"pid {self.old_pid} answered {answer!r:.200} to drain")
        except TimeoutError:
            raise HandoverError(f"pid {self.old_pid} did not answer within {ANSWER_TIMEOUT_S:g} s") from None
        finally:
            self._conn.close()

    async def abandon(self, reason: str) -> None:
        """Give up: close every socket received; the old process serves on."""
        for socks in self.sockets.values():
            for sock in socks:
                sock.close()
        with contextlib.suppress(HandoverError, TimeoutError):
            async with asyncio.timeout(ANSWER_TIMEOUT_S):
                await send(self._conn, {"version": VERSION, "op": "abandon", "reason": reason[:1000]})
        self._conn.close()


def differences(old_pid: int, theirs: dict[str, str], wanted: dict[str, str]) -> str | None:
    """What differs between the old process's listeners and ``wanted`` (setting -> value), in one line; None if
    nothing."""
    for setting in sorted(theirs.keys() | wanted.keys()):
        old, new = theirs.get(setting), wanted.get(setting)
        if old != new:
            return (
                f"{setting}: the running proxy (pid {old_pid}) listens on {old or 'nothing'}, this one is configured "
                f"for {new or 'nothing'}; a hot restart keeps every listener (stop and start the proxy to change them)"
            )
    return None


def _sockets(
    answer: dict[str, object], fds: list[int], old_pid: int
) -> tuple[dict[str, str], dict[str, list[socket.socket]]]:
    """The old process's listeners (setting -> value) and the received descriptors as sockets, by setting.

    Raises:
        HandoverError: the answer is a refusal, or does not describe exactly the descriptors that came.
    """
    listeners = answer.get("listeners")
    if answer.get("op") != "listeners" or answer.get("version") != VERSION or not isinstance(listeners, list):
        _close(fds)
        reason = answer.get("reason") or f"an answer this proxy does not understand: {answer!r:.200}"
        raise HandoverError(f"pid {old_pid} refused the hot restart: {reason}")
    if len(listeners) != len(fds) or not all(isinstance(e, dict) and "setting" in e for e in listeners):
        _close(fds)
        raise HandoverError(f"pid {old_pid} sent {len(fds)} sockets for {len(listeners)} listeners")
    theirs: dict[str, str] = {}
    sockets: dict[str, list[socket.socket]] = {}
    for entry, fd in zip(listeners, fds, strict=True):
        theirs[str(entry["setting"])] = str(entry.get("value"))
        sockets.setdefault(str(entry["setting"]), []).append(socket.socket(fileno=fd))
    return theirs, sockets


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
