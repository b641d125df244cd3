"""`barnabas shutdown --pid PID`: a controlled shutdown of a broker or proxy on this host, waited for.

Made for a Kubernetes preStop hook (``deploy/kubernetes/base/broker.yaml``): SIGTERM is the broker's
controlled shutdown (it resigns as controller, leaves the ``brokers`` group, waits up to
``controlled.shutdown.max.wait.ms`` until its leaderships moved to other in-sync replicas, stops
serving, closes its logs cleanly), and this command asks for it and waits, within ``--timeout``.

Rules this command keeps:

- It signals only a process whose command line is barnabas's ``broker`` or ``proxy`` (read from
  /proc; Linux only), by pid, once.
- It returns 0 once the process has exited, or, with ``--admin-url``, once that admin endpoint has
  stopped answering: the broker closes it after handing its leaderships over and closing its
  listeners, right before closing its logs. Returning then lets a preStop hook end before the
  container does (the kubelet reports a hook cut short by its container's exit as
  FailedPreStopHook); the kubelet still waits for the container to exit.
- Still running after ``--timeout``: one line and exit 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ._client import positive_float, positive_int
from .errors import CliError

POLL_S = 0.1
DEFAULT_TIMEOUT_S = 80.0
#: How long one look at the admin endpoint may take.
PROBE_TIMEOUT_S = 1.0
ROLES = ("broker", "proxy")


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "shutdown",
        help="controlled shutdown of a broker or proxy process on this host, waited for (a preStop hook)",
        description="Send the barnabas broker or proxy process PID a SIGTERM, its controlled shutdown (leaderships "
        "handed to other in-sync replicas, logs closed cleanly), and wait until it has exited or, with "
        "--admin-url, until its admin endpoint stopped answering (it has handed its leaderships over and only "
        "closes its logs after that). Exit 1 if it is still running after --timeout.",
    )
    parser.add_argument(
        "--pid", type=positive_int, default=1,
        help="the broker's or proxy's process id (default 1: the container's main process)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
        help=f"how long to wait (default {DEFAULT_TIMEOUT_S:g}; keep it below terminationGracePeriodSeconds)",
    )  # fmt: skip
    parser.add_argument(
        "--admin-url", metavar="URL",
        help="its admin endpoint, e.g. http://127.0.0.1:9644: return once it stops answering",
    )  # fmt: skip
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    pid: int = args.pid
    role = _role(pid)
    admin = args.admin_url.rstrip("/") if args.admin_url else None
    if admin is not None and not _answers(admin):
        print(f"barnabas shutdown: {admin} does not answer; waiting for the process to exit", file=sys.stderr)
        admin = None
    started = time.monotonic()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        print(f"{role} process {pid} had already exited")
        return 0
    except PermissionError:
        raise CliError(f"not allowed to signal process {pid}") from None
    deadline = started + args.timeout
    while time.monotonic() < deadline:
        if not _running(pid):
            print(f"{role} process {pid} stopped in {time.monotonic() - started:.1f} s")
            return 0
        if admin is not None and not _answers(admin):
            print(f"{role} process {pid} stopped serving in {time.monotonic() - started:.1f} s; it closes its logs")
            return 0
        time.sleep(POLL_S)
    raise CliError(f"{role} process {pid} is still running {args.timeout:g} s after SIGTERM")


def _role(pid: int) -> str:
    """``broker`` or ``proxy``: what process ``pid`` runs.

    Raises:
        CliError: there is no such process, or it is not a barnabas broker or proxy.
    """
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except FileNotFoundError:
        raise CliError(f"no process {pid}") from None
    except OSError as exc:
        raise CliError(f"cannot read process {pid}'s command line: {exc.strerror or exc}") from None
    names = [Path(part).name for part in argv]
    if "barnabas" in names:
        role = next((part for part in names[names.index("barnabas") + 1 :] if part in ROLES), None)
        if role is not None:
            return role
    raise CliError(f"process {pid} is not a barnabas broker or proxy: {' '.join(argv).strip()[:120]}")


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, exited but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _answers(admin: str) -> bool:
    """Whether the admin endpoint answers /healthz at all (any status)."""
    try:
        with urllib.request.urlopen(f"{admin}/healthz", timeout=PROBE_TIMEOUT_S):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False
