"""A hot restart's handover on real Unix and TCP sockets, both sides in one event loop (the processes are in
tests/integration/test_proxy_hot_restart.py): descriptors, listener checks, abandon and drain, privacy and peers."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from barnabas.proxy.handover import HandoverError, bind_private, check_directory, receive, send
from barnabas.proxy.hot_restart import HandoverServer, Listening, Takeover, differences, listener_value

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
LISTENERS = "PLAINTEXT://127.0.0.1:0"


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory of this user that another user can reach (pytest's own are private to it)."""
    directory = Path(tempfile.mkdtemp(prefix="hot-restart-", dir="/tmp"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


class Old:
    """The running proxy's side: one listening TCP socket, what a handover did to it."""

    def __init__(self, path: Path) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.released = False
        self.successor: int | None = None
        self.server = HandoverServer(path, self.listening, self.release, self.replaced)

    def listening(self) -> list[Listening]:
        return [Listening("listeners", LISTENERS, self.listener.fileno())]

    async def release(self) -> None:
        self.released = True

    def replaced(self, pid: int) -> None:
        self.successor = pid


@asynccontextmanager
async def serving(path: Path) -> AsyncIterator[Old]:
    old = Old(path)
    old.server.start()
    try:
        yield old
    finally:
        await old.server.close()
        old.listener.close()


def test_the_new_side_gets_the_listening_socket_and_the_old_drains_when_told(tmp_path: Path) -> None:
    path = tmp_path / "hot.sock"

    async def scenario() -> None:
        async with serving(path) as old:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            takeover = await Takeover.begin(path, {"listeners": LISTENERS})
            assert takeover.old_pid == os.getpid()
            (handed,) = takeover.sockets["listeners"]
            assert handed.getsockname() == old.listener.getsockname()
            old.listener.close()  # the old side's descriptor goes; the socket stays open in the new side's
            with socket.create_connection(handed.getsockname(), timeout=5):
                accepted, _ = handed.accept()
                accepted.close()
            assert not old.released
            await takeover.finish()
            assert (old.released, old.successor) == (True, os.getpid())
            handed.close()

    asyncio.run(scenario())


def test_other_listeners_are_refused_and_the_old_side_serves_on(tmp_path: Path) -> None:
    path = tmp_path / "hot.sock"

    async def scenario() -> None:
        async with serving(path) as old:
            refused = r"^listeners: the running proxy \(pid \d+\) listens on PLAINTEXT://127.0.0.1:0, this one is "
            with pytest.raises(HandoverError, match=refused + "configured for PLAINTEXT://127.0.0.1:9"):
                await Takeover.begin(path, {"listeners": "PLAINTEXT://127.0.0.1:9"})
            takeover = await Takeover.begin(path, {"listeners": LISTENERS})  # it still serves handovers
            await takeover.abandon("the new process failed to start")
            again = await Takeover.begin(path, {"listeners": LISTENERS})
            await again.finish()
            assert old.successor == os.getpid()

    asyncio.run(scenario())


def test_differences_name_the_setting_and_both_values() -> None:
    old = {"listeners": listener_value("PLAINTEXT", "::1", 9192)}
    assert old == {"listeners": "PLAINTEXT://[::1]:9192"}
    assert differences(7, old, dict(old)) is None
    problem = differences(7, old, {**old, "admin.listeners": "http://127.0.0.1:8080"})
    assert problem is not None
    assert problem.startswith("admin.listeners: the running proxy (pid 7) listens on nothing, this one is configured "
                              "for http://127.0.0.1:8080")  # fmt: skip


def test_messages_carry_descriptors_and_a_hang_up_is_an_error() -> None:
    async def scenario() -> None:
        left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        left.setblocking(False)
        right.setblocking(False)
        with left, right, socket.create_server(("127.0.0.1", 0)) as listener:
            await send(left, {"op": "x"}, [listener.fileno()])
            message, fds = await receive(right)
            assert message == {"op": "x"} and len(fds) == 1 and not os.get_inheritable(fds[0])
            with socket.socket(fileno=fds[0]) as copy:
                assert copy.getsockname() == listener.getsockname()
            left.close()
            with pytest.raises(HandoverError, match="hung up"):
                await receive(right)

    asyncio.run(scenario())


def test_the_socket_directory_must_be_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    with pytest.raises(HandoverError, match="is writable by other users"):
        check_directory(shared / "hot.sock")
    with pytest.raises(HandoverError, match="at most 107 bytes"):
        check_directory(tmp_path / ("x" * 120))
    (tmp_path / "file").write_text("")
    with pytest.raises(HandoverError, match="exists and is not a socket"):
        bind_private(tmp_path / "file")
    created = tmp_path / "created" / "hot.sock"
    check_directory(created)  # a missing directory is made, private
    assert stat.S_IMODE(created.parent.stat().st_mode) & 0o077 == 0


@ROOT_ONLY
def test_the_socket_directory_must_belong_to_this_user(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(HandoverError, match=f"belongs to uid {NOBODY}, not to this user"):
        check_directory(theirs / "hot.sock")


@ROOT_ONLY
def test_the_running_side_hands_nothing_to_another_user(reachable: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A process of another uid that reaches the socket (here its file mode is opened for it) gets nothing."""
    path = reachable / "hot.sock"

    async def scenario() -> None:
        async with serving(path):
            path.chmod(0o666)
            child = os.fork()
            if child == 0:  # pragma: no cover - the child: connect as nobody, expect a hang-up and no descriptor
                code = 1
                try:
                    os.setuid(NOBODY)
                    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
                        sock.settimeout(10)
                        sock.connect(str(path))
                        try:  # the server may hang up before the request is sent: that is a refusal too
                            sock.send(b'{"version": 1, "op": "listeners"}')
                            data, fds, _, _ = socket.recv_fds(sock, 65536, 4)
                        except (BrokenPipeError, ConnectionResetError):
                            data, fds = b"", []
                        code = 0 if data == b"" and not fds else 1
                finally:
                    os._exit(code)
            _, status = await asyncio.to_thread(os.waitpid, child, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            assert f"hot restart: refused pid {child} of uid {NOBODY}" in caplog.text

    asyncio.run(scenario())


@ROOT_ONLY
def test_the_new_side_takes_nothing_from_another_user(reachable: Path) -> None:
    theirs = reachable / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    path = theirs / "hot.sock"
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: serve one connection as nobody
        try:
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
                sock.bind(str(path))
                sock.listen(1)
                sock.settimeout(10)
                conn, _ = sock.accept()
                conn.settimeout(10)
                conn.recv(1)
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while not path.exists():
            assert time.monotonic() < deadline, "the other user's socket never appeared"
            time.sleep(0.01)  # polling for the child's bind
        with pytest.raises(HandoverError, match=f"is served by uid {NOBODY}"):
            asyncio.run(Takeover.begin(path, {"listeners": LISTENERS}))
    finally:
        os.waitpid(child, 0)
