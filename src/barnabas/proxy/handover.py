"""The wire of a proxy's hot restart: a private Unix socket, its peer's credentials, messages with descriptors.

Rules this module keeps:

- The socket is a ``SOCK_SEQPACKET`` Unix socket: one send is one message, and the descriptors it
  carries travel with it (``SCM_RIGHTS``), so no framing is needed and none can be split.
- A message is one JSON object of at most ``MAX_MESSAGE`` bytes with at most ``MAX_FDS`` descriptors.
- The path lives in a directory this user owns and nobody else may write; the socket file is 0600. It
  is bound under a temporary name, made 0600, then renamed over the path: nobody connects before the
  mode is set, and a new process replaces the old one's socket without a moment when the path is missing.
- Both ends check the other's uid (``SO_PEERCRED``) before anything else: only the user running the
  proxy may take its sockets, and a new process gives nothing to a socket another user put there.
- Every wait is on the event loop (``add_reader``), never a blocking call; callers bound them.
- Descriptors received are made non-inheritable (``SCM_RIGHTS`` does not set close-on-exec).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_FDS",
    "HandoverError",
    "Peer",
    "accept",
    "bind_private",
    "check_directory",
    "connect",
    "peer_of",
    "receive",
    "send",
    "served",
]

MAX_MESSAGE = 64 * 1024
MAX_FDS = 32
#: The longest path a Unix socket address holds (sun_path is 108 bytes, NUL included).
MAX_PATH_BYTES = 107
#: How long connecting to the running proxy's socket may take (it accepts at once when it runs).
CONNECT_TIMEOUT_S = 5.0
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


class HandoverError(Exception):
    """A hot restart cannot go on; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class Peer:
    pid: int
    uid: int


def check_directory(path: Path) -> None:
    """Make sure ``path``'s directory is private: owned by this user, writable by nobody else (created if missing).

    Raises:
        HandoverError: the path is too long for a Unix socket, or its directory is not private.
    """
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise HandoverError(f"{path}: a Unix socket's path has at most {MAX_PATH_BYTES} bytes")
    directory = path.parent
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        info = directory.stat()
    except OSError as exc:
        raise HandoverError(f"{directory}: {exc.strerror or exc}") from None
    if info.st_uid != os.geteuid():
        raise HandoverError(f"{directory} belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise HandoverError(f"{directory} is writable by other users (chmod go-w it, or pick a private directory)")


def bind_private(path: Path) -> socket.socket:
    """A non-blocking socket listening on ``path`` (0600), renamed over whatever socket was there.

    Raises:
        HandoverError: the directory is not private, or ``path`` exists and is not a socket.
        OSError: binding failed.
    """
    check_directory(path)
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise HandoverError(f"{path} exists and is not a socket")
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.bind(os.fsdecode(temporary))
        os.chmod(temporary, 0o600)
        sock.listen(4)
        os.rename(temporary, path)
    except BaseException:
        sock.close()
        temporary.unlink(missing_ok=True)
        raise
    sock.setblocking(False)
    return sock


def connect(path: Path) -> socket.socket:
    """A non-blocking connection to the socket at ``path``.

    Raises:
        HandoverError: nothing accepts there (no file, a stale file, no permission).
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(os.fsdecode(path))
    except OSError as exc:
        sock.close()
        raise HandoverError(f"no proxy serves hot restarts on {path} ({exc.strerror or exc})") from None
    sock.setblocking(False)
    return sock


def served(path: Path) -> Peer | None:
    """The process accepting connections on ``path`` now, or None (no socket, or a stale one)."""
    try:
        sock = connect(path)
    except HandoverError:
        return None
    with sock:
        return peer_of(sock)


def peer_of(sock: socket.socket) -> Peer:
    """The process at the other end of a connected Unix socket, as the kernel saw it connect."""
    pid, uid, _ = _CREDENTIALS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size))
    return Peer(pid, uid)


async def accept(listening: socket.socket) -> socket.socket:
    """The next connection to ``listening`` (non-blocking), itself non-blocking."""
    while True:
        try:
            conn, _ = listening.accept()
        except (BlockingIOError, InterruptedError):
            await _readable(listening)
            continue
        conn.setblocking(False)
        return conn


async def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one message, with ``fds`` attached.

    Raises:
        HandoverError: the other end is gone, or the message is too large.
    """
    data = json.dumps(message).encode()
    if len(data) > MAX_MESSAGE or len(fds) > MAX_FDS:
        raise HandoverError(f"a hot restart message of {len(data)} bytes and {len(fds)} sockets is too large")
    while True:
        try:
            socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
            return
        except (BlockingIOError, InterruptedError):
            await _writable(sock)
        except OSError as exc:
            raise HandoverError(f"the other process hung up ({exc.strerror or exc})") from None


async def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The next message and the descriptors it carried (the caller owns them).

    Raises:
        HandoverError: the other end hung up, or sent something that is not one whole message.
    """
    while True:
        try:
            data, fds, flags, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
            break
        except (BlockingIOError, InterruptedError):
            await _readable(sock)
        except OSError as exc:
            raise HandoverError(f"the other process hung up ({exc.strerror or exc})") from None
    for fd in fds:
        os.set_inheritable(fd, False)
    try:
        if not data:
            raise HandoverError("the other process hung up")
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise HandoverError("a hot restart message was larger than any this proxy sends")
        try:
            message = json.loads(data)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise HandoverError("a hot restart message was not a JSON object")
    except HandoverError:
        for fd in fds:
            os.close(fd)
        raise
    return message, fds


async def _readable(sock: socket.socket) -> None:
    await _ready(sock, writing=False)


async def _writable(sock: socket.socket) -> None:
    await _ready(sock, writing=True)


async def _ready(sock: socket.socket, *, writing: bool) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    fd = sock.fileno()
    (loop.add_writer if writing else loop.add_reader)(fd, wake)
    try:
        await ready
    finally:
        (loop.remove_writer if writing else loop.remove_reader)(fd)
