"""Real PostgreSQL 15 servers, as users of the process harness.

Rules this module keeps:

- ``initdb`` runs once per install (0.7–1.1 s) into a template; each server copies it (start alone
  ~0.15 s). initdb and postgres refuse to run as root, so under root both run as the Debian
  ``postgres`` user (``Popen(user=...)``, no ``runuser``/``pg_ctl`` in between, so the pid we hold
  is the postmaster's) in a temp dir that user owns (``tempfile.mkdtemp``: pytest's own temp dirs
  are ``0700 root`` and unreachable for it).
- Servers bind 127.0.0.1 only (or, given a node of a private network, that node's address inside
  its namespace), on a free port picked here; the unix socket lives in the server dir. In a node the
  postmaster is started as ``ip netns exec NS setpriv --reuid ... postgres``: entering a namespace
  needs root, and both exec the next program, so the pid is still the postmaster's.
- A clean stop is SIGINT to the postmaster ("fast" shutdown: SIGTERM would be "smart" and wait for
  clients to disconnect, which they never do). Backends call ``setsid()``, so no process group
  reaches them: ``kill()`` and ``pause()`` signal the postmaster (first SIGSTOP, so it forks nothing
  meanwhile) and each of its children found in /proc, and ``kill()`` waits for them all (orphaned
  backends would keep the shared memory and block a restart).
- Readiness: a real connection succeeds (``SELECT 1``).
- ``fsync=off`` unless ``durable``: test data need not survive a host crash.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from ..network import NetNode
from ..process import ManagedServer, ServerProcess, ServerStartError, free_ports, process_table

__all__ = ["PG_BIN", "PostgresInstall", "PostgresServer"]

PG_BIN = Path(os.environ.get("BARNABAS_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class PostgresInstall:
    """A temp dir owned by the server's user, holding one initdb template and any number of servers."""

    def __init__(self) -> None:
        if not (PG_BIN / "postgres").exists():
            raise FileNotFoundError(f"no PostgreSQL at {PG_BIN} (apt-get install postgresql-15)")
        # Under root, run as the Debian "postgres" user (initdb refuses root).
        self.user: str | None = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            try:
                entry = pwd.getpwnam(self.user)
            except KeyError:
                raise FileNotFoundError("running as root, and there is no 'postgres' user to run initdb as") from None
        self.base = Path(tempfile.mkdtemp(prefix="barnabas-pg-"))
        if self.user is not None:
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        self.template = self.base / "template"
        self.servers: list[PostgresServer] = []
        self.initdb_s = 0.0

    def run(self, args: list[str], log: Path) -> None:
        """Run a PostgreSQL tool as the server's user; fail with its output."""
        with open(log, "ab") as out:
            result = subprocess.run(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, user=self.user, check=False
            )
        if result.returncode != 0:
            raise ServerStartError(f"{args[0]} failed ({result.returncode}):\n{log.read_text(errors='replace')}")

    def initdb(self) -> PostgresInstall:
        started = time.monotonic()
        self.run(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(self.template),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ],
            self.base / "initdb.log",
        )
        self.initdb_s = time.monotonic() - started
        return self

    def server(self, name: str | None = None, *, node: NetNode | None = None) -> PostgresServer:
        """A new server (not started) with its own copy of the template (in ``node`` when given)."""
        name = name or f"s{len(self.servers) + 1}"
        server = PostgresServer(self, name, node=node)
        self.servers.append(server)
        return server

    def log_tails(self, lines: int = 40) -> str:
        return "\n".join(server.log_tail(lines) for server in self.servers)

    def cleanup(self, keep: bool) -> None:
        for server in self.servers:
            server.stop()
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)


class PostgresServer(ManagedServer):
    """One postmaster with its data dir and log; restartable on the same port."""

    def __init__(
        self, install: PostgresInstall, name: str, *, durable: bool = False, node: NetNode | None = None
    ) -> None:
        self.install = install
        self.name = name
        #: Where it runs: 127.0.0.1 here, or inside a private network's node (partition tests).
        self.node = node
        self.host = node.address if node is not None else "127.0.0.1"
        #: fsync on, as in production (the benchmark compares durable backends); tests turn it off.
        self.durable = durable
        self.dir = install.base / name
        self.data_dir = self.dir / "data"
        self.log_path = self.dir / "server.log"
        self.port = free_ports(1)[0]
        self.dir.mkdir()
        if install.user is not None:
            entry = pwd.getpwnam(install.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        install.run(["cp", "-a", str(install.template), str(self.data_dir)], self.log_path)
        if node is not None:  # clients reach it over the private network's bridge, not loopback
            with open(self.data_dir / "pg_hba.conf", "a") as hba:
                hba.write("host all all samenet trust\n")
        prefix: list[str] = []
        user = install.user
        if node is not None:
            prefix = node.exec_prefix
            if user is not None:  # setpriv drops to the user after the namespace is entered
                prefix = [*prefix, "setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
                user = None
        self.process = _Postmaster(
            f"postgres {name}", [*prefix, *self.command()], log_path=self.log_path, ready=lambda _: self.ready(),
            cwd=self.dir, start_timeout_s=START_TIMEOUT_S, stop_timeout_s=STOP_TIMEOUT_S, user=user,
            stop_signal=signal.SIGINT, new_session=True,
        )  # fmt: skip

    @property
    def url(self) -> str:
        """The backend URL with the default schema."""
        return f"postgresql://postgres@{self.host}:{self.port}/postgres"

    def url_for(self, schema: str | None = None) -> str:
        """A backend URL with a fresh (or the given) schema, so tests sharing a server don't collide."""
        return f"{self.url}?schema={schema or 't_' + uuid.uuid4().hex[:12]}"

    def command(self) -> list[str]:
        return [
            str(PG_BIN / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-k",
            str(self.dir),
            "-c",
            f"listen_addresses={self.host}",
            *(() if self.durable else ("-c", "fsync=off", "-c", "full_page_writes=off")),
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=32MB",
            # Server-side detection of dead clients (coordination.md §5 pitfalls).
            "-c",
            "tcp_keepalives_idle=5",
            "-c",
            "tcp_keepalives_interval=2",
            "-c",
            "tcp_keepalives_count=3",
        ]

    def ready(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False


class _Postmaster(ServerProcess):
    """The postmaster, whose kill, pause and resume reach its backends too (they are not in its group)."""

    def kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGSTOP)  # no new backends while we collect them
        children = self._children()
        for pid in [proc.pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        self._wait_gone(children)

    def pause(self) -> None:
        super().pause()  # first, so it forks no backend we would miss
        for pid in self._children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        if not self.running:
            return
        assert self.proc is not None
        for pid in [*self._children(), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def _children(self) -> list[int]:
        """The postmaster's children (backends call setsid(), so a process group does not reach them)."""
        assert self.proc is not None
        return [pid for pid, _, parent, _ in process_table() if parent == self.proc.pid]

    def _wait_gone(self, pids: list[int]) -> None:
        """Killed backends linger for a moment; a restart needs them gone (they hold shared memory)."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for pid in pids:
            while time.monotonic() < deadline:
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    break
                if state in ("Z", "X"):
                    break
                time.sleep(0.01)
